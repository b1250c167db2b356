"""pandas API for Neuron (and imported GPU) traces: where does the time go, why, and what to change.

    import analysis
    t = analysis.load("rank00000_window000.nprof")     # or a Kineto .json(.gz), or a run directory
    t.summary()                                         # metric, value, unit, description
    t.hot_ops(by="module"); t.roofline(); t.recommendations()
    analysis.figures.roofline_figure(t)                 # plotly Figure

Every analysis is a pure function ``trace -> DataFrame`` (columns documented with units) with a figure
builder in :mod:`analysis.figures`; the ``Trace`` methods delegate to them. Nothing here imports Dash.
"""
from __future__ import annotations

from .collectives import collective_skew_matrix, collectives, collectives_across_ranks
from .diff import diff
from .dma import dma_queues, dma_sizes, dma_throughput
from .flops import op_flops_and_bytes, instruction_work
from .hot_ops import hot_ops
from .recommend import recommendations
from .roofline import roofline, roofline_ceilings
from .steps import step_window, steps
from .summary import summary, summary_dict
from .trace import Trace, TraceSet, load

_BREAKDOWN = ("classify_kernels", "kernel_breakdown", "temporal_breakdown", "idle_time_breakdown",
              "comm_comp_overlap")


def __getattr__(name: str):
    # breakdown.py is owned by another module author; import it lazily so this package stays importable.
    if name in _BREAKDOWN:
        from . import breakdown

        return getattr(breakdown, name)
    if name == "figures":
        import importlib

        return importlib.import_module(".figures", __name__)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


__all__ = ["load", "Trace", "TraceSet", "steps", "step_window", "summary", "summary_dict", "hot_ops",
           "roofline", "roofline_ceilings", "collectives", "collectives_across_ranks",
           "collective_skew_matrix", "dma_throughput", "dma_queues", "dma_sizes", "diff", "recommendations",
           "instruction_work", "op_flops_and_bytes", *_BREAKDOWN]
