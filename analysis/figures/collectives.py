"""Collective figures: bandwidth per collective, and the cross-rank arrival-skew heatmap."""
from __future__ import annotations

import plotly.graph_objects as go

from ..analyses.collectives import collective_skew_matrix, collectives, collectives_across_ranks
from ._common import empty_figure, frame


def collectives_figure(obj) -> go.Figure:
    """Scatter of bus bandwidth (GB/s) against start time, one colour per operation; marker size ~
    message size. ``obj``: a Trace or a :func:`analysis.collectives` DataFrame."""
    df = frame(obj, collectives)
    if df.empty:
        return empty_figure("Collectives", "no collectives in this trace")
    fig = go.Figure()
    t0 = df["start_ts"].min()
    for op, d in df.groupby(df["operation"].astype(str)):
        fig.add_scatter(x=(d["start_ts"] - t0) / 1e6, y=d["busbw_bytes_per_s"] / 1e9, mode="markers", name=op,
                        customdata=d[["duration_ns", "size_bytes"]].to_numpy(),
                        hovertemplate="%{y:.2f} GB/s<br>%{customdata[0]} ns, %{customdata[1]} B<extra></extra>")
    fig.update_layout(title="Collective bus bandwidth", xaxis_title="time (ms from first collective)",
                      yaxis_title="busbw (GB/s)", template="plotly_white")
    return fig


def skew_heatmap(obj, value: str = "arrival_delay_ns") -> go.Figure:
    """Heatmap collective × rank of ``value`` (µs). ``obj``: a TraceSet, a collectives_across_ranks
    DataFrame or a skew matrix."""
    if hasattr(obj, "traces") or isinstance(obj, (list, tuple)):
        obj = collectives_across_ranks(obj)
    m = obj if "collective" not in getattr(obj, "columns", []) else collective_skew_matrix(obj, value)
    if m.empty:
        return empty_figure("Collective skew", "no collectives matched across ranks")
    fig = go.Figure(go.Heatmap(z=m.to_numpy() / 1e3, x=[f"rank {r}" for r in m.columns], y=list(m.index),
                               colorscale="Reds", colorbar_title="µs"))
    fig.update_layout(title=f"Collectives: {value.replace('_ns', '')} per rank (µs)", template="plotly_white",
                      yaxis_autorange="reversed")
    return fig
