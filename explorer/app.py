"""The Dash app factory: header (trace picker, page links), URL routing, pages, the timeline's HTTP API.

Routing: ``dcc.Location('url')`` drives the page. Pages that change the view in place (compare pair,
roofline filters, SQL) write the new query string to ``dcc.Location('url-out', refresh=False)``: the
address bar (and history) follow without a rebuild; ``last-sync`` remembers it so a later echo does not
rebuild either. The timeline keeps its window and selection in the address bar itself (history
``replaceState``). The trace picker reloads the page at the new URL; the ranks of a group are plain links.
Components come from dash-mantine-components (Mantine's styles ship inside its bundle: no CDN).
"""
from __future__ import annotations

import json
from pathlib import Path

import dash
import dash_mantine_components as dmc
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from . import frames
from .api import register_api
from .banner import banner
from .banner import register as register_banner
from .hostcheck import protect
from .pages import collectives, compare, dma, hot_ops, memory, query, roofline, summary, timeline
from .pages.common import Ctx, error_box, guarded
from .push import register_push
from .state import PAGE_TITLES, PAGES, ViewState
from .store import TraceStore, end_request, new_request

PAGE_MODULES = {"summary": summary, "timeline": timeline, "roofline": roofline, "hot_ops": hot_ops, "dma": dma,
                "memory": memory, "collectives": collectives, "compare": compare, "query": query}
THEME = {"fontFamily": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "primaryColor": "indigo",
         "defaultRadius": "sm", "fontSizes": {"md": "14px"}}
_RESET_KEYS = ['rank', 't0', 't1', 'sel', 'q', 'other', 'rows', 'pick', 'engines', 'bounds', 'note', 'region',
               'keys', 'sql']


def build_page(ctx: Ctx, state: ViewState):
    """The layout of one page for one URL state (pure: used by the router and the unit tests)."""
    new_request()
    try:
        return _build_page(ctx, state)
    finally:
        end_request()


def _build_page(ctx: Ctx, state: ViewState):
    if not state.trace:
        state = state.with_(trace=ctx.store.default_key())
    if not state.trace:
        return error_box("no trace found under the served path")
    notice = [url_problems(state.problems)] if state.problems else []
    page = PAGE_MODULES[state.page].layout(ctx, state)
    start_precompute(ctx, state.trace)
    return html.Div([*notice, guarded(banner, ctx, state), page])


def start_precompute(ctx: Ctx, key: str | None):
    """Precompute every page of ``key`` in the background, once per open trace (the first page built for it
    starts it; ``neuron-explorer`` starts it for the first trace when it starts): the frames of each page
    (``frames.warm``), then Compare's diff with the default partner, whose own per-op profile starts at once on
    a thread of its own (``compare.warm_partner``). Returns the warm-up thread, None when it was
    already started (or the trace does not open: the page shows why)."""
    if not ctx.precompute or not key:
        return None
    try:
        if not ctx.store.claim_precompute(key):
            return None
    except Exception:  # noqa: BLE001 - the page shows the error
        return None
    compare.warm_partner(ctx, key)  # the partner's side of Compare, beside this trace's own frames
    return frames.warm(ctx, key, extra=(("compare", lambda: compare.warm_pair(ctx, key)),))


def grid_preload():
    """An empty, hidden grid in the app's frame: AG Grid's code (dash-ag-grid loads it when the first grid is
    drawn, ~0.9 MB) loads while the browser waits for the page from the server, not after the page came."""
    import dash_ag_grid as dag

    return html.Div(dag.AgGrid(id="nx-grid-preload", rowData=[], columnDefs=[{"field": "x"}]),
                    style={"display": "none"}, **{"aria-hidden": "true"})


def url_problems(problems: tuple[str, ...]) -> html.Div:
    """What was wrong in the address (each value ignored: the page shows its default instead)."""
    return html.Div([html.B("The address has invalid values, ignored: "), html.Span("; ".join(problems))],
                    className="nx-url-problems", id="url-problems",
                    style={"background": "#fff4e5", "border": "1px solid #f0c36d", "padding": "8px 10px",
                           "margin": "8px 0", "color": "#663c00"})


def _nav(state: ViewState) -> list:
    return [dcc.Link(PAGE_TITLES[p], href=state.href(page=p), id=f"nav-{p}",
                     className="nx-nav-link" + (" nx-nav-active" if p == state.page else ""))
            for p in PAGES]


