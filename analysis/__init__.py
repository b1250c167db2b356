"""pandas API for Neuron (and imported GPU) traces: where does the time go, why, and what to change.

    import analysis
    t = analysis.load("rank00000_window000.nprof")     # or a Kineto .json(.gz), or a run directory (TraceSet)
    t.summary()                                         # metric, value, unit, description
    t.hot_ops(by="module"); t.roofline(); t.recommendations()
    analysis.figures.roofline_figure(t)                 # plotly Figure

Public API (stable; every analysis is a pure function ``trace -> DataFrame`` whose docstring names the
columns and units, with a figure builder in :mod:`analysis.figures`; the ``Trace`` methods delegate):

- ``load``, ``Trace`` (tables as DataFrames, ``table(name, columns)``, ``analysis_table()`` (only the columns
  the analyses read), ``device_activity()``, ``devices``, ``steps()``, ``window()``, ``select_steps()``,
  ``whole()``), ``TraceSet`` (``traces``, ``ranks``, ``runs``, ``by_rank``, ``by_run``, ``collectives()``)
- ``steps``, ``step_window``; ``summary``, ``summary_dict``; ``hot_ops``; ``roofline``, ``roofline_ceilings``
- ``collectives``, ``collectives_across_ranks``, ``collective_skew_matrix``, ``straggler_ranks``;
  ``rank_balance``, ``rank_timeline`` (load balance of the ranks of a run)
- ``dma_throughput``, ``dma_queues``, ``dma_sizes``; ``diff``; ``recommendations``
- ``instruction_work`` (per-instruction op / FLOPs / bytes, the basis of the above), ``op_flops_and_bytes``
- from :mod:`analysis.breakdown`: ``classify_kernels``, ``kernel_breakdown``, ``temporal_breakdown``,
  ``idle_time_breakdown``, ``comm_comp_overlap`` (HTA definitions)
- metric formulas: :mod:`analysis.metrics`

Note: ``analysis.summary`` (and ``hot_ops``, ``roofline``, ``diff``, ``collectives``, ``steps``) name the
functions; import submodules explicitly (``from analysis.summary import union_ns``) to reach helpers.
Nothing here imports Dash or torch.
"""
from __future__ import annotations

from .breakdown import classify_kernels, comm_comp_overlap, idle_time_breakdown, kernel_breakdown, temporal_breakdown
from .collectives import collective_skew_matrix, collectives, collectives_across_ranks, straggler_ranks
from .diff import diff
from .dma import dma_queues, dma_sizes, dma_throughput
from .flops import op_flops_and_bytes, instruction_work
from .hot_ops import hot_ops
from .ranks import rank_balance, rank_timeline
from .recommend import recommendations
from .roofline import roofline, roofline_ceilings, roofline_point_rows
from .steps import step_window, steps
from .summary import summary, summary_dict
from .trace import Trace, TraceSet, load


def __getattr__(name: str):
    # analysis.figures imports plotly (~0.5 s): loaded on first use, so pure-pandas users never pay for it
    if name == "figures":
        import importlib

        return importlib.import_module(".figures", __name__)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


__all__ = ["load", "Trace", "TraceSet", "steps", "step_window", "summary", "summary_dict", "hot_ops",
           "roofline", "roofline_ceilings", "roofline_point_rows", "collectives", "collectives_across_ranks",
           "collective_skew_matrix", "straggler_ranks", "rank_balance", "rank_timeline", "dma_throughput",
           "dma_queues", "dma_sizes", "diff", "recommendations",
           "instruction_work", "op_flops_and_bytes", "classify_kernels", "kernel_breakdown", "temporal_breakdown",
           "idle_time_breakdown", "comm_comp_overlap"]
