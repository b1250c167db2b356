"""Level-of-detail binning for the timeline (a view concern: it merges events for drawing, it computes no metric).

Each timeline row holds its events sorted by start as numpy arrays. At open time a small pyramid of
merged levels is built (gap thresholds 16 ns, 64 ns, ... x4): at threshold ``g`` consecutive events whose
gap to the running end is ``<= g`` become one shape with a member count. A viewport query picks the
coarsest stored level whose threshold is below one pixel, cuts it with ``searchsorted`` and merges what
is left once more at the pixel threshold, so its cost follows the number of shapes drawn, not the
number of events in the window. Merging at threshold ``b`` a level merged at ``a <= b`` gives the same
groups as merging the raw events at ``b``, which is why the pyramid is exact.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BASE_THRESHOLD_NS = 16
LEVEL_FACTOR = 4
LONG_FACTOR = 3


@dataclass
class Level:
    """One resolution of a row: sorted, merged shapes (raw events at threshold 0).

    ``rep`` is the index (into the row's raw arrays) of the longest member, which gives the shape its
    colour and, when ``count == 1``, its identity.
    """

    threshold: int
    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    rep: np.ndarray
    rep_dur: np.ndarray
    max_dur: int
    ends_sorted: bool


@dataclass
class Shapes:
    """Result of a viewport query for one row (arrays of equal length)."""

    start: np.ndarray
    end: np.ndarray
    count: np.ndarray
    rep: np.ndarray

    def __len__(self) -> int:
        return len(self.start)


def _empty_shapes() -> Shapes:
    z = np.zeros(0, dtype=np.int64)
    return Shapes(z, z, z, z)


def merge(start: np.ndarray, end: np.ndarray, count: np.ndarray, rep: np.ndarray, rep_dur: np.ndarray,
          threshold: int) -> tuple[np.ndarray, ...]:
    """Merge start-sorted intervals whose gap to the running end is <= ``threshold`` ns; an item whose
    longest member is longer than ``LONG_FACTOR * threshold`` stays on its own (whether an event is long
    depends only on its own duration, so merging a merged level again stays exact).

    Returns (start, end, count, rep, rep_dur) of the merged groups; ``rep`` keeps the member with the
    largest ``rep_dur``.
    """
    n = len(start)
    if n == 0:
        return start, end, count, rep, rep_dur
    runmax = np.maximum.accumulate(end)
    # an event longer than LONG_FACTOR thresholds (a few pixels) never merges: wide slices keep their identity
    long = rep_dur > LONG_FACTOR * threshold
    brk = np.flatnonzero((start[1:] - runmax[:-1] > threshold) | long[1:] | long[:-1]) + 1
    idx = np.concatenate(([0], brk))
    if len(idx) == n:
        return start, end, count, rep, rep_dur
    g_end = np.maximum.reduceat(end, idx)
    g_count = np.add.reduceat(count, idx)
    g_best = np.maximum.reduceat(rep_dur, idx)
    group_of = np.repeat(np.arange(len(idx)), np.diff(np.concatenate((idx, [n]))))
    hit = np.flatnonzero(rep_dur == g_best[group_of])
    first = hit[np.concatenate(([True], group_of[hit][1:] != group_of[hit][:-1]))]
    return start[idx], g_end, g_count, rep[first], rep_dur[first]


@dataclass
class Row:
    """Events of one timeline row with their level pyramid."""

    start: np.ndarray            # int64 ns, sorted
    end: np.ndarray              # int64 ns
    levels: list[Level] = field(default_factory=list)

    @classmethod
    def build(cls, start: np.ndarray, end: np.ndarray) -> tuple[Row, np.ndarray]:
        """Sort the events by start and build the pyramid; returns (row, order) with ``order`` the sort
        permutation (callers reorder their id and colour arrays with it)."""
        start = np.asarray(start, dtype=np.int64)
        end = np.maximum(np.asarray(end, dtype=np.int64), start)
        order = np.argsort(start, kind="stable")
        start, end = start[order], end[order]
        row = cls(start, end)
        n = len(start)
        dur = end - start
        ones = np.ones(n, dtype=np.int64)
        rep = np.arange(n, dtype=np.int64)
        lvl = Level(0, start, end, ones, rep, dur, int(dur.max()) if n else 0,
                    bool(n < 2 or np.all(end[1:] >= end[:-1])))
        row.levels.append(lvl)
        cur = (start, end, ones, rep, dur)
        thr = BASE_THRESHOLD_NS
        stored = n
        while len(cur[0]) > 1:
            cur = merge(*cur, threshold=thr)
            # keep a level only when it is much smaller than the last kept one
            if len(cur[0]) * 2 <= stored:
                s, e, c, r, d = cur
                row.levels.append(Level(thr, s, e, c, r, d, int((e - s).max()),
                                        bool(len(e) < 2 or np.all(e[1:] >= e[:-1]))))
                stored = len(s)
            thr *= LEVEL_FACTOR
        return row, order

    def __len__(self) -> int:
        return len(self.start)

    def query(self, t0: int, t1: int, threshold: float, mask: np.ndarray | None = None) -> Shapes:
        """Shapes overlapping [t0, t1) merged at ``threshold`` ns (about one pixel).

        With ``mask`` (bool over raw events) only those events are considered (search highlight);
        the pyramid is then bypassed.
        """
        if len(self.start) == 0 or t1 <= t0:
            return _empty_shapes()
        if mask is not None:
            lvl = self.levels[0]
            lo = np.searchsorted(lvl.start, t0 - lvl.max_dur, side="left")
            hi = np.searchsorted(lvl.start, t1, side="left")
            sel = np.arange(lo, hi)
            sel = sel[(lvl.end[lo:hi] > t0) & mask[lo:hi]]
            parts = (lvl.start[sel], lvl.end[sel], lvl.count[sel], lvl.rep[sel], lvl.rep_dur[sel])
            s, e, c, r, _ = merge(*parts, threshold=int(threshold))
            return Shapes(s, e, c, r)
        lvl = self.levels[0]
        for cand in self.levels[1:]:
            if cand.threshold <= threshold:
                lvl = cand
        hi = np.searchsorted(lvl.start, t1, side="left")
        if lvl.ends_sorted:
            lo = np.searchsorted(lvl.end, t0, side="right")
            parts = (lvl.start[lo:hi], lvl.end[lo:hi], lvl.count[lo:hi], lvl.rep[lo:hi], lvl.rep_dur[lo:hi])
        else:
            lo = np.searchsorted(lvl.start, t0 - lvl.max_dur, side="left")
            keep = np.flatnonzero(lvl.end[lo:hi] > t0) + lo
            parts = (lvl.start[keep], lvl.end[keep], lvl.count[keep], lvl.rep[keep], lvl.rep_dur[keep])
        s, e, c, r, _ = merge(*parts, threshold=int(threshold))
        return Shapes(s, e, c, r)


def query_rows(rows: list[Row], t0: int, t1: int, width_px: int, budget: int = 4000,
               masks: list[np.ndarray | None] | None = None) -> tuple[list[Shapes], float]:
    """Query every row at one pixel of ``(t1 - t0) / width_px`` ns; if the total exceeds ``budget``
    shapes, coarsen the threshold until it fits. Returns (shapes per row, threshold used in ns)."""
    px = max((t1 - t0) / max(width_px, 1), 1.0)
    thr = px
    masks = masks or [None] * len(rows)
    for _ in range(12):
        out = [r.query(t0, t1, thr, m) for r, m in zip(rows, masks)]
        total = sum(len(s) for s in out)
        if total <= budget:
            return out, thr
        thr *= max(2.0, total / budget)
    return out, thr


def bin_counter(ts: np.ndarray, value: np.ndarray, t0: int, t1: int, width_px: int) -> tuple[np.ndarray, np.ndarray]:
    """Counter samples in [t0, t1] reduced to at most ``width_px`` points (max per pixel column), plus
    the samples just outside the window so the line reaches both edges. ``ts`` must be sorted."""
    lo = max(int(np.searchsorted(ts, t0, side="left")) - 1, 0)
    hi = int(np.searchsorted(ts, t1, side="right")) + 1
    t, v = ts[lo:hi], value[lo:hi]
    if len(t) <= width_px:
        return t, v
    edges = np.linspace(t0, t1, width_px + 1)
    idx = np.unique(np.concatenate(([0], np.searchsorted(t, edges, side="left"))))
    idx = idx[idx < len(t)]
    return t[idx], np.maximum.reduceat(v, idx)
