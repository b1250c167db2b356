"""DMA page: throughput over time, queue use and transfer-size histogram (analysis.dma_* and their
figure builders in analysis.figures)."""
from __future__ import annotations

from dash import html

import analysis
from analysis import figures

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
                guarded(lambda: graph(figures.dma_throughput_figure(trace), id="dma-throughput", height=320))),
        section("Queues", guarded(_with_table, analysis.dma_queues, figures.dma_queues_figure, trace, "dma-queues")),
        section("Transfer sizes", guarded(_with_table, analysis.dma_sizes, figures.dma_sizes_figure, trace,
                                          "dma-sizes")),
    ], id="dma-page")


def _with_table(fn, figure_fn, trace, id_: str):
    """The figure of one DMA analysis and its table."""
    df = fn(trace)
    return html.Div([graph(figure_fn(df), id=id_, height=300),
                     data_table(df.reset_index(), id=f"{id_}-table", page_size=10)])
