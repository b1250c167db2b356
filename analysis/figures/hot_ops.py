"""Hot-ops figure: top groups by device time (self vs total)."""
from __future__ import annotations

import plotly.graph_objects as go

from ..analyses.hot_ops import hot_ops
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


def module_treemap_figure(obj) -> go.Figure:
    """Treemap of self device time (µs) by module path: ``a.b.c`` sits inside its nearest listed ancestor
    (``a.b``, else ``a``). ``obj``: a Trace or a ``hot_ops(by="module")`` DataFrame."""
    df = frame(obj, hot_ops, by="module")
    df = df[df.index.astype(str) != ""]
    if df.empty:
        return empty_figure("Device time by module", "no module information (capture with with_modules / "
                                                     "with_stack to see modules)")
    ids = [str(m) for m in df.index]
    known = set(ids)
    parents = []
    for m in ids:
        p = m.rsplit(".", 1)[0] if "." in m else ""
        while p and p not in known:
            p = p.rsplit(".", 1)[0] if "." in p else ""
        parents.append(p)
    fig = go.Figure(go.Treemap(ids=ids, labels=[m.rsplit(".", 1)[-1] for m in ids], parents=parents,
                               values=df["device_time_self_ns"] / 1e3, branchvalues="remainder",
                               hovertemplate="%{id}<br>self %{value:.4g} µs<extra></extra>"))
    fig.update_layout(title="Device time by module (self, µs)", template="plotly_white",
                      margin=dict(t=40, l=0, r=0, b=0))
    return fig
