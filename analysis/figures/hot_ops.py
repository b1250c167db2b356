"""Hot-ops figure: top groups by device time (self vs total)."""
from __future__ import annotations

import plotly.graph_objects as go

from ..hot_ops import hot_ops
from ._common import empty_figure, frame, short


def hot_ops_figure(obj, by: str = "op", top: int = 20) -> go.Figure:
    """Horizontal bars of the ``top`` groups by self device time, with total time as a lighter bar.
    ``obj``: a Trace (grouped ``by``) or a hot_ops DataFrame."""
    df = frame(obj, hot_ops, by=by)
    df = df[df["device_time_total_ns"] > 0].head(top)
    if df.empty:
        return empty_figure("Hot ops", "no device time in this trace")
    df = df.iloc[::-1]
    labels = [short(i) for i in df.index]
    fig = go.Figure()
    fig.add_bar(y=labels, x=df["device_time_total_ns"] / 1e3, orientation="h", name="total", marker_color="#aec7e8")
    fig.add_bar(y=labels, x=df["device_time_self_ns"] / 1e3, orientation="h", name="self", marker_color="#1f77b4",
                customdata=df[["calls", "share_of_step_time_percent"]].to_numpy(),
                hovertemplate="%{y}<br>self %{x:.1f} µs<br>calls %{customdata[0]}<br>"
                              "%{customdata[1]:.1f}% of step<extra></extra>")
    fig.update_layout(title=f"Hot {df.index.name or 'op'}s by device time", barmode="overlay", xaxis_title="µs",
                      template="plotly_white", height=max(300, 24 * len(df) + 120), margin=dict(l=260))
    return fig
