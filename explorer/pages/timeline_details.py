"""The timeline's details panel (fields of the selected event in words and units, the host op that launched
it, its device work, its flows with jump links) and the flow arrows the canvas draws for it."""
from __future__ import annotations

import weakref

import numpy as np
import pandas as pd
from dash import dcc, html

import analysis

from ..derived import level_label
from ..labels import column_unit, fmt_ns, table_column_label
from ..rows import EVENT_TABLES, event_label
from ..state import ViewState
from .common import Ctx, error_box, guarded, window_href

DETAIL_CHILDREN = 25
MAX_FLOWS = 300
TABLE_NAMES = {"instructions": "Instruction", "dma": "DMA transfer", "collectives": "Collective",
               "host_ops": "Host op"}
_HIDDEN = {"track", "framework_op", "args"}
_FLOW_INDEX: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # trace -> sorted flow lookups
_LAUNCH_INDEX: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # trace -> framework_op lookups


def details(ctx: Ctx, state: ViewState):
    """Details panel of the selected event."""
    return guarded(_details, ctx, state)


def _event_row(trace, table: str, rid: int) -> pd.Series | None:
    df = trace.table(table)
    if rid not in df.index:
        return None
    return df.loc[rid]


def fmt_field(v, unit: str, origin: int) -> str:
    """A field value in words and units (times from the trace start, exact bytes)."""

    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return "n/a"
    if unit == "ts" and isinstance(v, (int, np.integer)):
        return f"{fmt_ns(int(v) - origin)} from trace start"
    if unit == "ns" and isinstance(v, (int, np.integer, float, np.floating)):
        return fmt_ns(int(v))
    if unit == "bytes" and isinstance(v, (int, np.integer, float, np.floating)):
        return f"{int(v):,} B"
    if unit == "FLOP" and isinstance(v, (int, np.integer, float, np.floating)):
        return f"{float(v):,.0f} FLOP"
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.6g}"
    if isinstance(v, (int, np.integer)):
        return f"{int(v):,}"
    return str(v)


def _link_for(state: ViewState, origin: int, table: str, rid: int, row: pd.Series, text: str) -> dcc.Link:
    s = int(row["start_ts"])
    e = s + int(row["duration_ns"])
    return dcc.Link(text, href=window_href(state, origin, s, e, sel=(table, int(rid)), pad=1.0), className="jump")


#: instruction fields a Neuron profile records and an imported GPU kernel does not (0 there means unknown)
_RECORDED_WORK = {"raw_flops", "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes",
                  "psum_read_bytes", "psum_write_bytes"}


def _work_items(trace, rid: int) -> list[tuple[str, str]]:
    """An imported kernel's share of its op's FLOPs and bytes (the op model's), or "unknown" and why."""
    w = analysis.instruction_work(trace)
    if rid not in w.index:
        return []
    r = w.loc[rid]
    why = str(analysis.unpriced_reason(trace).get(rid, "")) or "unknown"
    return [("FLOPs (op model)", f"{float(r['flops']):,.0f} FLOP" if r["flops_known"] else f"unknown: {why}"),
            ("HBM traffic (op model)", f"{int(r['hbm_bytes']):,} B" if r["bytes_known"] else f"unknown: {why}")]


def _dtype_item(trace, rid: int) -> tuple[str, str]:
    """The data type of an instruction that records none: its launching op's (``analysis.instruction_work``
    takes it from the op's recorded input dtypes), else "unknown" and why."""
    w = analysis.instruction_work(trace)
    dt = str(w.at[rid, "dtype"]) if rid in w.index and pd.notna(w.at[rid, "dtype"]) else ""
    if dt:
        return table_column_label("dtype"), f"{dt} (its launching op's)"
    return table_column_label("dtype"), ("unknown: neither this instruction nor the op that launched it records a "
                                         "data type (e.g. a compiled graph's own wait, not one of its ops')")


def _name(trace, table: str, row: pd.Series) -> str:
    return str(event_label(pd.DataFrame([row]), table).iloc[0])


