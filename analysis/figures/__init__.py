"""plotly figure builders, one per analysis. Each takes a Trace (or the analysis DataFrame) and returns a
``plotly.graph_objects.Figure``; nothing here imports Dash. ``FIGURES``: {analysis name: builder}, from the
registry (:func:`analysis.registry.figure_index`)."""
from __future__ import annotations

from .breakdown import comm_comp_overlap_figure, idle_time_figure, kernel_breakdown_figure, temporal_breakdown_figure
from .collectives import collectives_figure, skew_heatmap
from .diff import diff_figure
from .dma import dma_queues_figure, dma_sizes_figure, dma_throughput_figure
from .hot_ops import hot_ops_figure, module_treemap_figure
from .ranks import rank_balance_figure, rank_timeline_figure
from .recommend import recommendations_figure
from .roofline import roofline_figure
from .summary import steps_figure, summary_figure

__all__ = ["summary_figure", "steps_figure", "hot_ops_figure", "module_treemap_figure", "roofline_figure",
           "collectives_figure",
           "skew_heatmap", "dma_throughput_figure", "dma_queues_figure", "dma_sizes_figure", "diff_figure",
           "recommendations_figure", "kernel_breakdown_figure", "temporal_breakdown_figure", "idle_time_figure",
           "comm_comp_overlap_figure", "rank_balance_figure",
           "rank_timeline_figure"]


def __getattr__(name: str):
    if name == "FIGURES":
        from ..registry import figure_index

        return figure_index()
    raise AttributeError(f"module 'analysis.figures' has no attribute {name!r}")
