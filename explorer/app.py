"""The Dash app factory: header (trace picker, page links), URL routing, pages.

Routing: ``dcc.Location('url')`` drives the page. Pages that change the view in place (timeline zoom,
compare pair) write the new query string to ``dcc.Location('url-out', refresh=False)``: the address bar
(and history) follow without a rebuild; ``last-sync`` remembers it so a later echo does not rebuild either.
The trace picker reloads the page at the new URL; the ranks of a group are plain links.
"""
from __future__ import annotations

import json
from pathlib import Path

import dash
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from .pages import collectives, compare, dma, hot_ops, roofline, summary, timeline
from .pages.common import Ctx, error_box
from .state import PAGE_TITLES, PAGES, ViewState, decode
from .store import TraceStore

PAGE_MODULES = {"summary": summary, "timeline": timeline, "roofline": roofline, "hot_ops": hot_ops, "dma": dma,
                "collectives": collectives, "compare": compare}


def build_page(ctx: Ctx, state: ViewState):
    """The layout of one page for one URL state (pure: used by the router and the unit tests)."""
    if not state.trace:
        return error_box("no trace found under the served path" if not ctx.store.entries()
                         else "choose a trace above")
    return PAGE_MODULES[state.page].layout(ctx, state)


def _nav(state: ViewState) -> list:
    return [dcc.Link(PAGE_TITLES[p], href=state.href(page=p), id=f"nav-{p}",
                     style={"marginRight": "14px", "fontWeight": "bold" if p == state.page else "normal"})
            for p in PAGES]


def create_app(path: str | Path | None = None, *, store: TraceStore | None = None, cache_size: int = 4,
               progress: bool = False, width_px: int = 1400) -> dash.Dash:
    """Build the app serving the traces under ``path`` (a trace file or a directory)."""
    if store is None:
        if path is None:
            raise ValueError("create_app needs a path or a store")
        store = TraceStore(path, cache_size=cache_size, progress=progress)
    ctx = Ctx(store=store, width_px=width_px)
    app = dash.Dash(__name__, title="Neuron Explorer (open)", suppress_callback_exceptions=True,
                    assets_folder=str(Path(__file__).parent / "assets"), update_title=None)
    app._explorer_ctx = ctx  # for tests and the benchmark
    entries = store.entries()
    options = [{"label": e.label, "value": e.key} for e in entries]
    app.layout = html.Div([
        dcc.Location(id="url"), dcc.Location(id="url-out", refresh=False), dcc.Store(id="nav-dummy"),
        dcc.Store(id="last-sync"), dcc.Store(id="width", data=width_px),
        html.Div([
            html.Span("neuron-explorer", style={"fontWeight": "bold", "fontSize": 18, "marginRight": "18px"}),
            dcc.Dropdown(id="trace-picker", options=options, value=store.default_key(), clearable=False,
                         style={"width": "480px", "display": "inline-block", "verticalAlign": "middle"}),
            html.Span(id="rank-links"),
        ], style={"display": "flex", "alignItems": "center", "gap": "8px", "padding": "6px 0"}),
        html.Div(id="nav", style={"padding": "6px 0", "borderBottom": "1px solid #ddd"}),
        dcc.Loading(html.Div(id="page", style={"padding": "6px 0"}), type="default", delay_show=300),
    ], style={"fontFamily": "sans-serif", "margin": "0 12px"})

    app.clientside_callback("function(p) { return Math.max(600, Math.min(3000, window.innerWidth - 200)); }",
                            Output("width", "data"), Input("url", "pathname"))

    @app.callback(Output("page", "children"), Output("nav", "children"), Output("trace-picker", "value"),
                  Output("rank-links", "children"), Output("last-sync", "data", allow_duplicate=True),
                  Input("url", "pathname"), Input("url", "search"), State("last-sync", "data"),
                  State("width", "data"), prevent_initial_call="initial_duplicate")
    def route(pathname, search, last_sync, width):
        if last_sync is not None and (pathname or "") + (search or "") == last_sync:
            raise PreventUpdate  # our own URL update after a zoom: the page is already showing it
        state = decode(pathname, search)
        if state.trace is None:
            state = state.with_(trace=store.default_key())
        ctx.width_px = int(width or width_px)
        return (build_page(ctx, state), _nav(state), state.trace, _rank_links(store, state),
                (pathname or "") + (search or ""))

    # Switching trace reloads the page at the new URL (simple and robust); ranks are plain links.
    app.clientside_callback(
        """function(v) {
            const u = new URL(window.location.href);
            const cur = u.searchParams.get('trace') || %s;
            if (!v || v === cur) { return window.dash_clientside.no_update; }
            for (const k of ['rank', 't0', 't1', 'sel', 'q', 'other', 'rows', 'pick', 'engines', 'bounds']) { u.searchParams.delete(k); }
            u.searchParams.set('trace', v);
            window.location.assign(u.toString());
            return window.dash_clientside.no_update;
        }""" % json.dumps(store.default_key()).replace("<", "\\u003c"),  # file names cannot close the script
        Output("nav-dummy", "data"), Input("trace-picker", "value"), prevent_initial_call=True)

    for mod in PAGE_MODULES.values():
        reg = getattr(mod, "register", None)
        if reg is not None:
            reg(app, ctx)
    return app


def _rank_links(store: TraceStore, state: ViewState) -> list:
    """For a group of ranks: one link per rank (the current one in bold)."""
    try:
        e = store.entry(state.trace) if state.trace else None
    except ValueError:
        return []
    if e is None or not e.is_group:
        return []
    try:
        ranks = [t.rank for t in store.open(e.key).traces]
    except Exception:  # noqa: BLE001 - the page shows the error
        return []
    cur = state.rank if state.rank in ranks else ranks[0]
    return ["rank: "] + [dcc.Link(f"{r}", href=state.href(rank=r, t0=None, t1=None, sel=None), id=f"rank-link-{r}",
                                  style={"marginRight": "8px", "fontWeight": "bold" if r == cur else "normal"})
                         for r in ranks]
