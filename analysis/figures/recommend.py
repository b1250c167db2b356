"""Recommendations figure: estimated time saved per insight."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analyses.recommend import recommendations
from ._common import empty_figure, frame

_COLORS = {"high": "#d62728", "medium": "#ff7f0e", "low": "#1f77b4"}


def recommendations_figure(obj) -> go.Figure:
    """Horizontal bars of est_time_saved_ns (µs) per recommendation, coloured by severity; the action in the
    hover. ``obj``: a Trace or a recommendations DataFrame."""
    df = frame(obj, recommendations)
    if df.empty:
        return empty_figure("Recommendations", "no rule fired for this trace")
    d = df.iloc[::-1]
    fig = go.Figure(go.Bar(y=d["title"], x=np.nan_to_num(d["est_time_saved_ns"].to_numpy(float)) / 1e3, orientation="h",
                           marker_color=[_COLORS.get(s, "#7f7f7f") for s in d["severity"]],
                           hovertext=d["evidence"] + "<br><b>Action:</b> " + d["action"]))
    fig.update_layout(title="Recommendations (estimated time saved)", xaxis_title="µs", template="plotly_white",
                      height=max(300, 30 * len(d) + 120), margin=dict(l=360))
    return fig
