"""DMA page: throughput over time, queue use and transfer-size histogram (analysis.dma_* and their
figure builders in analysis.figures)."""
from __future__ import annotations

from dash import html

from analysis import figures

from .. import frames
from ..state import ViewState
from .common import Ctx, data_table, graph, guarded, note, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    if not len(trace.dma):
        return html.Div([html.H2(f"DMA: {trace.name}"),
                         note("no DMA transfers in this trace (GPU memcpy appear on the Timeline and Hot ops)")],
                        id="dma-page")
    return html.Div([
        html.H2(f"DMA: {trace.name}"),
        section("Throughput over time",
                guarded(lambda: graph(frames.figure(ctx, state, "dma_throughput", figures.dma_throughput_figure),
                                      id="dma-throughput", height=320))),
        section("Queues", guarded(_with_table, ctx, state, "queues", figures.dma_queues_figure, "dma-queues")),
        section("Transfer sizes", guarded(_with_table, ctx, state, "sizes", figures.dma_sizes_figure,
                                          "dma-sizes")),
    ], id="dma-page")


def _with_table(ctx, state, what: str, figure_fn, id_: str):
    """The figure of one DMA analysis and its table."""
    df = frames.dma(ctx, state, what)
    return html.Div([graph(figure_fn(df), id=id_, height=300),
                     data_table(df, id=f"{id_}-table", page_size=10, analysis=f"dma_{what}")])
