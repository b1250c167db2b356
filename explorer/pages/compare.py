"""Compare page: two traces side by side from analysis.diff (analysis.figures.diff_figure and the table)."""
from __future__ import annotations

from dash import Input, Output, dcc, html

import analysis
from analysis import figures

from ..state import ViewState
from .common import Ctx, data_table, graph, guarded, note, search_of, section


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    singles = [e.key for e in ctx.store.entries() if not e.is_group]
    a = state.trace if state.trace in singles else None
    if a is None and state.trace:
        e = ctx.store.entry(state.trace)
        a = e.members[0] if e.members else None
    a = a or _first_openable(ctx, singles[:3])
    # default second trace: another rank of the same run, else the next trace that opens
    siblings = [m for e in ctx.store.entries() if e.is_group and a in e.members for m in e.members if m != a]
    others = siblings + [k for k in singles if k != a and k not in siblings]
    b = state.other if state.other in singles else _first_openable(ctx, others[:3]) or a
    return html.Div([
        html.H2("Compare two traces"),
        html.Div([html.Label("Base "), dcc.Dropdown(id="cmp-a", options=singles, value=a, clearable=False,
                                                    style={"width": "420px"}),
                  html.Label(" vs "), dcc.Dropdown(id="cmp-b", options=singles, value=b, clearable=False,
                                                   style={"width": "420px"})],
                 style={"display": "flex", "alignItems": "center", "gap": "6px"}),
        html.Div(id="cmp-body", children=body(ctx, a, b)),
    ], id="compare-page")


def _first_openable(ctx: Ctx, keys: list[str]) -> str | None:
    for k in keys:
        try:
            ctx.store.open(k)
            return k
        except Exception:  # noqa: BLE001 - a bad file is simply not the default
            continue
    return None


def body(ctx: Ctx, a: str | None, b: str | None):
    return guarded(_body, ctx, a, b)


def _body(ctx: Ctx, a, b):
    if not a or not b:
        return note("two traces are needed to compare")
    ta, tb = ctx.store.trace(a), ctx.store.trace(b)
    df = analysis.diff(ta, tb)
    if not len(df):
        return note("analysis.diff found nothing to compare")
    return html.Div([graph(figures.diff_figure(df), id="cmp-bar"),
                     section(f"{ta.name} vs {tb.name}", data_table(df.reset_index(), id="cmp-table", page_size=20))])


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("cmp-body", "children"), Output("url-out", "search", allow_duplicate=True),
                  Output("last-sync", "data", allow_duplicate=True), Input("cmp-a", "value"), Input("cmp-b", "value"),
                  prevent_initial_call=True)
    def recompare(a, b):
        search = search_of(ViewState(page="compare", trace=a, other=b))  # keep the pair in the shareable URL
        return body(ctx, a, b), search, "/compare" + search
