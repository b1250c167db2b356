"""pandas API for Neuron (and imported GPU) traces: where does the time go, why, and what to change.

    import analysis
    t = analysis.load("rank00000_window000.nprof")     # or a Kineto .json(.gz), or a directory (TraceSet)
    t.summary()                                         # metric, value, unit, description, label
    t.hot_ops(by="module"); t.roofline(); t.recommendations()
    t.temporal_breakdown(hta_compatible=True)           # HTA 0.5.0's numbers (docs/hta_definitions.md)
    analysis.check(t)                                   # invariants: shares, peaks, spans
    analysis.figures.roofline_figure(t)                 # plotly Figure

Every analysis is a pure function ``trace -> DataFrame`` registered in :mod:`analysis.registry` with its
documented columns (units, human labels) and figure builder; the registry generates the ``Trace`` methods
(memoised per trace, results are copies the caller owns) and ``__all__``. Layers, each importing only those
below: :mod:`analysis.core` (table names, intervals, categoricals, device peaks, the definition of device
time, memo hand-out, runs) -> :mod:`analysis.analyses` (the analyses) -> this package, :mod:`analysis.invariants`,
:mod:`analysis.figures`, :mod:`analysis.report`. Metric formulas: :mod:`analysis.metrics`.
Nothing here imports Dash or torch (or the simulated runtime).
"""
from __future__ import annotations

import importlib as _importlib
from typing import Any

from . import registry

for _module in ("steps", "work", "activity", "breakdown", "idle", "collectives", "summary", "hot_ops", "roofline",
                "diff", "dma", "ranks", "recommend", "explorer_summary", "dependencies",
                "source_lines"):  # each registers its analyses
    _importlib.import_module(f".analyses.{_module}", __name__)

# __all__ is built below from the registry, which static checkers cannot follow: hence the F401s
from .analyses.breakdown import classify_kernels, hta_kernel_selection, merge_intervals  # noqa: E402, F401
from .analyses.ranks import cross_rank_report  # noqa: E402, F401
from .analyses.work import op_flops_and_bytes  # noqa: E402, F401
from .invariants import CheckReport, check  # noqa: E402, F401
from .registry import REGISTRY  # noqa: E402
from .trace import Trace, TraceSet, load  # noqa: E402, F401

registry.install(Trace)
registry.install(TraceSet, subjects=("traces",))

# The public functions are the registered analyses (e.g. analysis.summary is the function; its module is
# analysis.analyses.summary), plus the helpers below.
globals().update({name: spec.wrapper for name, spec in REGISTRY.items()})
_HELPERS = ["load", "Trace", "TraceSet", "check", "CheckReport", "registry", "classify_kernels",
            "hta_kernel_selection", "merge_intervals", "op_flops_and_bytes", "cross_rank_report"]
__all__ = _HELPERS + sorted(REGISTRY)


def __getattr__(name: str) -> Any:
    # analysis.figures imports plotly (~0.5 s): loaded on first use, so pure-pandas users never pay for it
    if name == "figures":
        return _importlib.import_module(".figures", __name__)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
