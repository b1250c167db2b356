"""Timeline page: rows per core/engine, DMA queue, CC core, stream, host thread and counter, drawn at a
server-side level of detail; zoom re-queries the store; click opens event details with flows."""
from __future__ import annotations

import analysis
import numpy as np
import pandas as pd
from dash import Input, Output, State, ctx as dash_ctx, dcc, html, no_update
from dash.exceptions import PreventUpdate

from ..rows import COLOR_MODES, EVENT_TABLES, event_label
from ..state import ViewState
from ..viewport import ID_SHIFT, build_figure, query_view
from .common import Ctx, error_box, guarded, note, search_of, window_href

DETAIL_CHILDREN = 25


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    index = ctx.store.timeline(state.trace, state.rank)
    groups = index.groups
    rows = [i for i in state.rows or () if i < len(groups)] or None  # URL positions that exist here
    shown = [groups[i] for i in rows] if rows else None
    view = query_view(index, state.t0, state.t1, ctx.width_px, shown, state.q, picked=_picked(index, state.pick))
    fig = build_figure(index, view, state.color, state.sel, revision=f"{state.trace}|{state.rank}")
    st = {"trace": state.trace, "rank": state.rank, "t0": view.t0, "t1": view.t1, "q": state.q,
          "color": state.color, "sel": list(state.sel) if state.sel else None, "groups": shown,
          "rows": rows, "pick": state.pick}
    controls = html.Div([
        html.Label("Colour by "), dcc.Dropdown(id="tl-color", options=list(COLOR_MODES), value=state.color,
                                               clearable=False, style={"width": "120px", "display": "inline-block"}),
        html.Label(" Search ", style={"marginLeft": "12px"}),
        dcc.Input(id="tl-q", type="text", value=state.q, debounce=True, placeholder="event name",
                  style={"width": "200px"}),
        html.Button("Whole trace", id="tl-reset", n_clicks=0, style={"marginLeft": "12px"}),
        html.Span(id="tl-stats", children=_stats(view, index), style={"marginLeft": "12px", "color": "#555"}),
    ], style={"display": "flex", "alignItems": "center", "flexWrap": "wrap", "gap": "4px"})
    rows_ctl = html.Details([
        html.Summary("Rows (remove a group to collapse it; the order here is the display order)"),
        dcc.Dropdown(id="tl-groups", options=groups, value=shown or groups, multi=True),
    ], style={"margin": "6px 0"})
    return html.Div([
        dcc.Store(id="tl-state", data=st), dcc.Store(id="tl-sel", data=st["sel"]), dcc.Store(id="tl-zoom"),
        controls, rows_ctl,
        html.Div(id="tl-results", children=_results(ctx, state)),
        dcc.Graph(id="tl-graph", figure=fig, config={"scrollZoom": True, "displaylogo": False, "showTips": False,
                                                    "modeBarButtonsToRemove": ["select2d", "lasso2d"]},
                  clear_on_unhover=True),
        html.Div(id="tl-details", children=details(ctx, state) if state.sel else None,
                 style={"borderTop": "1px solid #ddd", "marginTop": "6px"}),
    ], id="timeline-page")


def _picked(index, point: int | None) -> dict | None:
    """Highlight marks of the instructions behind roofline point ``point`` (computed once per index)."""
    if point is None:
        return None
    key = ("pick", point)
    if key not in index.memo:
        index.memo[key] = index.picked("instructions", analysis.roofline_point_rows(index.trace, point))
    return index.memo[key]


def _pick_note(index, state: ViewState):
    if state.pick is None:
        return None
    n = int(_picked(index, state.pick)["instructions"].sum())
    return note([f"{n:,} instructions of a roofline point highlighted in gold (",
                 dcc.Link("clear", href=state.href(pick=None), id="tl-pick-clear"), ")"])


def _stats(view, index) -> str:
    return (f"{view.n_shapes} shapes · {len(view.rows)} rows · {index.n_events():,} events · "
            f"1 shape ≥ {view.threshold_ns / 1000:.3g} µs")


def _window_from_relayout(rd: dict, st: dict) -> tuple[int | None, int | None] | None:
    if not rd:
        return None
    if rd.get("xaxis.autorange"):
        return None, None
    if "xaxis.range[0]" in rd and "xaxis.range[1]" in rd:
        a, b = rd["xaxis.range[0]"], rd["xaxis.range[1]"]
    elif isinstance(rd.get("xaxis.range"), list) and len(rd["xaxis.range"]) == 2:
        a, b = rd["xaxis.range"]
    else:
        return None
    try:
        a, b = int(float(a) * 1000), int(float(b) * 1000)
    except (TypeError, ValueError):
        return None
    return (a, b) if b > a else None


