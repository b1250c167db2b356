"""Compare page: two traces side by side from analysis.diff (analysis.figures.diff_figure and the table).

The default pair comes from the traces' headers through ``analysis.default_partner``: the trace shown and
another rank (or window) of its run, else a trace of the same model (eager vs ``torch.compile``); never an
unrelated trace (B is then left for the user to choose), never the trace itself. The alignment keys
(``keys=op&keys=module&keys=shape``, analysis.diff's keys) are selectable; by default
(``analysis.alignment_keys``) traces of different devices or with different module names (eager vs compiled)
align by op alone, others by op, module and shape. The page says why B and the keys were chosen.
"""
from __future__ import annotations

import logging
import threading

from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

import analysis
from analysis import figures

from .. import frames
from ..state import DIFF_KEYS, ViewState
from ..store import end_request, new_request
from .common import Ctx, data_table, graph, guarded, note, search_of, section

LOG = logging.getLogger("explorer")


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


def _header_trace(ctx: Ctx, key: str):
    """A trace to read ``key``'s identity from: the open one when the store holds it, else the file read
    lazily (header only; no table is loaded unless the header does not name the model), so scanning a folder
    for a partner does not evict the open traces."""
    if key in ctx.store.cached_keys() or not key.endswith(".nprof"):
        return ctx.store.trace(key)
    cache = ctx.__dict__.setdefault("_identity_traces", {})
    t = cache.get(key)
    if t is None:
        if len(cache) > 256:
            cache.clear()
        t = cache[key] = analysis.Trace.from_file(ctx.store.resolve(key))
    return t


def default_partner(ctx: Ctx, a: str, singles: list[str]) -> tuple[str | None, str]:
    """The default other side of ``a`` and why (``analysis.default_partner`` on the traces' headers: another
    rank or window of its run, else a trace of the same model); ``(None, why)`` when no listed trace is
    related: never an unrelated trace, never ``a`` itself."""
    keys, traces = [], []
    try:
        base = _header_trace(ctx, a)
    except Exception:  # noqa: BLE001 - the page shows the error of the base trace
        return None, "the base trace could not be opened"
    for k in singles:
        if k == a:
            continue
        try:
            t = _header_trace(ctx, k)
            t.header  # noqa: B018
        except Exception:  # noqa: BLE001 - a bad file is simply not the default
            continue
        keys.append(k)
        traces.append(t)
    i, why = analysis.default_partner(base, traces)
    return (keys[i] if i is not None else None), why


def default_other(ctx: Ctx, a: str, singles: list[str]) -> str | None:
    """The key of :func:`default_partner` (None when no listed trace is related to ``a``)."""
    return default_partner(ctx, a, singles)[0]


def _first_openable(ctx: Ctx, keys: list[str]) -> str | None:
    for k in keys:
        try:
            ctx.store.open(k)
            return k
        except Exception:  # noqa: BLE001 - a bad file is simply not the default
            continue
    return None


def default_keys(ctx: Ctx, a: str, b: str) -> tuple[str, ...]:
    """analysis.diff's keys to align ``a`` and ``b`` by default (``analysis.alignment_keys``): op alone across
    device kinds or when the module names differ (eager vs compiled), else op, module and shape."""
    return alignment_reason(ctx, a, b)[0]


def alignment_reason(ctx: Ctx, a: str, b: str) -> tuple[tuple[str, ...], str]:
    """(default keys, why) of ``analysis.alignment_keys`` on the two open traces."""
    return analysis.alignment_keys(ctx.store.trace(a), ctx.store.trace(b))


