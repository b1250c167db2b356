"""Aggregates of an area selection on the timeline (Perfetto's selection panel): per track and per name.

A view concern like the level of detail: it counts and sums the drawn events of the selected rows inside
the selected range (durations clipped to the range), and reads counters' min / mean / max there. It uses
the timeline index's sorted rows, so a selection over millions of events costs a few ``searchsorted`` and
one ``bincount`` per row.
"""
from __future__ import annotations

from typing import Any, cast

import numpy as np
import pandas as pd

from analysis.analyses.activity import WAIT_OPCODES
from analysis.core.intervals import union_sorted_ns

from .rows import TimelineIndex

TRACK_COLUMNS = ["track", "events", "busy_ns", "busy_percent"]
NAME_COLUMNS = ["name", "events", "total_ns", "mean_ns", "max_ns"]
COUNTER_COLUMNS = ["counter", "unit", "min", "mean", "max", "samples"]


def _row_label(index: TimelineIndex, i: int) -> str:
    info = index.infos[i]
    return f"{info.path[-1] if info.path else info.group} · {info.label}"


def _waits(index: TimelineIndex, table: str) -> np.ndarray | None:
    """Per row id of ``table``: True for an engine waiting on a semaphore (``WAIT_OPCODES``: idle time of its
    engine, not work); None when the table has none."""
    key = ("waits", table)
    if key not in index.memo:
        mask = None
        if table == "instructions":
            op = cast(Any, index.trace).table(table, ["opcode"])["opcode"]
            w = op.astype(str).isin(WAIT_OPCODES).to_numpy()
            mask = w if w.any() else None
        index.memo[key] = mask
    return index.memo[key]


def area_stats(index: TimelineIndex, t0: int, t1: int, rows: list[int]
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(per track, per name, counters) of the events of ``rows`` (row indexes of the index) overlapping
    [t0, t1) ns from the trace start. Per track: events, busy_ns (the union of the events clipped to the
    range: time with at least one event that is work, the analyses' definition of busy: an engine waiting on a
    semaphore is idle), busy_percent of the range. Per
    name: events, total_ns, mean_ns, max_ns (clipped), largest total first. Counters: min, mean (of the
    samples), max, samples."""
    a, b = index.origin + int(t0), index.origin + max(int(t1), int(t0) + 1)
    span = b - a
    per_track, counters = [], []
    totals: dict[str, list] = {}
    for i in dict.fromkeys(int(r) for r in rows if 0 <= int(r) < len(index.infos)):
        info = index.infos[i]
        if info.table == "counters":
            ts, val = index.counters[info.track]
            m = (ts >= a) & (ts < b) & np.isfinite(val)
            if m.any():
                v = val[m]
                counters.append((_row_label(index, i), info.unit, float(v.min()), float(v.mean()), float(v.max()),
                                 int(m.sum())))
            continue
        row = index.rows[i]
        if row is None or not len(row):
            continue
        lvl = row.levels[0]
        lo = int(np.searchsorted(lvl.start, a - lvl.max_dur, side="left"))
        hi = int(np.searchsorted(lvl.start, b, side="left"))
        pos = np.arange(lo, hi)
        pos = pos[lvl.end[lo:hi] > a] if hi > lo else pos
        if not len(pos):
            continue
        s0, e0 = np.maximum(lvl.start[pos], a), np.minimum(lvl.end[pos], b)
        clip = e0 - s0
        waits = _waits(index, info.table)
        work = ~waits[index.ids[i][pos]] if waits is not None else None
        # starts are sorted; clipping keeps that order
        busy = union_sorted_ns(s0[work], e0[work]) if work is not None else union_sorted_ns(s0, e0)
        per_track.append((_row_label(index, i), len(pos), busy, 100.0 * busy / span))
        codes, labels = index.color_codes(info.table, "op")
        c = codes[index.ids[i][pos]]
        c = np.where(c < 0, len(labels), c)
        cnt = np.bincount(c, minlength=len(labels) + 1)
        tot = np.bincount(c, weights=clip, minlength=len(labels) + 1)
        mx = np.zeros(len(labels) + 1)
        np.maximum.at(mx, c, clip)
        for k in np.flatnonzero(cnt).tolist():
            name = labels[k] if k < len(labels) else "(unnamed)"
            cur = totals.setdefault(name, [0, 0.0, 0.0])
            cur[0] += int(cnt[k])
            cur[1] += float(tot[k])
            cur[2] = max(cur[2], float(mx[k]))
    tracks = pd.DataFrame(per_track, columns=TRACK_COLUMNS)
    names = pd.DataFrame([(n, c, t, t / c if c else np.nan, m) for n, (c, t, m) in totals.items()],
                         columns=NAME_COLUMNS).sort_values("total_ns", ascending=False, kind="stable")
    return tracks, names.reset_index(drop=True), pd.DataFrame(counters, columns=COUNTER_COLUMNS)
