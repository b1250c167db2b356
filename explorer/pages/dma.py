"""DMA page: throughput over time, queue use and transfer-size histogram (analysis.dma_*)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from dash import html

from ..state import ViewState
from .common import Ctx, analysis_call, analysis_figure, data_table, graph, guarded, note, section
from .common import trace_or_error


def pick(df: pd.DataFrame, *cands: str, suffix: str | None = None) -> str | None:
    """First column among ``cands`` (or ending with ``suffix``) present in ``df``."""
    for c in cands:
        if c in df.columns:
            return c
    if suffix:
        for c in df.columns:
            if str(c).endswith(suffix):
                return str(c)
    return None


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    if not len(trace.dma):
        return html.Div([html.H2(f"DMA: {trace.name}"),
                         note("no DMA transfers in this trace (GPU memcpy appear on the Timeline and Hot ops)")],
                        id="dma-page")
    origin = int(trace.time_range[0])
    return html.Div([html.H2(f"DMA: {trace.name}"),
                     section("Throughput over time", guarded(_throughput, trace, origin)),
                     section("Queues", guarded(_queues, trace)),
                     section("Transfer sizes", guarded(_sizes, trace))], id="dma-page")


def _throughput(trace, origin: int):
    fig = analysis_figure(("dma_throughput_figure",), trace)
    if fig is not None:
        return graph(fig, id="dma-throughput", height=320)
    df, err = analysis_call("dma_throughput", trace)
    if err:
        return note(err)
    x = pick(df, "bin_start_ts", "start_ts", "ts", suffix="_ts")
    ys = [c for c in df.columns if str(c).endswith("_per_s")]
    if x is None or not ys:
        return data_table(df.reset_index(), id="dma-throughput-table")
    fig = go.Figure([go.Scatter(x=(df[x] - origin) / 1e3, y=df[y], mode="lines", name=y, line={"shape": "hv"})
                     for y in ys])
    fig.update_layout(xaxis_title="time (µs from trace start)", yaxis_title="bytes/s", height=320, margin={"t": 20})
    return graph(fig, id="dma-throughput")


def _queues(trace):
    fig = analysis_figure(("dma_queues_figure",), trace)
    df, err = analysis_call("dma_queues", trace)
    if err:
        return note(err)
    df = df.reset_index()
    key = pick(df, "queue", "track_name", "name", "queue_type") or df.columns[0]
    val = pick(df, "busy_percent", "utilization_percent", "transfer_bytes", "bytes", suffix="_percent")
    out = [graph(fig, id="dma-queues", height=300)] if fig is not None else []
    if fig is None and val is not None:
        fig = go.Figure(go.Bar(x=df[key].astype(str), y=df[val], hovertemplate="%{x}: %{y:.4g}<extra></extra>"))
        fig.update_layout(yaxis_title=val, height=300, margin={"t": 20})
        out.append(graph(fig, id="dma-queues"))
    out.append(data_table(df, id="dma-queues-table", page_size=10))
    return html.Div(out)


def _sizes(trace):
    df, err = analysis_call("dma_sizes", trace)
    if err:
        return note(err)
    df = df.reset_index()
    fig = analysis_figure(("dma_sizes_figure",), trace)
    if fig is not None:
        return html.Div([graph(fig, id="dma-sizes", height=300), data_table(df, id="dma-sizes-table", page_size=10)])
    x = pick(df, "size_bin", "bin", "bucket", "size_bytes", "transfer_bytes") or df.columns[0]
    y = pick(df, "transfers", "count", "n") or df.columns[-1]
    fig = go.Figure(go.Bar(x=df[x].astype(str), y=df[y], hovertemplate="%{x}: %{y}<extra></extra>"))
    fig.update_layout(xaxis_title=str(x), yaxis_title=str(y), height=300, margin={"t": 20})
    return html.Div([graph(fig, id="dma-sizes"), data_table(df, id="dma-sizes-table", page_size=10)])
