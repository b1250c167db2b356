"""Timeline page: the canvas timeline (assets/timeline.js) fed by ``/api/timeline/view``, with the details,
area-selection, results and notes panels beside it.

The canvas hit-tests whole slices (hover and click anywhere on a slice), draws labels inside slices, the
track tree (per process, device, core, queue; collapsible), counters with scales and values under the
cursor, an adaptive time axis from the trace start, flows of the selected event, and the area selection.
Keys: W/S zoom, A/D pan (arrow keys too), F fits the selection, N / Shift+N next / previous result, Esc
clears the area. Callbacks here fetch and lay out: details of an event, aggregates of an area
(:mod:`explorer.selection`), search results, notes (:mod:`explorer.notes`), the event's dependencies
(:mod:`explorer.dependencies`).
"""
from __future__ import annotations

import numpy as np
from dash import ALL, Input, Output, State, dcc, html, no_update
from dash.exceptions import PreventUpdate

import analysis

from ..dependencies import dependencies_panel, register_dependencies
from ..labels import fmt_ns
from ..notes import note_list, notes_for, register_notes
from ..rows import COLOR_MODES, EVENT_TABLES, host_timeline_groups
from ..selection import area_stats
from ..state import ViewState, timeline_state
from .common import Ctx, data_table, error_box, guarded, note, window_href
from .timeline_details import details, flows_of

MAX_RESULTS = 10_000
LISTED_RESULTS = 200


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def picked_of(index, point: int | None) -> dict | None:
    """Highlight marks of the instructions behind roofline point ``point`` (computed once per index)."""
    if point is None:
        return None
    key = ("pick", point)
    if key not in index.memo:
        rows = analysis.roofline_point_rows(index.trace, point)
        index.memo[key] = index.picked("instructions", rows)
    return index.memo[key]


def meta_of(index, state: ViewState, notes: list[dict]) -> dict:
    """What the canvas needs to start: rows (label, tree path, kind, table, unit), groups, the window."""
    span = max(index.end - index.origin, 1)
    t0 = 0 if state.t0 is None else max(min(state.t0, 2 * span), -span)
    t1 = span if state.t1 is None or state.t1 <= t0 else state.t1
    groups = index.groups
    shown = [i for i in state.rows or () if i < len(groups)] or None
    return {"trace": state.trace, "rank": state.rank, "span": span, "t0": t0, "t1": t1, "color": state.color,
            "q": state.q, "pick": state.pick, "sel": list(state.sel) if state.sel else None,
            "api": "/api/timeline/view", "groups": groups, "shown": shown, "notes": notes,
            "folded": index.folded(),
            "rows": [{"label": i.label, "path": list(i.path) or [i.group], "kind": i.kind, "table": i.table,
                      "unit": i.unit, "folds": i.folds or None} for i in index.infos]}


def _controls(state: ViewState, index) -> html.Div:
    import dash_mantine_components as dmc

    return html.Div([
        dmc.SegmentedControl(id="tl-color", data=[{"label": f"Colour by {m}", "value": m} for m in COLOR_MODES],
                             value=state.color, size="xs"),
        dmc.TextInput(id="tl-q", value=state.q, placeholder="Search events by name", debounce=400, size="xs",
                      w=240),
        dmc.Button("Whole trace", id="tl-reset", size="xs", variant="default"),
        dmc.Button("Zoom to area", id="tl-fit", size="xs", variant="default"),
        html.Span("click: select · double-click: zoom to it · W/S zoom · A/D pan · drag: select area · F fit · "
                  "Ctrl+wheel zoom · click a ▸ to unfold",
                  className="nx-hint"),
        html.Span(f"{index.n_events():,} events", className="nx-hint"),
        html.Span(id="tl-stats-live", className="nx-hint"),
    ], className="nx-toolbar")