def create_app(path: str | Path | None = None, *, store: TraceStore | None = None, cache_size: int = 4,
               progress: bool = False, width_px: int = 1400, wait_s: float | None = 1.0,
               allow_hosts: tuple[str, ...] = (), precompute: bool = True) -> dash.Dash:
    """Build the app serving the traces under ``path`` (a trace file or a directory). A page waits up to
    ``wait_s`` seconds for an analysis frame, then shows "computing" in that section and is pushed again when a
    frame is ready (``explorer.push``; None: wait). ``precompute``: the first page of a trace starts computing
    every page's frames in the background (``start_precompute``).
    Requests must name 127.0.0.1, localhost or [::1] (any port) or one of ``allow_hosts`` (``NAME[:PORT]``, ``*``:
    any), else 403: ``explorer.hostcheck``, which ``neuron-explorer`` narrows to the port it serves."""
    if store is None:
        if path is None:
            raise ValueError("create_app needs a path or a store")
        store = TraceStore(path, cache_size=cache_size, progress=progress)
    ctx = Ctx(store=store, width_px=width_px, wait_s=wait_s, precompute=precompute)
    app = dash.Dash(__name__, title="neuron-explorer", suppress_callback_exceptions=True,
                    assets_folder=str(Path(__file__).parent / "assets"), update_title=None,
                    assets_path_ignore=["vendor"])  # served, loaded on demand (assets/plotlyPreload.js)
    app._explorer_ctx = ctx  # for tests and the benchmark
    app.server._explorer_app = app
    entries = store.entries()
    options = [{"label": e.label, "value": e.key} for e in entries]
    header = html.Header([
        html.Div([html.Span("neuron-explorer", className="nx-brand"),
                  dmc.Select(id="trace-picker", data=options, value=store.default_key(), searchable=True,
                             allowDeselect=False, w=640, size="xs", comboboxProps={"withinPortal": True},
                             maxDropdownHeight=420),
                  html.Span(id="rank-links", className="nx-ranks")], className="nx-header-top"),
        html.Nav(id="nav", className="nx-nav"),
    ], className="nx-header")
    app.layout = dmc.MantineProvider(html.Div([
        dcc.Location(id="url"), dcc.Location(id="url-out", refresh=False), dcc.Store(id="nav-dummy"),
        dcc.Store(id="last-sync"), dcc.Store(id="width", data=width_px),
        grid_preload(), header,
        dcc.Loading(html.Main(id="page", className="nx-page"), type="default", delay_show=300,
                    target_components={"page": "children"},  # page changes only, not in-page callbacks
                    overlay_style={"visibility": "visible", "opacity": 0.6}),
    ], className="nx-app"), theme=THEME)

    app.clientside_callback("function(p) { return Math.max(600, Math.min(3000, window.innerWidth - 200)); }",
                            Output("width", "data"), Input("url", "pathname"))

    @app.callback(Output("page", "children"), Output("nav", "children"), Output("trace-picker", "value"),
                  Output("rank-links", "children"), Output("last-sync", "data", allow_duplicate=True),
                  Input("url", "pathname"), Input("url", "search"), State("last-sync", "data"),
                  State("width", "data"), prevent_initial_call="initial_duplicate")
    def route(pathname, search, last_sync, width):
        if last_sync is not None and (pathname or "") + (search or "") == last_sync:
            raise PreventUpdate  # our own URL update (a page changed its view in place)
        state = ctx.decode(pathname, search)
        ctx.width_px = int(width or width_px)
        return (build_page(ctx, state), _nav(state), state.trace, _rank_links(store, state),
                (pathname or "") + (search or ""))

    # Switching trace reloads the page at the new URL (simple and robust); ranks are plain links.
    app.clientside_callback(
        """function(v) {
            const u = new URL(window.location.href);
            const cur = u.searchParams.get('trace') || %s;
            if (!v || v === cur) { return window.dash_clientside.no_update; }
            for (const k of %s) { u.searchParams.delete(k); }
            u.searchParams.set('trace', v);
            window.location.assign(u.toString());
            return window.dash_clientside.no_update;
        }""" % (json.dumps(store.default_key()).replace("<", "\\u003c"), json.dumps(_RESET_KEYS)),  # noqa: UP031 (JS braces)
        Output("nav-dummy", "data"), Input("trace-picker", "value"), prevent_initial_call=True)

    register_push(app, store)  # a section still computing: pushed when its frame is ready (explorer.push)

    register_banner(app)
    for mod in PAGE_MODULES.values():
        reg = getattr(mod, "register", None)
        if reg is not None:
            reg(app, ctx)
    register_api(app.server, store, timeline.picked_of)
    protect(app.server, "127.0.0.1", None, allow_hosts)
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
    return ["rank "] + [dcc.Link(f"{r}", href=state.href(rank=r, t0=None, t1=None, sel=None), id=f"rank-link-{r}",
                                 className="nx-rank" + (" nx-rank-active" if r == cur else ""))
                        for r in ranks]
