"""pandas API for Neuron (and imported GPU) traces: where does the time go, why, and what to change.

    import analysis
    t = analysis.load("rank00000_window000.nprof")     # or a Kineto .json(.gz), or a directory (TraceSet)
    t.summary()                                         # metric, value, unit, description, label
    t.hot_ops(by="module"); t.roofline(); t.recommendations()
    t.temporal_breakdown(hta_compatible=True)           # HTA 0.5.0's numbers (docs/hta_definitions.md)
    analysis.check(t)                                   # invariants: shares, peaks, spans
    analysis.figures.roofline_figure(t)                 # plotly Figure

Every analysis is a pure function ``trace -> DataFrame``, imported below by name, with its documented columns
(units, human labels) and figure builder in :mod:`analysis.registry`; :class:`Trace` and :class:`TraceSet`
have a written-out method for each (:mod:`analysis.methods`; memoised per trace, results are copies the
caller owns). Layers, each importing only those below: :mod:`analysis.core` (table names, intervals,
categoricals, device peaks, the definition of device time, memo hand-out, runs) -> :mod:`analysis.analyses`
(the analyses) -> :mod:`analysis.methods`, :mod:`analysis.trace` -> this package, :mod:`analysis.invariants`,
:mod:`analysis.figures`, :mod:`analysis.report`. Metric formulas: :mod:`analysis.metrics`.
Nothing here imports Dash or torch (or the simulated runtime).
"""
from __future__ import annotations

import importlib as _importlib
from typing import Any

from . import registry
from .analyses.area import area_stats
from .analyses.breakdown import (
    classify_kernels,
    comm_comp_overlap,
    device_activity,
    hta_kernel_selection,
    kernel_breakdown,
    merge_intervals,
    temporal_breakdown,
)
from .analyses.collectives import collective_skew_matrix, collectives, straggler_ranks
from .analyses.cross_rank import collectives_across_ranks
from .analyses.dependencies import event_dependencies
from .analyses.diff import diff, op_profile
from .analyses.dma import dma_queues, dma_sizes, dma_throughput
from .analyses.explorer_summary import SUMMARY_KEY as EXPLORER_SUMMARY_KEY
from .analyses.explorer_summary import neuron_explorer_comparison
from .analyses.hot_ops import GROUPINGS as HOT_OPS_GROUPINGS
from .analyses.hot_ops import hot_ops
from .analyses.idle import idle_time_breakdown
from .analyses.measured import measured_flops
from .analyses.memory import hbm_usage, memory_allocations, memory_occupancy, memory_summary
from .analyses.pairing import TraceIdentity, alignment_keys, default_partner, identity, relation
from .analyses.ranks import (
    cross_rank_report,
    rank_balance,
    rank_timeline,
    run_recommendations,
    slow_links,
    slowest_ranks_per_step,
    stragglers,
)
from .analyses.recommend import recommendations
from .analyses.regions import regions
from .analyses.roofline import roofline, roofline_ceilings, roofline_point_rows
from .analyses.source_lines import source_lines
from .analyses.steps import STEP_BOUNDARY, step_window, steps
from .analyses.summary import summary, summary_dict
from .analyses.summary_items import dma_bytes_by, flops_breakdown, summary_items, time_split
from .analyses.timeline_tracks import cumulative_utilization, dma_engines, op_hierarchy
from .analyses.unpriced import unpriced_reason
from .analyses.work import instruction_work, op_flops_and_bytes, work_source
from .core.memo import handout
from .invariants import CheckReport, check
from .trace import Trace, TraceSet, load

__all__ = [
    # loading
    "load", "Trace", "TraceSet", "check", "CheckReport", "registry",
    # helpers
    "classify_kernels", "hta_kernel_selection", "merge_intervals", "op_flops_and_bytes", "cross_rank_report",
    "HOT_OPS_GROUPINGS", "EXPLORER_SUMMARY_KEY", "STEP_BOUNDARY", "unpriced_reason", "work_source", "op_profile",
    # what a trace is of, and which traces pair up (analysis.analyses.pairing)
    "TraceIdentity", "identity", "relation", "default_partner", "alignment_keys",
    # the registered analyses (tests/analysis/test_facade.py checks this list against the registry)
    "steps", "step_window", "instruction_work", "device_activity", "temporal_breakdown", "kernel_breakdown",
    "comm_comp_overlap", "idle_time_breakdown", "collectives", "straggler_ranks", "collective_skew_matrix",
    "summary", "summary_dict", "hot_ops", "roofline_ceilings", "roofline", "roofline_point_rows", "diff",
    "dma_throughput", "dma_queues", "dma_sizes", "collectives_across_ranks", "rank_balance", "rank_timeline",
    "run_recommendations", "stragglers", "slow_links", "slowest_ranks_per_step", "recommendations",
    "neuron_explorer_comparison", "area_stats", "regions", "measured_flops", "event_dependencies", "source_lines",
    "time_split", "flops_breakdown", "summary_items", "dma_bytes_by",
    "memory_allocations", "memory_occupancy", "hbm_usage", "memory_summary",
    "op_hierarchy", "dma_engines", "cumulative_utilization", "handout",
]


def __getattr__(name: str) -> Any:
    # analysis.figures imports plotly (~0.5 s): loaded on first use, so pure-pandas users never pay for it
    if name == "figures":
        return _importlib.import_module(".figures", __name__)
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")
