"""Compare page: two traces side by side from analysis.diff (analysis.figures.diff_figure and the table).

The default pair is meaningful: the trace shown and another rank of its run, else another trace of the same
run id or device, else the next servable trace; a trace is never compared with itself. The alignment keys
(``keys=op&keys=module&keys=shape``, analysis.diff's keys) are selectable: traces of different devices
(e.g. trn2 vs H100) default to aligning by op only, since module paths and shapes rarely match there.
"""
from __future__ import annotations

from dash import Input, Output, State, html

from analysis import figures

from .. import frames
from ..state import DIFF_KEYS, ViewState
from ..store import new_request
from .common import Ctx, data_table, graph, guarded, note, search_of, section


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _singles(ctx: Ctx) -> list[str]:
    return [e.key for e in ctx.store.entries() if not e.is_group]


def _base(ctx: Ctx, state: ViewState, singles: list[str]) -> str | None:
    if state.trace in singles:
        return state.trace
    if state.trace:
        e = ctx.store.entry(state.trace)
        if e.members:
            ranks = [t.rank for t in ctx.store.open(e.key).traces]
            k = ranks.index(state.rank) if state.rank in ranks else 0
            return e.members[min(k, len(e.members) - 1)]
    return _first_openable(ctx, singles[:3])


def default_other(ctx: Ctx, a: str, singles: list[str]) -> str | None:
    """Another rank of ``a``'s run, else a trace with the same run id or device kind, else the next one that
    opens; never ``a`` itself (None when there is no other trace)."""
    siblings = [m for e in ctx.store.entries() if e.is_group and a in e.members for m in e.members if m != a]
    try:
        ha = ctx.store.trace(a).header
    except Exception:  # noqa: BLE001
        ha = None
    same, rest = [], []
    for k in singles:
        if k == a or k in siblings:
            continue
        try:
            hb = ctx.store.trace(k).header
        except Exception:  # noqa: BLE001 - a bad file is simply not the default
            continue
        kinds = lambda h: {d.kind for d in h.devices}  # noqa: E731
        (same if ha is not None and (hb.run_id == ha.run_id or kinds(hb) == kinds(ha)) else rest).append(k)
        if len(same) >= 1:
            break
    for k in siblings + same + rest:
        return k
    return None


def _first_openable(ctx: Ctx, keys: list[str]) -> str | None:
    for k in keys:
        try:
            ctx.store.open(k)
            return k
        except Exception:  # noqa: BLE001 - a bad file is simply not the default
            continue
    return None


def default_keys(ctx: Ctx, a: str, b: str) -> tuple[str, ...]:
    """analysis.diff's keys, or op alone for traces of different device kinds."""
    ka = {d.kind for d in ctx.store.trace(a).header.devices}
    kb = {d.kind for d in ctx.store.trace(b).header.devices}
    return DIFF_KEYS if ka == kb else ("op",)


def _layout(ctx: Ctx, state: ViewState):
    import dash_mantine_components as dmc

    singles = _singles(ctx)
    a = _base(ctx, state, singles)
    b = state.other if state.other in singles and state.other != a else (default_other(ctx, a, singles) if a else None)
    if not a or not b:
        return html.Div([html.H2("Compare two traces"),
                         note("Compare needs two traces: open a folder holding at least two (e.g. two ranks of a run, "
                              "or the same model on two devices). A trace is never compared with itself.")],
                        id="compare-page")
    keys = state.keys or default_keys(ctx, a, b)
    opts = [{"label": k, "value": k} for k in singles]
    return html.Div([
        html.H2("Compare two traces"),
        html.Div([dmc.Select(id="cmp-a", data=opts, value=a, label="Base (A)", searchable=True, w=380, size="xs",
                             allowDeselect=False),
                  dmc.Select(id="cmp-b", data=opts, value=b, label="Other (B)", searchable=True, w=380, size="xs",
                             allowDeselect=False),
                  dmc.MultiSelect(id="cmp-keys", data=list(DIFF_KEYS), value=list(keys), label="Align by",
                                  w=260, size="xs")], className="nx-row"),
        html.Div(id="cmp-body", children=body(ctx, a, b, keys)),
    ], id="compare-page")


def body(ctx: Ctx, a: str | None, b: str | None, keys=DIFF_KEYS):
    return guarded(_body, ctx, a, b, tuple(keys) or DIFF_KEYS)


def _body(ctx: Ctx, a, b, keys):
    if not a or not b:
        return note("choose two traces")
    if a == b:
        return note("the two sides are the same trace: choose another one to compare with")
    ta, tb = ctx.store.trace(a), ctx.store.trace(b)
    df = frames.diff(ctx, a, b, keys)
    if not len(df):
        return note(f"nothing aligns by {', '.join(keys)}: neither trace has device work attributed to ops")
    both = int(((df["calls_a"] > 0) & (df["calls_b"] > 0)).sum())
    head = note(f"{len(df):,} rows by {', '.join(keys)}; {both:,} present in both. A = {ta.name}, B = {tb.name}.")
    if both == 0:
        head = html.Div([head, note("no row is present in both traces: try aligning by op only")])
    return html.Div([head, graph(figures.diff_figure(df), id="cmp-bar"),
                     section(f"{ta.name} (A) vs {tb.name} (B)",
                             data_table(df, id="cmp-table", page_size=20, analysis="diff"))])


def warm_pair(ctx: Ctx, key: str) -> None:
    """Compute the Compare page's default diff of ``key`` (its default partner and alignment keys) into the
    store's cache: part of the background precompute of a trace (each side's per-op profile is memoised on
    its own trace, so another pair reuses it)."""
    singles = _singles(ctx)
    a = _base(ctx, ViewState(trace=key), singles)
    b = default_other(ctx, a, singles) if a else None
    if a and b and a != b:
        frames.diff(ctx, a, b, tuple(default_keys(ctx, a, b)) or DIFF_KEYS)


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("cmp-body", "children"), Output("url-out", "search", allow_duplicate=True),
                  Output("last-sync", "data", allow_duplicate=True), Input("cmp-a", "value"), Input("cmp-b", "value"),
                  Input("cmp-keys", "value"), State("url", "search"), prevent_initial_call=True)
    def recompare(a, b, keys, _search):
        keys = tuple(k for k in keys or () if k in DIFF_KEYS) or DIFF_KEYS
        search = search_of(ViewState(page="compare", trace=a, other=b, keys=keys))  # the pair in the URL
        new_request()
        return body(ctx, a, b, keys), search, "/compare" + search