def _unchanged(st: dict, color, q, groups, sel) -> bool:
    return (color == st.get("color") and (q or "") == (st.get("q") or "") and sel == st.get("sel")
            and (groups is None or st.get("groups") is None or groups == st.get("groups")))


def _state_of(st: dict, page: str = "timeline") -> ViewState:
    sel = tuple(st["sel"]) if st.get("sel") else None
    rows = tuple(st["rows"]) if st.get("rows") else None
    return ViewState(page=page, trace=st.get("trace"), rank=st.get("rank"), t0=st.get("t0"), t1=st.get("t1"),
                     sel=sel, q=st.get("q") or "", color=st.get("color") or "op", rows=rows, pick=st.get("pick"))


def register(app, ctx: Ctx) -> None:
    @app.callback(
        Output("tl-graph", "figure"), Output("tl-stats", "children"), Output("tl-state", "data"),
        Output("url-out", "search", allow_duplicate=True), Output("last-sync", "data", allow_duplicate=True),
        Input("tl-graph", "relayoutData"), Input("tl-color", "value"), Input("tl-q", "value"),
        Input("tl-groups", "value"), Input("tl-sel", "data"), Input("tl-zoom", "data"), Input("tl-reset", "n_clicks"),
        State("tl-state", "data"), State("width", "data"),
        prevent_initial_call=True)
    def update(relayout, color, q, groups, sel, zoom, _reset, st, width):
        trig = dash_ctx.triggered_id
        st = dict(st or {})
        if len(dash_ctx.triggered_prop_ids) > 1 and _unchanged(st, color, q, groups, sel):
            raise PreventUpdate  # fired for the freshly inserted page: the layout already drew this view
        if trig == "tl-graph":
            w = _window_from_relayout(relayout, st)
            if w is None:
                raise PreventUpdate
            st["t0"], st["t1"] = w
        elif trig == "tl-zoom" and zoom:
            st["t0"], st["t1"] = int(zoom[0]), int(zoom[1])
        elif trig == "tl-reset":
            st["t0"] = st["t1"] = None
        st["color"] = color if color in COLOR_MODES else "op"
        st["q"] = (q or "")[:200]
        st["sel"] = sel
        st["groups"] = groups
        try:
            index = ctx.store.timeline(st["trace"], st.get("rank"))
            all_groups = index.groups
            st["rows"] = None if groups is None or groups == all_groups else [
                all_groups.index(g) for g in groups if g in all_groups]
            view = query_view(index, st.get("t0"), st.get("t1"), int(width or ctx.width_px), groups, st["q"],
                              picked=_picked(index, st.get("pick")))
        except Exception as exc:  # noqa: BLE001 - shown in the stats line, the server keeps serving
            return no_update, f"error: {type(exc).__name__}: {exc}", st, no_update, no_update
        st["t0"], st["t1"] = view.t0, view.t1
        fig = build_figure(index, view, st["color"], tuple(sel) if sel else None,
                           revision=f"{st['trace']}|{st.get('rank')}")
        search = search_of(_state_of(st))
        return fig, _stats(view, index), st, search, "/timeline" + search

    @app.callback(Output("tl-sel", "data"), Output("tl-zoom", "data"), Input("tl-graph", "clickData"),
                  State("tl-state", "data"), prevent_initial_call=True)
    def click(cd, st):
        if not cd or not cd.get("points"):
            raise PreventUpdate
        p = cd["points"][0]
        code = p.get("customdata")
        if isinstance(code, (int, float)) and code >= 0:
            code = int(code)
            table = EVENT_TABLES[code // ID_SHIFT]
            return [table, code % ID_SHIFT], no_update
        if code == -1 and p.get("x") is not None:  # a merged shape: zoom in around it
            x = float(p["x"]) * 1000
            span = max((st.get("t1") or 0) - (st.get("t0") or 0), 1000)
            return no_update, [int(x - span / 40), int(x + span / 40)]
        raise PreventUpdate

    @app.callback(Output("tl-details", "children"), Input("tl-sel", "data"), State("tl-state", "data"),
                  prevent_initial_call=True)
    def show_details(sel, st):
        if (st or {}).get("sel") == sel:
            raise PreventUpdate  # already shown (the page was built with this selection)
        if not sel:
            return None
        return details(ctx, _state_of({**st, "sel": sel}))

    @app.callback(Output("tl-results", "children"), Input("tl-q", "value"), State("tl-state", "data"),
                  prevent_initial_call=True)
    def results(q, st):
        return guarded(_results, ctx, _state_of({**st, "q": q or ""}))


def _results(ctx: Ctx, state: ViewState):
    """The picked roofline point's note and the search results."""
    index = ctx.store.timeline(state.trace, state.rank)
    return html.Div([_pick_note(index, state), search_results(ctx, state) if state.q.strip() else None])


def _event_row(trace, table: str, rid: int) -> pd.Series | None:
    df = trace.table(table)
    if rid not in df.index:
        return None
    return df.loc[rid]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def details(ctx: Ctx, state: ViewState):
    """Details panel of the selected event: fields, launching host op, device children (flows), jumps."""
    return guarded(_details, ctx, state)


def _link_for(state: ViewState, origin: int, table: str, rid: int, row: pd.Series, text: str) -> dcc.Link:
    s = int(row["start_ts"])
    e = s + int(row["duration_ns"])
    return dcc.Link(text, href=window_href(state, origin, s, e, sel=(table, int(rid)), pad=1.0),
                    className="jump")


def _details(ctx: Ctx, state: ViewState):
    table, rid = state.sel
    index = ctx.store.timeline(state.trace, state.rank)
    trace = index.trace
    row = _event_row(trace, table, rid)
    if row is None:
        return error_box(f"no event {table}:{rid} in this trace")
    tracks = trace.table("tracks")
    items = []
    for k, v in row.items():
        if k == "track" and int(v) in tracks.index:
            v = f"{tracks.loc[int(v), 'name']} (track {int(v)})"
        items.append(html.Tr([html.Td(str(k), style={"fontWeight": "bold", "paddingRight": "12px"}),
                              html.Td(_fmt(v), style={"fontFamily": "monospace", "whiteSpace": "pre-wrap"})]))
    name = str(event_label(pd.DataFrame([row]), table).iloc[0])
    parts = [html.H4(f"{table} #{rid}: {name}", id="tl-details-title"),
             _link_for(state, index.origin, table, rid, row, "Jump to this event"),
             html.Table(items, style={"fontSize": 12})]
    host = trace.table("host_ops")
    parent = int(row["framework_op"]) if "framework_op" in row.index else -1
    flows = trace.table("flows")
    if parent < 0 and len(flows):
        m = (flows["dst_table"].astype(str) == table) & (flows["dst_row"] == rid) & (
            flows["src_table"].astype(str) == "host_ops")
        if m.any():
            parent = int(flows.loc[m, "src_row"].iloc[0])
    if parent >= 0 and parent in host.index:
        hr = host.loc[parent]
        parts += [html.H5("Launched by host op"),
                  _link_for(state, index.origin, "host_ops", parent, hr, f"host_ops #{parent}: {hr['name']}")]
    if table == "host_ops":
        kids = []
        for t in ("instructions", "dma", "collectives"):
            df = trace.table(t)
            if "framework_op" in df.columns and len(df):
                hit = df.index[df["framework_op"].to_numpy() == rid]
                kids += [(t, int(r)) for r in hit[:DETAIL_CHILDREN]]
        if len(flows):
            m = (flows["src_table"].astype(str) == "host_ops") & (flows["src_row"] == rid)
            for t, r in zip(flows.loc[m, "dst_table"].astype(str), flows.loc[m, "dst_row"]):
                if t in EVENT_TABLES and (t, int(r)) not in kids:
                    kids.append((t, int(r)))
        if kids:
            links = []
            for t, r in kids[:DETAIL_CHILDREN]:
                er = _event_row(trace, t, r)
                if er is not None:
                    lab = str(event_label(pd.DataFrame([er]), t).iloc[0])
                    links.append(html.Li(_link_for(state, index.origin, t, r, er, f"{t} #{r}: {lab}")))
            parts += [html.H5(f"Device children ({len(kids)}{'+' if len(kids) >= DETAIL_CHILDREN else ''})"),
                      html.Ul(links)]
    return html.Div(parts, className="details")


def search_results(ctx: Ctx, state: ViewState, limit: int = 30):
    """Links to the first events whose name (or launching host op's name) contains the query."""
    index = ctx.store.timeline(state.trace, state.rank)
    q = state.q.strip().lower()
    out = []
    total = 0
    for table in EVENT_TABLES:
        codes, labels = index.color_codes(table, "op")
        rows = np.flatnonzero(index.match(table, q)) if len(codes) else np.zeros(0, dtype=int)
        total += len(rows)
        df = index.trace.table(table)
        for r in rows[: max(0, limit - len(out))]:
            if r in df.index:
                er = df.loc[r]
                out.append(html.Li(_link_for(state, index.origin, table, int(r), er,
                                             f"{table} #{r}: {labels[codes[r]]}")))
    return html.Details([html.Summary(f"{total} events match “{state.q}” (highlighted in gold)"),
                         html.Ul(out)], open=False)
