"""plotly figure builders, one per analysis. Each takes a Trace (or the analysis DataFrame) and returns a
``plotly.graph_objects.Figure``; nothing here imports Dash. ``FIGURES``: {analysis name: builder}, built from
each analysis's ``figure`` in :mod:`analysis.registry`."""
from __future__ import annotations

from ..registry import REGISTRY
from .breakdown import (
    comm_comp_overlap_figure,
    idle_time_figure,
    kernel_breakdown_figure,
    temporal_breakdown_figure,
    temporal_breakdown_note,
)
from .collectives import collectives_figure, skew_heatmap
from .dependencies import dependencies_figure
from .diff import diff_figure
from .dma import dma_queues_figure, dma_sizes_figure, dma_throughput_figure
from .hot_ops import hot_ops_figure, module_treemap_figure
from .memory import hbm_usage_figure, memory_allocations_figure, memory_occupancy_figure
from .ranks import rank_balance_figure, rank_timeline_figure
from .recommend import recommendations_figure
from .roofline import roofline_figure
from .source_lines import source_lines_figure
from .summary import (
    dma_bytes_figure,
    engine_utilisation_figure,
    flops_breakdown_figure,
    steps_figure,
    summary_figure,
    time_split_figure,
)

__all__ = ["summary_figure", "steps_figure", "time_split_figure", "engine_utilisation_figure",
           "flops_breakdown_figure", "dma_bytes_figure", "hot_ops_figure", "module_treemap_figure", "roofline_figure",
           "collectives_figure",
           "skew_heatmap", "dma_throughput_figure", "dma_queues_figure", "dma_sizes_figure", "diff_figure",
           "recommendations_figure", "kernel_breakdown_figure", "temporal_breakdown_figure", "temporal_breakdown_note",
           "idle_time_figure",
           "comm_comp_overlap_figure", "rank_balance_figure",
           "rank_timeline_figure", "dependencies_figure", "source_lines_figure",
           "memory_allocations_figure", "memory_occupancy_figure", "hbm_usage_figure"]

#: {analysis name: its figure builder}, from the registry (every registered analysis that names a figure)
FIGURES = {name: globals()[spec.figure] for name, spec in REGISTRY.items() if spec.figure}
