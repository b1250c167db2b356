"""Summary figures: utilisation bars (MFU, HFU, MBU, engine activity) and step durations."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from ..analyses.steps import steps
from ..analyses.summary import summary
from ._common import empty_figure, frame


def summary_figure(obj) -> go.Figure:
    """Horizontal bars of every percent metric of :func:`analysis.summary` (MFU, HFU, MBU, device and
    engine activity, DMA, collectives, idle). ``obj``: a Trace or a summary DataFrame. NaN metrics are
    listed in the hover text as unavailable rather than drawn."""
    df = frame(obj, summary)
    p = df[(df["unit"] == "percent")]
    if p.empty:
        return empty_figure("Summary", "no metrics")
    p = p.iloc[::-1]
    val = p["value"].to_numpy(dtype=float)
    labels = p["label"] if "label" in p.columns else p["metric"]
    fig = go.Figure(go.Bar(x=np.nan_to_num(val), y=labels, orientation="h",
                           text=[f"{v:.1f}%" if np.isfinite(v) else "n/a" for v in val], textposition="outside",
                           hovertext=p["description"],
                           marker_color=["#1f77b4" if np.isfinite(v) else "#cccccc" for v in val]))
    fig.update_layout(title="Utilisation summary", xaxis_title="percent", template="plotly_white",
                      height=max(300, 22 * len(p) + 100), margin=dict(l=220))
    return fig


def steps_figure(obj) -> go.Figure:
    """Bar per step: duration in ms. ``obj``: a Trace or a steps DataFrame."""
    df = frame(obj, steps)
    if df.empty:
        return empty_figure("Steps", "no ProfilerStep#N or step markers in this trace")
    fig = go.Figure(go.Bar(x=df["step"].astype(str), y=df["duration_ns"] / 1e6, name="step time"))
    fig.update_layout(title="Step time", xaxis_title="step", yaxis_title="ms", template="plotly_white")
    return fig
