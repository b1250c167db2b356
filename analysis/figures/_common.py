"""Shared helpers of the figure builders: accept a Trace or an analysis DataFrame, units, empty figures."""
from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go


def frame(obj, fn: Callable, **kw) -> pd.DataFrame:
    """``obj`` itself when it is a DataFrame, else ``fn(obj, **kw)`` (obj is a Trace / TraceSet)."""
    return obj if isinstance(obj, pd.DataFrame) else fn(obj, **kw)


def empty_figure(title: str, message: str) -> go.Figure:
    """A figure with a centred note instead of data (e.g. "no DMA rows in this trace")."""
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_layout(title=title, xaxis_visible=False, yaxis_visible=False, template="plotly_white")
    return fig


def short(label: str, n: int = 60) -> str:
    label = str(label).replace("\n", " / ")
    return label if len(label) <= n else label[: n - 1] + "…"
