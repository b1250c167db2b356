"""An event's dependencies: what it waited for (predecessors) and what waited for it (successors).

Two sources, both from the trace as recorded:

- **Flows** (the ``flows`` table): every flow ending at the event is a predecessor, every flow starting at it a
  successor, with the flow's kind as the relation ("launch": a host op launched device work; "dependency":
  the simulated runtime links the event a ``SemaphoreWait`` waited for to that wait; an imported Neuron
  Explorer profile links the events of one flow id).
- **Semaphore waits** (derived, relation "semaphore"): an engine runs its instructions in order, so a run of
  ``SemaphoreWait`` instructions on a track gates the next instruction on that track that is not a wait. That
  instruction's predecessors include what each of those waits waited for (``via_row``: the wait), and the
  waited-for event's successors include the gated instruction; a wait's successor is the instruction it gates.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..registry import Column, register

#: the opcode of an engine's semaphore wait (the simulated runtime's and Neuron Explorer's name)
WAIT_OPCODE = "SemaphoreWait"
_KEY = 1 << 40  # (table code, row id) -> one int64 key
#: the columns that name an event of each event table
_NAME_COLUMNS = {"host_ops": ("name",), "instructions": ("opcode", "name"), "dma": ("source", "dest", "variable"),
                 "collectives": ("operation",)}

DEPENDENCY_SPEC = (
    Column("direction", "", "Direction", "predecessor (this event waited for it) or successor (it waited for "
                                         "this event)"),
    Column("relation", "", "Relation", "the flow's kind (launch, dependency, ...), or semaphore: through a "
                                       "SemaphoreWait on the gated instruction's engine"),
    Column("table", "", "Table", "table of the other event"),
    Column("row_id", "", "Row", "row id of the other event in its table"),
    Column("name", "", "Event", "the other event: op name, instruction opcode and name, DMA route, collective"),
    Column("track", "", "Track", "track of the other event"),
    Column("start_ts", "ns", "Start", "the other event's start"),
    Column("duration_ns", "ns", "Duration", "the other event's duration"),
    Column("gap_ns", "ns", "Gap", "predecessor: this event's start - its end; successor: its start - this "
                                  "event's end (negative when they overlap)"),
    Column("via_row", "", "Via wait", "row id of the SemaphoreWait instruction of a semaphore relation, else -1"),
)
DEPENDENCY_COLUMNS = [c.name for c in DEPENDENCY_SPEC]


def _codes(values: pd.Series, tables: list[str]) -> np.ndarray:
    """Table code (position in ``tables``, appended to as new names appear) of every value; a categorical column
    is mapped through its categories (no per-row strings)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        cats = [str(c) for c in values.cat.categories]
        for c in cats:
            if c not in tables:
                tables.append(c)
        lut = np.array([tables.index(c) for c in cats] + [-1], dtype=np.int64)
        return lut[values.cat.codes.to_numpy()]  # code -1 (missing) -> the trailing -1
    s = values.astype(str).to_numpy(dtype=object)
    for u in pd.unique(s):
        if u not in tables:
            tables.append(str(u))
    return pd.Series(s, dtype=object).map({u: tables.index(u) for u in tables}).to_numpy(dtype=np.int64)


def _index(trace) -> dict:
    """Flows sorted by source and by destination key, and the instructions in (track, start) order with the
    position of every row and whether it is a wait: built once per trace (window)."""
    flows = trace.table("flows", ["src_table", "src_row", "dst_table", "dst_row", "kind"])
    tables = ["host_ops", "instructions", "dma", "collectives"]
    src = _codes(flows["src_table"], tables) * _KEY + flows["src_row"].to_numpy(dtype=np.int64)
    dst = _codes(flows["dst_table"], tables) * _KEY + flows["dst_row"].to_numpy(dtype=np.int64)
    kind = flows["kind"].astype(str).to_numpy(dtype=object)
    by_src, by_dst = np.argsort(src, kind="stable"), np.argsort(dst, kind="stable")
    ins = trace.table("instructions", ["track", "start_ts", "opcode"])
    rows = ins.index.to_numpy(dtype=np.int64)
    order = np.lexsort((rows, ins["start_ts"].to_numpy(), ins["track"].to_numpy()))
    return {"tables": tables, "src": (src[by_src], dst[by_src], kind[by_src]),
            "dst": (dst[by_dst], src[by_dst], kind[by_dst]),
            "ins_rows": rows[order], "ins_track": ins["track"].to_numpy(dtype=np.int64)[order],
            "ins_wait": (ins["opcode"] == WAIT_OPCODE).to_numpy(dtype=bool)[order],
            "ins_pos": pd.Series(np.arange(len(order)), index=rows[order])}


def _ends(side: tuple, key: int) -> list[tuple[int, str]]:
    """(other end's key, kind) of every flow whose ``side`` end is ``key``."""
    keys, other, kind = side
    lo, hi = np.searchsorted(keys, key, "left"), np.searchsorted(keys, key, "right")
    return [(int(o), str(k)) for o, k in zip(other[lo:hi], kind[lo:hi])]


def _gating_waits(ix: dict, row: int) -> list[int]:
    """Row ids of the run of SemaphoreWait instructions just before instruction ``row`` on its track."""
    pos = ix["ins_pos"].get(row)
    if pos is None or ix["ins_wait"][pos]:
        return []
    out, p = [], int(pos) - 1
    while p >= 0 and ix["ins_track"][p] == ix["ins_track"][pos] and ix["ins_wait"][p]:
        out.append(int(ix["ins_rows"][p]))
        p -= 1
    return out


