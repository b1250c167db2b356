"""Roofline figure: ops as points (arithmetic intensity, achieved FLOP/s) under the device ceilings."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.colors import qualitative

from ..analyses.roofline import roofline, roofline_ceilings
from ._common import empty_figure, short

_BOUND_COLORS = {"compute": "#d62728", "memory": "#1f77b4", "unknown": "#7f7f7f"}
_CEILING_COLORS = ("#222222", "#8c564b", "#2ca02c", "#9467bd", "#17becf", "#bcbd22", "#e377c2")  # not the point colours
COLOR_BY = ("bound", "engine")


def roofline_figure(trace, top: int = 200, dtypes: tuple[str, ...] | None = None, *,
                    ops: pd.DataFrame | None = None, color_by: str = "bound") -> go.Figure:
    """Log-log roofline of the ``top`` ops by device time: x = FLOP/byte, y = achieved TFLOP/s, marker size
    ~ device time, colour = ``color_by`` ("bound" or "engine"); ceilings = compute peaks (per dtype /
    engine) under the memory roof per core (min of HBM and DMA bandwidth on Neuron, HBM on GPUs).
    ``dtypes``: limit the compute ceilings drawn (default: the dtypes of the plotted ops). ``ops``: the rows
    of :func:`analysis.roofline` to plot (e.g. a filtered subset; default: all). Each point's ``customdata``
    is [device time µs, % of roof, dtype, row label in ``roofline(trace)``] so a click can find its op."""
    if color_by not in COLOR_BY:
        raise ValueError(f"unknown color_by {color_by!r}; valid: {', '.join(COLOR_BY)}")
    r = roofline(trace) if ops is None else ops
    r = r[np.isfinite(r["arithmetic_intensity"].astype(float)) & (r["flops"].astype(float) > 0)]  # empty: object
    r = r.sort_values("device_time_ns", ascending=False).head(top)
    c = roofline_ceilings(trace)
    if r.empty and c.empty:
        return empty_figure("Roofline", "no ops with FLOPs and bytes, and no device peaks in the header")
    fig = go.Figure()
    ai_lo = max(1e-3, float(r["arithmetic_intensity"].min()) / 10) if len(r) else 1e-2
    ai_hi = max(1e4, float(r["arithmetic_intensity"].max()) * 10) if len(r) else 1e4
    xs = np.logspace(np.log10(ai_lo), np.log10(ai_hi), 200)
    comp = c[c["kind"] == "compute"]
    want = set(dtypes) if dtypes else set(r["dtype"]) | {"bfloat16"}
    comp = comp[(comp["engine"] != "matrix") | comp["dtype"].isin(want)]
    for k, (_, row) in enumerate(comp.iterrows()):
        y = np.minimum(xs * row["bandwidth_bytes_per_s"], row["peak_flops_per_s"]) / 1e12
        dash = "dot" if row["engine"] != "matrix" else "solid"
        fig.add_scatter(x=xs, y=y, mode="lines",
                        line=dict(width=1.2, dash=dash, color=_CEILING_COLORS[k % len(_CEILING_COLORS)]),
                        name=f"{row['device_name']} {row['engine']} {row['dtype']} "
                             f"({row['peak_flops_per_s'] / 1e12:.3g} TFLOP/s; memory roof "
                             f"{row['bandwidth_bytes_per_s'] / 1e9:.4g} GB/s)")
    if len(r):
        size = 8 + 30 * np.sqrt(r["device_time_ns"] / r["device_time_ns"].max())
        if color_by == "bound":
            colors = dict(_BOUND_COLORS)
        else:
            keys = sorted(map(str, r["engine"].unique()))
            colors = {k: qualitative.Dark24[i % len(qualitative.Dark24)] for i, k in enumerate(keys)}
        for key, color in colors.items():
            m = (r[color_by].astype(str) == key).to_numpy()
            if m.any():
                rr = r[m]
                fig.add_scatter(x=rr["arithmetic_intensity"], y=rr["achieved_flops_per_s"] / 1e12, mode="markers",
                                name=f"{key} bound" if color_by == "bound" else key,
                                marker=dict(size=size[m], color=color, opacity=0.7),
                                text=[short(o) for o in rr["op"]],
                                customdata=np.c_[rr["device_time_ns"] / 1e3, rr["efficiency_percent"], rr["dtype"],
                                                 rr.index.to_numpy()],
                                hovertemplate="%{text}<br>AI %{x:.2f} FLOP/B<br>%{y:.3f} TFLOP/s<br>"
                                              "%{customdata[0]:.1f} µs, %{customdata[1]:.1f}% of roof, "
                                              "%{customdata[2]}<extra></extra>")
    fig.update_layout(title="Roofline", xaxis_type="log", yaxis_type="log",
                      xaxis_title="arithmetic intensity (FLOP/byte)",
                      yaxis_title="achieved TFLOP/s", template="plotly_white", legend=dict(font=dict(size=10)))
    return fig