def _side(ctx: Ctx, state: ViewState, results) -> html.Div:
    import dash_mantine_components as dmc

    det = details(ctx, state) if state.sel else note("Click a slice to see its details.")
    tabs = [("details", "Details", html.Div(det, id="tl-details")),
            ("area", "Selection", html.Div(note("Drag across tracks to select an area: its events are "
                                                "counted per track and per name here."), id="tl-area-panel")),
            ("deps", "Dependencies", html.Div(dependencies_panel(ctx, None), id="tl-deps")),  # built when opened
            ("results", "Results", html.Div(results, id="tl-results-panel")),
            ("notes", "Notes", _notes_panel(ctx, state))]
    return dmc.Tabs([dmc.TabsList([dmc.TabsTab(t, value=v) for v, t, _ in tabs]),
                     *[dmc.TabsPanel(body, value=v) for v, _, body in tabs]],
                    id="tl-tabs", value="results" if (state.q or state.pick is not None) and not state.sel
                    else "details", className="nx-side")


def _notes_panel(ctx: Ctx, state: ViewState):
    import dash_mantine_components as dmc

    return html.Div([
        note("Select an area (drag), write a note, add it. Notes are kept in your data folder for this trace "
             "(never in the trace file) and travel in the page's link."),
        dmc.Textarea(id="tl-note-text", placeholder="What happens here?", autosize=True, minRows=2, size="xs"),
        dmc.Button("Add note for the selected area", id="tl-note-add", size="xs", mt=6),
        html.Div(note_list(notes_for(ctx, state), state), id="tl-notes-list"),
    ])


def _layout(ctx: Ctx, state: ViewState):
    index = ctx.store.timeline(state.trace, state.rank)
    notes = notes_for(ctx, state)
    items = result_items(ctx, state, index)
    meta = meta_of(index, state, notes)
    return html.Div([
        dcc.Store(id="tl-meta", data=meta), dcc.Store(id="tl-sel", data=meta["sel"]), dcc.Store(id="tl-area"),
        dcc.Store(id="tl-flows", data=flows_of(index, state.sel) if state.sel else None),
        dcc.Store(id="tl-results", data={"items": items, "k": -1}), dcc.Store(id="tl-notes", data=notes),
        html.Div(id="tl-js", style={"display": "none"}),
        _controls(state, index),
        _simulated_hint(index),
        html.Div([html.Div(id="tl-canvas-box", className="tl-canvas-box"),
                  _side(ctx, state, results_panel(state, items))], className="nx-timeline-main"),
    ], id="timeline-page")


def _simulated_hint(index):
    g = host_timeline_groups(index.trace)
    if not g:
        return None
    return note(f"Two host timelines: “{g[0]}” (what the analyses use) and “{g[1]}”.")


# ------------------------------------------------------------------ results (search matches, roofline picks)
def result_items(ctx: Ctx, state: ViewState, index=None) -> list[list]:
    """``[table, row id, row index, start, end]`` (ns from the trace start) of the search matches of
    ``state.q`` or, without a query, of the picked roofline point's instructions; by start, at most
    :data:`MAX_RESULTS`."""
    index = index or ctx.store.timeline(state.trace, state.rank)
    parts = []
    q = state.q.strip()
    tables = EVENT_TABLES if q else (("instructions",) if state.pick is not None else ())
    for table in tables:
        if q:
            mask = index.match(table, q)
        else:
            mask = picked_of(index, state.pick).get(table)
        rids = np.flatnonzero(mask) if mask is not None and len(mask) else np.zeros(0, dtype=np.int64)
        if not len(rids):
            continue
        row, s, e = index.locate(table, rids)
        ok = row >= 0
        parts.append((np.full(int(ok.sum()), EVENT_TABLES.index(table)), rids[ok], row[ok], s[ok], e[ok]))
    if not parts:
        return []
    t, r, w, s, e = (np.concatenate(x) for x in zip(*parts))
    o = np.argsort(s, kind="stable")[:MAX_RESULTS]
    return [[EVENT_TABLES[a], int(b), int(c), int(d), int(f)] for a, b, c, d, f in
            zip(t[o].tolist(), r[o].tolist(), w[o].tolist(), s[o].tolist(), e[o].tolist())]


