"""Diff figure: per-op time delta split into more calls / slower per call / moved across the roofline."""
from __future__ import annotations

import plotly.graph_objects as go

from ._common import empty_figure, short


def diff_figure(df, top: int = 20) -> go.Figure:
    """Stacked horizontal bars (µs) of the ``top`` ops by |delta| from :func:`analysis.diff`."""
    if df.empty:
        return empty_figure("Trace diff", "no ops to compare")
    if not df["delta_ns"].fillna(0).abs().gt(0).any():  # e.g. two ranks running the same program
        return empty_figure("Time delta per op (b − a)", f"no difference: each of the {len(df):,} aligned rows takes "
                                                          "the same device time in both traces")
    d = df.head(top).iloc[::-1]
    labels = [short(" | ".join(str(p) for p in (i if isinstance(i, tuple) else (i,)) if p), 70) for i in d.index]
    fig = go.Figure()
    for col, name, color in (("more_calls_ns", "more launches", "#9467bd"),
                             ("slower_per_call_ns", "slower per launch", "#d62728"),
                             ("moved_across_roofline_ns", "moved across the roofline", "#ff7f0e")):
        fig.add_bar(y=labels, x=d[col] / 1e3, orientation="h", name=name, marker_color=color)
    fig.update_layout(title="Time delta per op (b − a)", barmode="relative", xaxis_title="µs",
                      template="plotly_white",
                      height=max(300, 24 * len(d) + 120), margin=dict(l=320))
    return fig
