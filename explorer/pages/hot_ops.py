"""Hot ops page: sortable, filterable table (analysis.hot_ops), top-ops bar chart, treemap by module."""
from __future__ import annotations

import plotly.graph_objects as go
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from ..state import ViewState, decode
from .common import Ctx, analysis_call, data_table, error_box, graph, guarded, note, section, trace_or_error

GROUPINGS = ("op", "module", "engine", "stack")
TOP = 20


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    return html.Div([
        html.H2(f"Hot ops: {trace.name}"),
        html.Label("Group by "), dcc.RadioItems(id="ho-by", options=list(GROUPINGS), value="op", inline=True),
        html.Div(id="ho-body", children=body(trace, "op")),
        section("Device time by module", guarded(treemap, trace)),
    ], id="hot-ops-page")


def body(trace, by: str):
    df, err = analysis_call("hot_ops", trace, by=by)
    if err:
        return error_box(err)
    if not len(df):
        return note("no device work attributed to ops in this trace")
    df = df.reset_index()
    top = df.head(TOP).iloc[::-1]
    fig = go.Figure(go.Bar(x=top["device_time_self_ns"] / 1e3, y=top[by].astype(str), orientation="h",
                           hovertemplate="%{y}: %{x:.4g} µs<extra></extra>", marker={"color": "#1f77b4"}))
    fig.update_layout(xaxis_title="device time, self (µs)", margin={"l": 260, "t": 20},
                      height=max(260, 22 * len(top) + 80))
    return html.Div([graph(fig, id="ho-bar"), data_table(df, id="ho-table", page_size=15)])


def treemap(trace):
    df, err = analysis_call("hot_ops", trace, by="module")
    if err:
        return error_box(err)
    df = df.reset_index()
    df = df[df["module"].astype(str) != ""]
    if not len(df):
        return note("no module information (capture with with_modules / with_stack to see modules)")
    ids = df["module"].astype(str).tolist()
    idset = set(ids)
    parents = []
    for m in ids:
        p = m.rsplit(".", 1)[0] if "." in m else ""
        while p and p not in idset:
            p = p.rsplit(".", 1)[0] if "." in p else ""
        parents.append(p)
    fig = go.Figure(go.Treemap(ids=ids, labels=[m.rsplit(".", 1)[-1] for m in ids], parents=parents,
                               values=df["device_time_self_ns"] / 1e3, branchvalues="remainder",
                               hovertemplate="%{id}<br>self %{value:.4g} µs<extra></extra>"))
    fig.update_layout(margin={"t": 10, "l": 0, "r": 0, "b": 0}, height=420)
    return graph(fig, id="ho-treemap")


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("ho-body", "children"), Input("ho-by", "value"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def regroup(by, pathname, search):
        if by not in GROUPINGS:
            raise PreventUpdate
        return guarded(lambda: body(trace_or_error(ctx, decode(pathname, search)), by))