def results_panel(state: ViewState, items: list[list], index=None):
    import dash_mantine_components as dmc

    if not items:
        return note("Search by name above (an op finds its device work too), or pick a roofline point, to "
                    "list events here.")
    what = f"matches of “{state.q}”" if state.q.strip() else "instructions of the picked roofline point"
    head = html.Div([dmc.Button("‹ previous", id="tl-res-prev", size="xs", variant="default"),
                     dmc.Button("next ›", id="tl-res-next", size="xs", variant="default"),
                     html.Span("", id="tl-res-pos", className="nx-hint")], className="nx-row")
    total = f"{len(items):,}{'+' if len(items) >= MAX_RESULTS else ''}"
    lis = [html.Li(html.A(f"{fmt_ns(s)} · {t} #{rid}", id={"type": "tl-res", "k": k}, n_clicks=0,
                          className="nx-res-link"))
           for k, (t, rid, _, s, _) in enumerate(items[:LISTED_RESULTS])]
    return html.Div([html.Div(f"{total} {what} (gold on the timeline), by time", className="nx-strong"), head,
                     html.Ol(lis, className="nx-results")])


# ------------------------------------------------------------------ callbacks
def register(app, ctx: Ctx) -> None:
    app.clientside_callback("function(m) { return window.neuronTimeline.mount(m); }",
                            Output("tl-js", "children"), Input("tl-meta", "data"))
    app.clientside_callback("function(f) { return window.neuronTimeline.setFlows(f); }",
                            Output("tl-js", "title"), Input("tl-flows", "data"), prevent_initial_call=True)
    app.clientside_callback("function(r) { return window.neuronTimeline.setResults(r); }",
                            Output("tl-js", "className"), Input("tl-results", "data"))
    app.clientside_callback("function(n) { return window.neuronTimeline.setNotes(n); }",
                            Output("tl-js", "lang"), Input("tl-notes", "data"), prevent_initial_call=True)
    app.clientside_callback("function(n) { return window.neuronTimeline.whole(); }",
                            Output("tl-js", "dir"), Input("tl-reset", "n_clicks"), prevent_initial_call=True)
    app.clientside_callback("function(n) { return window.neuronTimeline.focusArea(); }",
                            Output("tl-js", "accessKey"), Input("tl-fit", "n_clicks"), prevent_initial_call=True)
    app.clientside_callback(
        """function(c, q, m) { const a = window.neuronTimeline.active; if (!a) { return ''; }
           a.meta.color = c; a.meta.q = q || ''; a.request(true); return ''; }""",
        Output("tl-js", "role"), Input("tl-color", "value"), Input("tl-q", "value"), State("tl-meta", "data"),
        prevent_initial_call=True)
    app.clientside_callback(
        """function(p, n) { const t = window.dash_clientside.callback_context.triggered_id;
           if (!p && !n) { return window.dash_clientside.no_update; }
           return window.neuronTimeline.step(t === 'tl-res-prev' ? -1 : 1); }""",
        Output("tl-js", "draggable"), Input("tl-res-prev", "n_clicks"), Input("tl-res-next", "n_clicks"),
        prevent_initial_call=True)
    app.clientside_callback(
        """function(n) { const t = window.dash_clientside.callback_context.triggered_id;
           if (!t || !n.some(x => x)) { return window.dash_clientside.no_update; }
           return window.neuronTimeline.goto(t.k); }""",
        Output("tl-js", "spellCheck"), Input({"type": "tl-res", "k": ALL}, "n_clicks"), prevent_initial_call=True)

    @app.callback(Output("tl-details", "children"), Output("tl-flows", "data"),
                  Output("tl-tabs", "value", allow_duplicate=True), Input("tl-sel", "data"), State("tl-meta", "data"),
                  State("tl-tabs", "value"), prevent_initial_call=True)
    def show_details(sel, meta, tab=None):
        if not sel or not meta:
            raise PreventUpdate
        state = timeline_state(meta, sel=sel)
        try:
            index = ctx.store.timeline(state.trace, state.rank)
            flows = flows_of(index, state.sel)
        except Exception:  # noqa: BLE001 - the details box shows the error
            flows = None
        return details(ctx, state), flows, no_update if tab == "deps" else "details"  # Dependencies stays open

    @app.callback(Output("tl-area-panel", "children"), Output("tl-tabs", "value", allow_duplicate=True),
                  Input("tl-area", "data"), State("tl-meta", "data"), prevent_initial_call=True)
    def show_area(area, meta):
        if not area or not meta:
            return note("Drag across tracks to select an area."), no_update
        return guarded(area_panel, ctx, timeline_state(meta), area), "area"

    @app.callback(Output("tl-results", "data"), Output("tl-results-panel", "children"),
                  Output("tl-tabs", "value", allow_duplicate=True), Input("tl-q", "value"),
                  State("tl-meta", "data"), prevent_initial_call=True)
    def search(q, meta):
        state = timeline_state(meta, q=(q or "")[:200])
        items = guarded(result_items, ctx, state)
        if not isinstance(items, list):  # an error box
            return no_update, items, no_update
        return {"items": items, "k": -1}, results_panel(state, items), "results"

    register_notes(app, ctx)
    register_dependencies(app, ctx)


