"""One timeline view: query the rows for a window at one shape per pixel (the canvas draws it, see
explorer/tiles.py and assets/timeline.js).

The server caps a view at ``BUDGET`` shapes (single events keep their identity, busy pixel columns merge),
which keeps a view under 1 MB of JSON and a canvas paint in a few milliseconds.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .rows import TABLE_CODE, TimelineIndex
from .timeline import Shapes, bin_counter, query_rows

BUDGET = 6000


@dataclass
class ViewData:
    """Result of one viewport query: visible row positions, their shapes, counter points."""

    t0: int
    t1: int
    rows: list[int]                       # index into TimelineIndex.infos, in display order
    shapes: dict[int, Shapes]             # row index -> shapes
    highlight: dict[int, Shapes]          # row index -> search matches and picked events
    counters: dict[int, tuple[np.ndarray, np.ndarray]]
    threshold_ns: float
    pending: list[int] = field(default_factory=list)  # derived counter rows still being computed

    @property
    def n_shapes(self) -> int:
        return int(sum(len(s) for s in self.shapes.values()) + sum(len(s) for s in self.highlight.values()))


def visible_rows(index: TimelineIndex, groups: list[str] | None) -> list[int]:
    """Row indexes of the chosen groups in the chosen order (None = all, in default order)."""
    if groups is None:
        return list(range(len(index.infos)))
    out = []
    for g in groups:
        out += [i for i, info in enumerate(index.infos) if info.group == g]
    return out


def highlight_masks(index: TimelineIndex, rows: list[int], q: str,
                    picked: dict[str, np.ndarray] | None = None) -> dict[int, np.ndarray]:
    """Per event row, a bool mask of the events to highlight: those :meth:`TimelineIndex.match` finds for
    ``q`` and those ``picked`` marks (table -> bool per row id, see :meth:`TimelineIndex.picked`)."""
    q = (q or "").strip().lower()
    out: dict[int, np.ndarray] = {}
    picked = picked or {}
    if not q and not picked:
        return out
    for i in rows:
        info = index.infos[i]
        if info.table not in TABLE_CODE:
            continue
        ids = index.ids[i]
        m = index.match(info.table, q)[ids] if q else np.zeros(len(ids), dtype=bool)
        if info.table in picked:
            m |= picked[info.table][ids]
        if m.any():
            out[i] = m
    return out


def query_view(index: TimelineIndex, t0: int | None, t1: int | None, width_px: int = 1400,
               groups: list[str] | None = None, q: str = "", budget: int = BUDGET,
               picked: dict[str, np.ndarray] | None = None) -> ViewData:
    """Shapes of the visible rows in [t0, t1] (ns relative to the trace start; None = whole trace);
    search matches of ``q`` and the ``picked`` events (table -> bool per row id) are highlighted."""
    span = max(index.end - index.origin, 1)
    a = 0 if t0 is None else int(np.clip(t0, -span, 2 * span))
    b = span if t1 is None else int(np.clip(t1, a + 1, 3 * span))
    rows = visible_rows(index, groups)
    ev = [i for i in rows if index.rows[i] is not None]
    masks = highlight_masks(index, ev, q, picked)
    abs0, abs1 = index.origin + a, index.origin + b
    hl_budget = budget // 4 if masks else 0
    shapes, thr = query_rows([index.rows[i] for i in ev], abs0, abs1, width_px, budget - hl_budget)
    hl = {}
    if masks:
        m_rows = list(masks)
        res, _ = query_rows([index.rows[i] for i in m_rows], abs0, abs1, width_px, hl_budget,
                            masks=[masks[i] for i in m_rows])
        hl = {i: s for i, s in zip(m_rows, res) if len(s)}
    counters, pending = {}, []
    for i in rows:
        if index.infos[i].table == "counters":
            c = index.counter(i)
            if c is None:
                pending.append(i)
            else:
                counters[i] = bin_counter(c[0], c[1], abs0, abs1, width_px)
    return ViewData(a, b, rows, dict(zip(ev, shapes)), hl, counters, thr, pending)


def event_at(index: TimelineIndex, row: int, t: float, tol: float) -> dict | None:
    """The event of row ``row`` under time ``t`` (ns from the trace start): of the events overlapping
    [t - tol, t + tol], the shortest one containing ``t`` (the innermost), else the nearest; None when there is
    none (or the row is a counter). ``{"table", "id", "row", "s", "e"}`` with times from the trace start.

    This is what a click selects: one event even where the view shows a merged shape."""
    if not 0 <= row < len(index.infos) or index.rows[row] is None or not len(index.rows[row]):
        return None
    lvl = index.rows[row].levels[0]
    # integer ns: at trace-clock origins (~1.8e18) a float is 256 ns coarse
    tt, dt = index.origin + int(round(t)), int(round(max(tol, 0.0)))
    a, b = tt - dt, tt + dt
    lo = int(np.searchsorted(lvl.start, a - lvl.max_dur, side="left"))
    hi = int(np.searchsorted(lvl.start, b, side="right"))
    s, e = lvl.start[lo:hi], lvl.end[lo:hi]
    near = np.flatnonzero(e >= a)
    if not len(near):
        return None
    s, e = s[near], e[near]
    inside = (s <= tt) & (e >= tt)
    if inside.any():
        cand = np.flatnonzero(inside)
        j = cand[np.argmin((e - s)[cand])]
    else:
        j = int(np.argmin(np.minimum(np.abs(s - tt), np.abs(e - tt))))
    k = lo + int(near[j])
    info = index.infos[row]
    return {"table": info.table, "id": int(index.ids[row][k]), "row": row,
            "s": int(lvl.start[k] - index.origin), "e": int(lvl.end[k] - index.origin)}
