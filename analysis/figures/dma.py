"""DMA figures: throughput over time, per-queue utilisation, transfer-size histogram."""
from __future__ import annotations

import plotly.graph_objects as go

from .. import metrics as M
from ..analyses.dma import dma_queues, dma_sizes, dma_throughput
from ._common import empty_figure, frame


def dma_throughput_figure(obj, bins: int = 200) -> go.Figure:
    """Line of DMA throughput (GB/s) over time. ``obj``: a Trace or a dma_throughput DataFrame."""
    df = frame(obj, dma_throughput, bins=bins)
    if df.empty or df["bytes"].sum() == 0:
        return empty_figure("DMA throughput", "no DMA transfers in this trace")
    t0 = df["bin_start_ts"].min()
    fig = go.Figure()
    groups = df.groupby(df.columns[0]) if df.columns[0] not in ("bin_start_ts",) else [("all", df)]
    for name, d in groups:
        fig.add_scatter(x=(d["bin_start_ts"] - t0) / 1e3, y=d["throughput_bytes_per_s"] / 1e9, mode="lines",
                        name=str(name), line_shape="hv")
    fig.update_layout(title="DMA throughput", xaxis_title="µs", yaxis_title="GB/s", template="plotly_white")
    return fig


def dma_queues_figure(obj) -> go.Figure:
    """Bars of per-queue utilisation (%) with achieved bandwidth in the hover. ``obj``: Trace or DataFrame."""
    df = frame(obj, dma_queues)
    if df.empty:
        return empty_figure("DMA queues", "no DMA transfers in this trace")
    fig = go.Figure(go.Bar(x=df["queue"], y=df["utilization_percent"],
                           customdata=df[["achieved_bandwidth_bytes_per_s", "average_bytes"]].to_numpy() / [1e9, 1],
                           hovertemplate="%{x}: %{y:.1f}%<br>%{customdata[0]:.2f} GB/s, "
                                         "avg %{customdata[1]:.0f} B<extra></extra>"))
    fig.update_layout(title="DMA queue utilisation", yaxis_title="percent busy", template="plotly_white")
    return fig


def dma_sizes_figure(obj) -> go.Figure:
    """Histogram of transfer counts per power-of-two size bucket; buckets below 32 KiB in orange."""
    df = frame(obj, dma_sizes)
    if df.empty:
        return empty_figure("DMA sizes", "no DMA transfers in this trace")
    labels = [f"<{int(h)} B" if h <= 1024 else f"<{int(h) // 1024} KiB" for h in df["bucket_high_bytes"]]
    fig = go.Figure(go.Bar(x=labels, y=df["transfers"],
                           marker_color=["#ff7f0e" if b else "#1f77b4" for b in df["below_efficient"]]))
    fig.update_layout(title=f"DMA transfer sizes (orange: below {M.EFFICIENT_DMA_BYTES // 1024} KiB)",
                      xaxis_title="size bucket", yaxis_title="transfers", template="plotly_white")
    return fig