def area_panel(ctx: Ctx, state: ViewState, area: dict):
    """Aggregates of the selected area: per track, per name, counters."""
    index = ctx.store.timeline(state.trace, state.rank)
    t0, t1 = int(area.get("t0", 0)), int(area.get("t1", 0))
    rows = [int(r) for r in (area.get("rows") or [])][:5000]
    if t1 <= t0 or not rows:
        return error_box("the selected area is empty")
    tracks, names, counters = area_stats(index, t0, t1, rows)
    parts = [html.Div(f"{fmt_ns(t0)} – {fmt_ns(t1)} ({fmt_ns(t1 - t0)}), {len(rows)} tracks, "
                      f"{int(tracks['events'].sum()) if len(tracks) else 0:,} events", className="nx-strong",
                      id="tl-area-title"),
             dcc.Link("open this range", href=window_href(state, index.origin, index.origin + t0, index.origin + t1,
                                                           pad=0.0), className="nx-hint")]
    if len(names):
        parts += [html.H5("By name"), _wrapped(data_table(names, id="tl-area-names", page_size=12,
                                                          analysis="area_stats", wrap=("name",),
                                                          hidden=("mean_ns",)))]  # in the data: total / events
    if len(tracks):
        parts += [html.H5("By track"), _wrapped(data_table(tracks, id="tl-area-tracks", page_size=12,
                                                           analysis="area_stats", wrap=("track",)))]
    if len(counters):
        parts += [html.H5("Counters"), _wrapped(data_table(counters, id="tl-area-counters", page_size=8,
                                                           analysis="area_stats", wrap=("counter",)))]
    if not len(names) and not len(counters):
        parts.append(note("no event of the selected tracks in this range"))
    return html.Div(parts)



def _wrapped(grid):
    """A Selection grid in the narrow side panel: its text column wraps (full names, never "aten::a…") in a
    column narrow enough to leave the numbers room."""
    pad = {"paddingLeft": "6px", "paddingRight": "6px"}
    for c in grid.columnDefs:
        if c.get("wrapText"):
            c.update(minWidth=130, flex=2, tooltipField=c["field"], cellStyle={**c.get("cellStyle", {}), **pad})
        elif c.get("type") == "rightAligned":
            c.update(minWidth=80, flex=1, cellStyle=pad)
    return grid
