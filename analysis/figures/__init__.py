"""plotly figure builders, one per analysis. Each takes a Trace (or the analysis DataFrame) and returns a
``plotly.graph_objects.Figure``; nothing here imports Dash."""
from __future__ import annotations

from .collectives import collectives_figure, skew_heatmap
from .diff import diff_figure
from .dma import dma_queues_figure, dma_sizes_figure, dma_throughput_figure
from .hot_ops import hot_ops_figure, module_treemap_figure
from .recommend import recommendations_figure
from .roofline import roofline_figure
from .summary import steps_figure, summary_figure

def __getattr__(name: str):
    # figures/breakdown.py belongs to the breakdown module's author; its builders are re-exported lazily.
    if name.startswith("__") or name == "breakdown":
        raise AttributeError(f"module 'analysis.figures' has no attribute {name!r}")
    import importlib

    breakdown = importlib.import_module(".breakdown", __name__)
    try:
        return getattr(breakdown, name)
    except AttributeError:
        raise AttributeError(f"module 'analysis.figures' has no attribute {name!r}") from None


__all__ = ["summary_figure", "steps_figure", "hot_ops_figure", "module_treemap_figure", "roofline_figure",
           "collectives_figure",
           "skew_heatmap", "dma_throughput_figure", "dma_queues_figure", "dma_sizes_figure", "diff_figure",
           "recommendations_figure"]
