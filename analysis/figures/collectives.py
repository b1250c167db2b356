"""Collective figures: bandwidth per collective, and the cross-rank arrival-skew heatmap."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analyses.collectives import collective_skew_matrix, collectives
from ..analyses.cross_rank import collectives_across_ranks
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


#: the values the skew heatmap can show, in words
_SKEW_VALUES = {"arrival_delay_ns": "arrival delay (after the first rank)", "wait_ns": "time waiting for the others",
                "transfer_ns": "transfer time (after the last arrival)", "duration_ns": "duration"}


def skew_heatmap(obj, value: str = "arrival_delay_ns") -> go.Figure:
    """Heatmap collective × rank of ``value`` (µs); rows labelled "<operation> #<sequence> (group <process
    group>)" in time order. ``obj``: a TraceSet, a collectives_across_ranks DataFrame or a skew matrix."""
    if hasattr(obj, "traces") or isinstance(obj, (list, tuple)):
        obj = collectives_across_ranks(obj)
    labels: dict = {}
    if "collective" in getattr(obj, "columns", []):
        first = obj.drop_duplicates("collective")
        labels = {c: f"{op} #{seq} (group {pg})" for c, op, seq, pg in
                  zip(first["collective"], first["operation"], first["sequence_number"], first["process_group"])}
        if len(set(labels.values())) < len(labels):  # several runs (keys "<run>:<group>#<seq>"): keep them apart
            labels = {c: f"{lab} [{c}]" for c, lab in labels.items()}
        obj = collective_skew_matrix(obj, value)
    m = obj
    if m.empty:
        return empty_figure("Collective skew", "no collectives matched across ranks")
    rows = [labels.get(c, str(c)) for c in m.index]
    # every value is a time >= 0: white is "none", so equal arrivals do not read as a delay
    z = m.to_numpy() / 1e3
    zmax = max(float(np.nanmax(z)) if np.isfinite(z).any() else 0.0, 1.0)  # at least 1 µs: all-zero stays white
    fig = go.Figure(go.Heatmap(z=z, x=[f"rank {r}" for r in m.columns], y=rows, zmin=0, zmax=zmax,
                               colorscale="Reds", colorbar_title="µs",
                               hovertemplate="%{y}, %{x}: %{z:.1f} µs<extra></extra>"))
    fig.update_layout(title=f"Collectives: {_SKEW_VALUES.get(value, value)} per rank (µs)", template="plotly_white",
                      yaxis={"autorange": "reversed", "tickmode": "array", "tickvals": rows, "ticktext": rows}
                      if len(rows) <= 60 else {"autorange": "reversed"},
                      height=max(300, min(1200, 22 * len(rows) + 160)))
    return fig