def _gated(ix: dict, wait_row: int) -> int | None:
    """Row id of the instruction a SemaphoreWait gates: the next non-wait instruction on its track."""
    pos = ix["ins_pos"].get(wait_row)
    if pos is None or not ix["ins_wait"][pos]:
        return None
    p, n = int(pos) + 1, len(ix["ins_rows"])
    while p < n and ix["ins_track"][p] == ix["ins_track"][pos] and ix["ins_wait"][p]:
        p += 1
    if p < n and ix["ins_track"][p] == ix["ins_track"][pos]:
        return int(ix["ins_rows"][p])
    return None


def _links(ix: dict, table: str, row: int) -> list[tuple[str, str, int, int]]:
    """(direction, relation, other key, via row) of the event, flows first, then semaphore relations."""
    code = ix["tables"].index(table) if table in ix["tables"] else -1
    if code < 0:
        return []
    key = code * _KEY + row
    out = [("predecessor", k, o, -1) for o, k in _ends(ix["dst"], key)]
    out += [("successor", k, o, -1) for o, k in _ends(ix["src"], key)]
    ins = ix["tables"].index("instructions") * _KEY
    if table == "instructions":
        for w in _gating_waits(ix, row):
            out += [("predecessor", "semaphore", o, w) for o, _ in _ends(ix["dst"], ins + w)]
        g = _gated(ix, row)  # a wait: the instruction it holds back
        if g is not None:
            out.append(("successor", "semaphore", ins + g, row))
    for o, _ in _ends(ix["src"], key):  # events waiting for this one through a wait
        if o // _KEY == ins // _KEY:
            g = _gated(ix, int(o % _KEY))
            if g is not None:
                out.append(("successor", "semaphore", ins + g, int(o % _KEY)))
    return out


def _describe(trace, table: str, rows: list[int]) -> pd.DataFrame:
    """name, track, start_ts, duration_ns of ``rows`` of ``table`` (rows absent from the table are dropped)."""
    if table not in _NAME_COLUMNS:
        return pd.DataFrame(columns=["name", "track", "start_ts", "duration_ns"])
    df = trace.table(table, ("track", "start_ts", "duration_ns", *_NAME_COLUMNS[table]))
    df = df.loc[df.index.intersection(rows)]
    col = lambda c: df[c].astype(str)  # noqa: E731
    if table == "instructions":
        name = col("opcode") + " " + col("name")
    elif table == "dma":
        name = "DMA " + col("source") + "->" + col("dest") + " " + col("variable")
    elif table == "collectives":
        name = col("operation")
    else:
        name = col("name")
    tracks = trace.table("tracks", ["name"])["name"].astype(str)
    trk = df["track"].map(tracks)
    return pd.DataFrame({"name": name.str.strip(), "track": trk.fillna("").astype(str),
                         "start_ts": df["start_ts"].astype("int64"), "duration_ns": df["duration_ns"].astype("int64")},
                        index=df.index)


@register("event_dependencies", columns=DEPENDENCY_SPEC, memo=False, method="dependencies",
          figure="dependencies_figure")
def event_dependencies(trace, table: str = "instructions", row: int = -1) -> pd.DataFrame:
    """Predecessors and successors of event ``row`` of ``table`` (see the module doc), predecessors first,
    each by start. Columns: direction, relation, table, row_id, name, track, start_ts (ns), duration_ns (ns),
    gap_ns (ns), via_row. Empty when the event has none or is not in the trace."""
    ix = trace.memo(("dependency_index",), lambda: _index(trace))
    links = _links(ix, table, int(row))
    empty = pd.DataFrame({c: pd.Series(dtype="int64" if c in ("row_id", "start_ts", "duration_ns", "gap_ns",
                                                                "via_row") else "object") for c in DEPENDENCY_COLUMNS})
    if not links:
        return empty
    me = _describe(trace, table, [int(row)])
    if me.empty:
        return empty
    s0, e0 = int(me["start_ts"].iloc[0]), int(me["start_ts"].iloc[0] + me["duration_ns"].iloc[0])
    parts = []
    for code in sorted({o // _KEY for _, _, o, _ in links}):
        t = ix["tables"][int(code)]
        mine = [(d, k, int(o % _KEY), v) for d, k, o, v in links if o // _KEY == code]
        desc = _describe(trace, t, [r for _, _, r, _ in mine])
        for d, k, r, v in mine:
            if r in desc.index:
                x = desc.loc[r]
                s, e = int(x["start_ts"]), int(x["start_ts"] + x["duration_ns"])
                parts.append((d, k, t, r, x["name"], x["track"], s, int(x["duration_ns"]),
                              s0 - e if d == "predecessor" else s - e0, v))
    out = pd.DataFrame(parts, columns=DEPENDENCY_COLUMNS).drop_duplicates()
    out["order"] = out["direction"] != "predecessor"
    return out.sort_values(["order", "start_ts", "table", "row_id"]).drop(columns="order").reset_index(drop=True)


__all__ = ["event_dependencies", "DEPENDENCY_SPEC", "DEPENDENCY_COLUMNS", "WAIT_OPCODE"]