def _layout(ctx: Ctx, state: ViewState):
    import dash_mantine_components as dmc

    singles = _singles(ctx)
    a = _base(ctx, state, singles)
    if not a or len(singles) < 2:
        return html.Div([html.H2("Compare two traces"),
                         note("Compare needs two traces: open a folder holding at least two (e.g. two ranks of a run, "
                              "or the same model eager and compiled). A trace is never compared with itself.")],
                        id="compare-page")
    why_b = ""
    if state.other in singles and state.other != a:
        b = state.other
    else:
        b, why_b = default_partner(ctx, a, singles)
    why_keys = ""
    if state.keys:
        keys = state.keys
    elif b:
        keys, why_keys = alignment_reason(ctx, a, b)
    else:
        keys = DIFF_KEYS
    labels = {e.key: e.label for e in ctx.store.entries()}
    opts = [{"label": labels.get(k, k), "value": k} for k in singles]
    why = [note(f"B is {why_b}." if b else f"No default for B: {why_b} among the listed traces (a trace is never "
                "compared with an unrelated one by default); choose one.")] if why_b else []
    if why_keys:
        why.append(note(f"Align by: {why_keys}."))
    return html.Div([
        html.H2("Compare two traces"),
        html.Div([dmc.Select(id="cmp-a", data=opts, value=a, label="Base (A)", searchable=True, w=600, size="xs",
                             allowDeselect=False),
                  dmc.Select(id="cmp-b", data=opts, value=b, label="Other (B)", searchable=True, w=600, size="xs",
                             allowDeselect=False, placeholder="choose a trace"),
                  dmc.MultiSelect(id="cmp-keys", data=list(DIFF_KEYS), value=list(keys), label="Align by",
                                  w=260, size="xs")], className="nx-row", style={"flexWrap": "wrap"}),
        html.Div(why, id="cmp-why"),
        dcc.Store(id="cmp-shown", data=_shown(a, b, keys)),
        html.Div(id="cmp-body", children=body(ctx, a, b, keys)),
    ], id="compare-page")


def _shown(a, b, keys) -> list:
    """What the body shows (A, B, keys): the selects report their values when they mount, which must not build
    the body again."""
    return [a, b, list(keys)]


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


def warm_partner(ctx: Ctx, key: str) -> threading.Thread:
    """Start computing, on a thread of its own, what Compare needs of ``key`` and its default partner: the per-op
    profile of each by the default alignment keys (``analysis.op_profile``, memoised on each trace), then the
    pair's diff (a merge of the two) and its figure once (which loads plotly). No other page of ``key`` computes
    anything of the partner, so this runs beside ``key``'s own precompute from the open on (the partner first),
    and Compare opened first finds its frames ready or nearly. Errors are logged: the page that needs a frame
    shows them."""
    def run() -> None:
        try:
            singles = _singles(ctx)
            a = _base(ctx, ViewState(trace=key), singles)
            b = default_other(ctx, a, singles) if a else None
            if a and b and a != b:
                keys = tuple(default_keys(ctx, a, b)) or DIFF_KEYS
                for side in (b, a):  # the partner first: nothing else computes anything of it
                    analysis.op_profile(ctx.store.trace(side), keys)
                figures.diff_figure(frames.diff(ctx, a, b, keys))  # the pair's frame; plotly's first figure
        except Exception:  # noqa: BLE001 - shown by the page that needs it
            LOG.debug("warm-up of the partner of %s failed", key, exc_info=True)

    th = threading.Thread(target=run, name=f"warm partner of {key}", daemon=True)
    th.start()
    return th


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("cmp-body", "children"), Output("url-out", "search", allow_duplicate=True),
                  Output("last-sync", "data", allow_duplicate=True), Output("cmp-shown", "data"),
                  Input("cmp-a", "value"), Input("cmp-b", "value"), Input("cmp-keys", "value"),
                  State("cmp-shown", "data"), prevent_initial_call=True)
    def recompare(a, b, keys, shown):
        keys = tuple(k for k in keys or () if k in DIFF_KEYS) or DIFF_KEYS
        if shown == _shown(a, b, keys):  # the selects mounting with the values the page was built with
            raise PreventUpdate
        search = search_of(ViewState(page="compare", trace=a, other=b, keys=keys))  # the pair in the URL
        new_request()
        try:
            return body(ctx, a, b, keys), search, "/compare" + search, _shown(a, b, keys)
        finally:
            end_request()