def _module_details(state: ViewState, index, rid: int):
    """Details of a module span of the hierarchy rows (:func:`analysis.op_hierarchy`)."""
    h = index.hierarchy
    if h is None or not 0 <= rid < len(h):
        return error_box(f"no module span #{rid} in this trace")
    r = h.iloc[rid]
    s, e = int(r["start_ts"]), int(r["end_ts"])
    items = [("Level", level_label(str(r["kind"]), int(r["level"]))), ("Start", f"{fmt_ns(s - index.origin)} from "
             "trace start"), ("Span on the device", fmt_ns(e - s)), ("Ops", f"{int(r['ops']):,}"),
             ("Instructions", f"{int(r['instructions']):,}")]
    href = window_href(state, index.origin, s, e, sel=("hierarchy", rid), pad=0.1)
    return html.Div([html.H4(f"Module: {r['name']}", id="tl-details-title"),
                     html.Div(f"hierarchy #{rid}: consecutive ops under this module, first instruction start to "
                              "last instruction end", className="nx-hint"),
                     dcc.Link("Zoom to this span", href=href, className="jump"),
                     html.Table([html.Tr([html.Th(k), html.Td(v)]) for k, v in items], className="nx-fields")],
                    className="details")


def _details(ctx: Ctx, state: ViewState):
    table, rid = state.sel
    index = ctx.store.timeline(state.trace, state.rank)
    if table == "hierarchy":
        return _module_details(state, index, int(rid))
    trace = index.trace
    row = _event_row(trace, table, rid)
    if row is None:
        return error_box(f"no event {table}:{rid} in this trace")
    tracks = trace.table("tracks")
    items = []
    tid = int(row["track"]) if "track" in row.index else -1
    if tid in tracks.index:
        items.append(("Track", str(tracks.loc[tid, "name"])))
    shapes = table == "instructions" and analysis.work_source(trace) == "shapes"
    for k, v in row.items():
        if table == "instructions" and k == "dtype" and not str(v):  # said, not left out: see _dtype_item
            items.append(_dtype_item(trace, rid))
            continue
        if k in _HIDDEN or (isinstance(v, str) and not v):
            continue
        if k.startswith("measured_") and not v:
            continue
        if shapes and k in _RECORDED_WORK and not v:  # not recorded on imported kernels: 0 would say no work
            continue
        items.append((table_column_label(k), fmt_field(v, column_unit(k, ""), index.origin)))
    if shapes:
        items += _work_items(trace, rid)
    parts = [html.H4(f"{TABLE_NAMES.get(table, table)}: {_name(trace, table, row)}", id="tl-details-title"),
             html.Div(f"{table} #{rid}", className="nx-hint"),
             _link_for(state, index.origin, table, rid, row, "Zoom to this event"),
             html.Table([html.Tr([html.Th(k), html.Td(v)]) for k, v in items], className="nx-fields")]
    parent = _parent(trace, table, rid, row)
    host = trace.table("host_ops")
    if parent >= 0 and parent in host.index:
        hr = host.loc[parent]
        parts += [html.H5("Launched by host op"),
                  _link_for(state, index.origin, "host_ops", parent, hr, f"{hr['name']} (host_ops #{parent})")]
    kids = _children(trace, table, rid)
    if kids:
        links = []
        for t, r in kids[:DETAIL_CHILDREN]:
            er = _event_row(trace, t, r)
            if er is not None:
                links.append(html.Li(_link_for(state, index.origin, t, r, er, f"{_name(trace, t, er)} ({t} #{r})")))
        more = "+" if len(kids) > DETAIL_CHILDREN else ""
        parts += [html.H5(f"Device work and flows ({min(len(kids), DETAIL_CHILDREN)}{more} shown)"), html.Ul(links)]
    return html.Div(parts, className="details")


def _flow_index(trace) -> dict:
    """Flows sorted by (source table, source row) and by (destination table, destination row), for lookups
    in O(log n) per selected event (built once per trace)."""
    cache = _FLOW_INDEX.get(trace)
    if cache is not None:
        return cache
    flows = trace.table("flows")
    out = {}
    for side, other in (("src", "dst"), ("dst", "src")):
        k = _table_codes(flows[f"{side}_table"]) * (1 << 40) + flows[f"{side}_row"].to_numpy(dtype=np.int64)
        o = np.argsort(k, kind="stable")
        out[side] = (k[o], flows[f"{other}_table"].astype(str).to_numpy()[o],
                     flows[f"{other}_row"].to_numpy(dtype=np.int64)[o], flows["kind"].astype(str).to_numpy()[o])
    _FLOW_INDEX[trace] = out
    return out


