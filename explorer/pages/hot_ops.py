"""Hot ops page: sortable, filterable table (analysis.hot_ops), top-ops bar chart
(analysis.figures.hot_ops_figure), treemap by module (analysis.figures.module_treemap_figure)."""
from __future__ import annotations

from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

import analysis
from analysis import figures
from analysis.analyses.hot_ops import GROUPINGS

from ..state import ViewState, decode
from .common import Ctx, data_table, graph, guarded, note, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    return html.Div([
        html.H2(f"Hot ops: {trace.name}"),
        html.Label("Group by "), dcc.RadioItems(id="ho-by", options=list(GROUPINGS), value="op", inline=True),
        html.Div(id="ho-body", children=guarded(body, trace, "op")),
        section("Device time by module", guarded(_treemap, trace)),
    ], id="hot-ops-page")


def body(trace, by: str):
    df = analysis.hot_ops(trace, by=by)
    if not len(df):
        return note("no device work attributed to ops in this trace")
    return html.Div([graph(figures.hot_ops_figure(df), id="ho-bar"),
                     data_table(df.reset_index(), id="ho-table", page_size=15)])


def _treemap(trace):
    fig = figures.module_treemap_figure(trace)
    fig.update_layout(title=None, margin={"t": 10})  # the section heading names it
    return graph(fig, id="ho-treemap", height=420)


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("ho-body", "children"), Input("ho-by", "value"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def regroup(by, pathname, search):
        if by not in GROUPINGS:
            raise PreventUpdate
        return guarded(lambda: body(trace_or_error(ctx, decode(pathname, search)), by))
