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
    fig.update_layout(title=dict(text="Step time", font_size=13), xaxis_title="step", yaxis_title="ms",
                      template="plotly_white", height=min(300, 140 + 8 * len(df)), bargap=0.5,
                      margin=dict(l=50, r=10, t=30, b=40))
    return fig


_PART_COLOURS = {"compute": "#2a9d8f", "collectives": "#e76f51", "dma": "#457b9d", "other": "#a8dadc",
                 "idle": "#d9d9d9"}
_PART_LABELS = {"compute": "compute", "collectives": "collectives", "dma": "DMA", "other": "other device work",
                "idle": "idle (host / waiting)"}


def time_split_figure(obj) -> go.Figure:
    """One stacked horizontal bar: where the time goes (:func:`analysis.time_split`), each part's share of the
    analysed span. ``obj``: a Trace or a time_split DataFrame."""
    from ..analyses.summary_items import time_split

    df = frame(obj, time_split)
    if df.empty:
        return empty_figure("Where the time goes", "no analysed time")
    fig = go.Figure()
    for part, ns, pct in zip(df["part"], df["time_ns"], df["percent"]):
        if ns <= 0:
            continue
        fig.add_trace(go.Bar(x=[pct], y=[""], orientation="h", name=f"{_PART_LABELS.get(part, part)} {pct:.1f}%",
                             marker_color=_PART_COLOURS.get(part), text=f"{pct:.0f}%" if pct >= 6 else "",
                             textposition="inside", hovertemplate=f"{part}: {ns / 1e6:.3f} ms ({pct:.1f}%)"
                                                                  "<extra></extra>"))
    fig.update_layout(barmode="stack", template="plotly_white", height=110, margin=dict(l=10, r=10, t=10, b=10),
                      xaxis=dict(range=[0, 100], visible=False), yaxis_visible=False,
                      legend=dict(orientation="h", y=-0.15, x=0, traceorder="normal"))
    return fig


def engine_utilisation_figure(obj) -> go.Figure:
    """One bar per engine: the share of the analysed time it is busy (the ``<Engine>_active_percent`` rows of
    :func:`analysis.summary`). ``Tensor`` (LoadStationary: weight loads) and ``TensorMatrix`` (MultiplyMoving:
    the matmuls) are the same TensorE, split in two rows as Neuron Explorer does; the labels say so."""
    df = frame(obj, summary)
    m = df[df["metric"].str.endswith("_active_percent") & (df["unit"] == "percent")
           & ~df["metric"].isin(["device_active_percent"])]
    m = m[m["value"].notna()]
    if m.empty:
        return empty_figure("Engine utilisation", "no engine rows in this trace")
    eng = [x[: -len("_active_percent")] for x in m["metric"]]
    names = {"Tensor": "Tensor (weight loads)", "TensorMatrix": "TensorMatrix (matmuls)"}
    y = [names.get(e, e) for e in eng][::-1]
    v = m["value"].to_numpy(dtype=float)[::-1]
    fig = go.Figure(go.Bar(x=v, y=y, orientation="h", text=[f"{x:.1f}%" for x in v], textposition="outside",
                           marker_color="#2a9d8f", hovertext=m["description"].to_numpy()[::-1]))
    fig.update_layout(template="plotly_white", height=60 + 26 * len(v), margin=dict(l=170, r=40, t=10, b=30),
                      xaxis=dict(title="busy, % of analysed time", range=[0, max(100.0, float(np.nanmax(v)) * 1.1)]))
    return fig


def flops_breakdown_figure(obj) -> go.Figure:
    """One stacked bar of the TensorE capacity (:func:`analysis.flops_breakdown`): model, transpose, throttled,
    unused; unknown parts are named in the title rather than drawn."""
    from ..analyses.summary_items import flops_breakdown

    df = frame(obj, flops_breakdown)
    known = df[df["percent"].notna()]
    if known.empty:
        return empty_figure("TensorE FLOPs", "unknown: " + "; ".join(df["note"].astype(str).unique()))
    colours = {"model": "#2a9d8f", "transpose": "#e9c46a", "throttled": "#e76f51", "unused": "#d9d9d9"}
    fig = go.Figure()
    for c, f, p in zip(known["component"], known["flops"], known["percent"]):
        fig.add_trace(go.Bar(x=[p], y=[""], orientation="h", name=f"{c} {p:.1f}%", marker_color=colours.get(c),
                             hovertemplate=f"{c}: {f:.4g} FLOP ({p:.2f}% of capacity)<extra></extra>"))
    missing = [c for c in df["component"] if c not in set(known["component"])]
    fig.update_layout(barmode="stack", template="plotly_white", height=110, margin=dict(l=10, r=10, t=24, b=10),
                      xaxis=dict(range=[0, 100], visible=False), yaxis_visible=False,
                      title=dict(text=f"unknown: {', '.join(missing)}" if missing else "", font_size=12),
                      legend=dict(orientation="h", y=-0.15, x=0, traceorder="normal"))
    return fig


def dma_bytes_figure(obj, by: str = "source") -> go.Figure:
    """Horizontal bars of DMA bytes per group (:func:`analysis.dma_bytes_by`)."""
    from ..analyses.summary_items import dma_bytes_by

    df = frame(obj, dma_bytes_by, by=by)
    title = "DMA bytes by " + ("source" if by == "source" else "data type")
    if df.empty:
        return empty_figure(title, "no DMA rows in this trace")
    fig = go.Figure(go.Bar(x=df["percent"][::-1], y=df["group"][::-1], orientation="h",
                           text=[f"{p:.1f}%" for p in df["percent"][::-1]], textposition="outside",
                           customdata=df["bytes"][::-1], marker_color="#457b9d",
                           hovertemplate="%{y}: %{customdata:,} B (%{x:.1f}%)<extra></extra>"))
    fig.update_layout(title=dict(text=title, font_size=13), template="plotly_white", height=70 + 26 * len(df),
                      margin=dict(l=190, r=40, t=30, b=20), xaxis=dict(range=[0, 110], title="% of DMA bytes"))
    return fig