def _table_codes(col: pd.Series) -> np.ndarray:
    cat = col.astype("category")
    lut = np.array([EVENT_TABLES.index(str(c)) if str(c) in EVENT_TABLES else 9 for c in cat.cat.categories]
                   + [9], dtype=np.int64)
    return lut[cat.cat.codes.to_numpy()]


def _linked(trace, side: str, table: str, rid: int) -> list[tuple[str, int, str]]:
    """(table, row, kind) of the flows whose ``side`` ("src" or "dst") end is the event."""
    if table not in EVENT_TABLES:
        return []
    k, t, r, kind = _flow_index(trace)[side]
    key = EVENT_TABLES.index(table) * (1 << 40) + int(rid)
    lo, hi = np.searchsorted(k, key, "left"), np.searchsorted(k, key, "right")
    return list(zip(t[lo:hi].tolist(), r[lo:hi].tolist(), kind[lo:hi].tolist()))


def _parent(trace, table: str, rid: int, row: pd.Series) -> int:
    """The host op that launched the event (``framework_op``, else a flow from a host op), or -1."""
    parent = int(row["framework_op"]) if "framework_op" in row.index else -1
    if parent < 0:
        for t, r, _ in _linked(trace, "dst", table, rid):
            if t == "host_ops":
                return int(r)
    return parent


def _launched(trace, table: str, host_row: int) -> np.ndarray:
    """Row ids of ``table`` whose ``framework_op`` is ``host_row`` (sorted lookup, built once per trace)."""
    cache = _LAUNCH_INDEX.setdefault(trace, {})
    if table not in cache:
        df = trace.table(table)
        if "framework_op" not in df.columns or not len(df):
            cache[table] = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        else:
            fo = df["framework_op"].to_numpy(dtype=np.int64)
            o = np.argsort(fo, kind="stable")
            cache[table] = (fo[o], df.index.to_numpy(dtype=np.int64)[o])
    fo, rows = cache[table]
    return rows[np.searchsorted(fo, host_row, "left"):np.searchsorted(fo, host_row, "right")]


def _children(trace, table: str, rid: int, limit: int = MAX_FLOWS) -> list[tuple[str, int]]:
    """Events this one links to: device work of a host op (``framework_op``), and flows out of it."""
    kids: list[tuple[str, int]] = []
    if table == "host_ops":
        for t in ("instructions", "dma", "collectives"):
            hit = _launched(trace, t, rid)
            kids += [(t, int(r)) for r in hit[:limit]]
    seen = set(kids)
    for t, r, _ in _linked(trace, "src", table, rid)[: limit * 2]:
        if t in EVENT_TABLES and (t, int(r)) not in seen:
            kids.append((t, int(r)))
            seen.add((t, int(r)))
    return kids[:limit]


def flows_of(index, sel) -> dict | None:
    """``{"sel": [row, start, end], "flows": [[row_a, start_a, end_a, row_b, start_b, end_b, kind], ...]}``
    for the selected event: from its launching host op to it, from it to its device work and flows out of it,
    and flows into it (dependencies). Times in ns from the trace start."""
    if not sel:
        return None
    table, rid = sel[0], int(sel[1])
    if table not in EVENT_TABLES:
        return None
    trace = index.trace
    row = _event_row(trace, table, rid)
    if row is None:
        return None
    srow, ss, se = (int(x[0]) for x in index.locate(table, [rid]))
    pairs: list[tuple[str, int, str, int, str]] = []
    parent = _parent(trace, table, rid, row)
    if parent >= 0:
        pairs.append(("host_ops", parent, table, rid, "launch"))
    for t, r in _children(trace, table, rid):
        pairs.append((table, rid, t, r, "launch" if table == "host_ops" else "flow"))
    for t, r, k in _linked(trace, "dst", table, rid):
        if t in EVENT_TABLES and (t, int(r)) != ("host_ops", parent):
            pairs.append((t, int(r), table, rid, str(k)))
    out = []
    for ta, ra, tb, rb, kind in pairs[:MAX_FLOWS]:
        a = index.locate(ta, [ra])
        b = index.locate(tb, [rb])
        if a[0][0] >= 0 and b[0][0] >= 0:
            out.append([int(a[0][0]), int(a[1][0]), int(a[2][0]), int(b[0][0]), int(b[1][0]), int(b[2][0]), kind])
    return {"sel": [srow, ss, se] if srow >= 0 else None, "flows": out}
