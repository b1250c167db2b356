"""An area selection on the timeline (Perfetto's selection panel): the explorer fetches the events of the
selected rows around the range from the timeline index (a few ``searchsorted`` per row, so a selection over
millions of events stays cheap) and :func:`analysis.area_stats` computes the per-track, per-name and counter
statistics.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

import analysis

from .rows import TimelineIndex


def _row_label(index: TimelineIndex, i: int) -> str:
    info = index.infos[i]
    return f"{info.path[-1] if info.path else info.group} · {info.label}"


def _opcodes(index: TimelineIndex, table: str) -> np.ndarray | None:
    """Per row id of ``table``: its opcode (instructions only; None for other tables), fetched once."""
    key = ("opcodes", table)
    if key not in index.memo:
        ops = None
        if table == "instructions":
            ops = cast(Any, index.trace).table(table, ["opcode"])["opcode"].astype(str).to_numpy(dtype=object)
        index.memo[key] = ops
    return index.memo[key]


def area_stats(index: TimelineIndex, t0: int, t1: int, rows: list[int]
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(per track, per name, counters) of the events of ``rows`` (row indexes of the index) overlapping
    [t0, t1) ns from the trace start: :func:`analysis.area_stats` of the events the index holds there. A row
    repeating events of other rows (hierarchy, DMA engines) counts only when no row of its table is selected, module
    spans only when no event row is."""
    a, b = index.origin + int(t0), index.origin + max(int(t1), int(t0) + 1)
    tracks: list[str] = []
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
    counters: list[pd.DataFrame] = []
    sel = list(dict.fromkeys(int(r) for r in rows if 0 <= int(r) < len(index.infos)))
    # alias rows (hierarchy, DMA engines) repeat events: counted only when no row of their table is selected
    own = {index.infos[i].table for i in sel if not index.infos[i].alias}
    for i in sel:
        info = index.infos[i]
        if info.alias and (info.table in own or (info.table == "hierarchy" and own)):
            continue  # module spans count only in a selection of hierarchy rows alone
        label = _row_label(index, i)
        label = label if label not in tracks else f"{label} ({i})"  # two rows never merge
        if info.table == "counters":
            c = index.counter(i)
            if c is None:  # a derived counter still being computed
                continue
            ts, val = c
            m = (ts >= a) & (ts < b)
            counters.append(pd.DataFrame({"counter": label, "unit": info.unit, "ts": ts[m], "value": val[m]}))
            continue
        row = index.rows[i]
        if row is None or not len(row):
            continue
        lvl = row.levels[0]
        lo = int(np.searchsorted(lvl.start, a - lvl.max_dur, side="left"))
        hi = int(np.searchsorted(lvl.start, b, side="left"))
        codes, labels = index.color_codes(info.table, "op")
        c = codes[index.ids[i][lo:hi]]
        names = np.asarray(list(labels) + ["(unnamed)"], dtype=object)[np.where(c < 0, len(labels), c)]
        ops = _opcodes(index, info.table)
        opcodes = ops[index.ids[i][lo:hi]] if ops is not None else np.full(hi - lo, "", dtype=object)
        parts.append((np.full(hi - lo, len(tracks)), names, lvl.start[lo:hi], lvl.end[lo:hi], opcodes))
        tracks.append(label)
    track_codes = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
    events = pd.DataFrame({
        "track": pd.Categorical.from_codes(track_codes, categories=pd.Index(tracks, dtype=object)),
        "name": np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, object),
        "start_ts": np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64),
        "end_ts": np.concatenate([p[3] for p in parts]) if parts else np.zeros(0, np.int64),
        "opcode": np.concatenate([p[4] for p in parts]) if parts else np.zeros(0, object)})
    return analysis.area_stats(events, a, b, pd.concat(counters, ignore_index=True) if counters else None)
