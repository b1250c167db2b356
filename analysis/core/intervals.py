"""Time intervals [start, end) in int64 ns: the one implementation of union, merge, overlap, gaps and
exclusive (concurrency-split) time that every analysis uses.

All functions are vectorised and accept unsorted input; the ``sorted_by_start`` flags skip the sort when the
caller already holds start-sorted arrays (``Trace.device_activity`` is). Sorts are stable and chosen to be
linear where the data allows it (timsort on nearly sorted times, radix on <= 16-bit keys), so wall time stays
close to linear in the number of rows.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

__all__ = ["first_rows", "is_sorted", "start_order", "merge", "merge_where", "union_ns", "union_sorted_ns",
           "union_by_key", "intersection_ns", "gaps", "coarsen", "exclusive_ns", "clip", "stable_key_order"]

_I64_MIN = np.iinfo(np.int64).min


def is_sorted(a: np.ndarray) -> bool:
    """True when ``a`` is non-decreasing."""
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def start_order(start: np.ndarray) -> np.ndarray | None:
    """Stable argsort of ``start``, or None when it is already sorted."""
    return None if is_sorted(start) else np.argsort(start, kind="stable")


def first_rows(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct non-negative keys, ascending; the index of each key's first row) in linear time for
    dense keys such as row ids (``np.unique(..., return_index=True)`` otherwise)."""
    keys = np.asarray(keys, dtype=np.int64)
    if not len(keys):
        return keys, np.zeros(0, np.int64)
    top = int(keys.max())
    if keys.min() < 0 or top > 8 * len(keys) + 1024:
        u, i = np.unique(keys, return_index=True)
        return u, i.astype(np.int64)
    pos = np.full(top + 1, -1, np.int64)
    pos[keys[::-1]] = np.arange(len(keys) - 1, -1, -1)  # the last write wins: the first occurrence
    present = np.flatnonzero(pos >= 0)
    return present, pos[present]


def clip(start: np.ndarray, end: np.ndarray, lo: int | None, hi: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Intervals clipped to [lo, hi) (None: unbounded); an interval outside has zero length (end == start)."""
    s, e = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if lo is not None:
        s = np.maximum(s, lo)
        e = np.maximum(e, lo)
    if hi is not None:
        e = np.minimum(e, hi)
        s = np.minimum(s, e)
    return s, e


def merge(start: np.ndarray, end: np.ndarray, *, sorted_by_start: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The union as sorted disjoint (start, end) arrays. Grouping rule of HTA's ``merge_kernel_intervals``: an
    interval that starts at or before the running maximum end joins the group (touching intervals merge)."""
    s, e = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not sorted_by_start:
        o = start_order(s)
        if o is not None:
            s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], reach[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def merge_where(start: np.ndarray, end: np.ndarray, select: Callable[[int, int], np.ndarray] | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`merge` of start-sorted intervals, or of the rows ``select(a, b)`` keeps of rows ``a:b`` (a bool
    mask), chunk by chunk: each chunk's groups found against the reach carried from the previous chunks, so no
    array of all rows is made (no selected copies of the columns, no running maximum of all ends)."""
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    reach = _I64_MIN
    for a in range(0, len(start), _CHUNK):
        s, e = start[a:a + _CHUNK], end[a:a + _CHUNK]
        if select is not None:
            m = select(a, a + len(s))
            s, e = s[m], e[m]
        if not len(s):
            continue
        r = np.maximum.accumulate(e)
        np.maximum(r, reach, out=r)
        new = np.empty(len(s), dtype=bool)
        new[0] = s[0] > reach
        np.greater(s[1:], r[:-1], out=new[1:])
        first = np.flatnonzero(new)
        if not new[0]:  # the chunk's first rows belong to the last group so far
            head = int(first[0]) if len(first) else len(s)
            ends[-1][-1] = max(ends[-1][-1], e[:head].max())
        if len(first):
            starts.append(s[first])
            ends.append(np.maximum.reduceat(e, first))
        reach = int(r[-1])
    if not starts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(starts).astype(np.int64, copy=False), np.concatenate(ends).astype(np.int64, copy=False)


def union_sorted_ns(start: np.ndarray, end: np.ndarray) -> int:
    """Length of the union of start-sorted intervals (ns)."""
    if not len(start):
        return 0
    reach = np.maximum.accumulate(end)
    covered = np.empty_like(reach)  # each interval's new coverage: end - max(start, previous reach), >= 0
    covered[0] = end[0] - start[0]
    np.maximum(start[1:], reach[:-1], out=covered[1:])
    del reach
    np.subtract(end[1:], covered[1:], out=covered[1:])
    np.maximum(covered, 0, out=covered)
    return int(covered.sum())


def union_ns(start: np.ndarray, end: np.ndarray, lo: int | None = None, hi: int | None = None, *,
             sorted_by_start: bool = False) -> int:
    """Length (ns) of the union of [start, end), optionally clipped to [lo, hi)."""
    s, e = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if lo is not None or hi is not None:
        s, e = clip(s, e, lo, hi)  # clipping keeps the order of starts
    if not sorted_by_start:
        o = start_order(s)
        if o is not None:
            s, e = s[o], e[o]
    return union_sorted_ns(s, e)


def stable_key_order(codes: np.ndarray) -> np.ndarray:
    """Stable argsort of non-negative integer codes: radix passes of 16 bits (linear) for codes < 2**32."""
    codes = np.asarray(codes)
    if not len(codes):
        return np.zeros(0, np.int64)
    top = int(codes.max())
    if top < (1 << 16):
        return np.argsort(codes.astype(np.uint16), kind="stable")
    if top < (1 << 32):
        o = np.argsort((codes & 0xFFFF).astype(np.uint16), kind="stable")
        return o[np.argsort((codes[o] >> 16).astype(np.uint16), kind="stable")]
    return np.argsort(codes, kind="stable")


def union_by_key(key: np.ndarray, start: np.ndarray, end: np.ndarray, *, sorted_by_start: bool = False
                 ) -> pd.Series:
    """Σ of the union of [start, end) per key (ns): an int64 Series indexed by the distinct keys (ascending)."""
    if not len(key):
        return pd.Series(dtype=np.int64)
    key = np.asarray(key)
    if key.dtype.kind not in "iu":
        key = key.astype(np.int64)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if not sorted_by_start:
        o = start_order(start)
        if o is not None:
            key, start, end = key[o], start[o], end[o]
    lo_k, hi_k = int(key.min()), int(key.max())
    if lo_k >= 0 and hi_k < 16:  # a few keys (engines, kernel types): chunk by chunk, no array of all rows
        present, sums = _few_keys_union(key, start, end, hi_k + 1)
        return pd.Series(sums, index=present, dtype=np.int64)
    key = key.astype(np.int64, copy=False)
    if lo_k >= 0 and hi_k < 4 * len(key) + 1024:
        kc, uniques = key, None  # small non-negative ids (row numbers) are their own dense codes
    else:
        codes, uniques = pd.factorize(key, sort=True)
        kc = codes.astype(np.int64, copy=False)
    o = stable_key_order(kc)  # by key; starts stay sorted within a key
    k, s0, e0 = kc[o], start[o], end[o]
    del o
    first = np.ones(len(k), dtype=bool)
    np.not_equal(k[1:], k[:-1], out=first[1:])
    heads = np.flatnonzero(first)
    idx = k[heads] if uniques is None else uniques[k[heads]]
    t0 = int(min(s0.min(), e0.min()))
    span = int(e0.max()) - t0 + 1
    if span * (int(k[-1]) + 1) < (1 << 62):  # running max within each key: key i's times shifted by i*span
        shift = k  # k is not needed any more: the shifts are made in its array, then the previous reaches
        shift *= span
        reach = e0 - t0
        reach += shift
        np.maximum.accumulate(reach, out=reach)
        reach -= shift
        reach += t0
        prev = shift
        del shift
    else:
        reach = pd.Series(e0).groupby(k).cummax().to_numpy()
        prev = np.empty_like(reach)
    del k
    prev[1:] = reach[:-1]  # reach of the previous row of the same key (-inf at a key's first row)
    del reach
    prev[first] = _I64_MIN
    np.maximum(s0, prev, out=prev)
    np.subtract(e0, prev, out=prev)
    np.maximum(prev, 0, out=prev)
    return pd.Series(np.add.reduceat(prev, heads), index=idx)


#: rows per chunk of :func:`_few_keys_union` (its arrays stay in the CPU caches)
_CHUNK = 1 << 16


def _few_keys_union(key: np.ndarray, start: np.ndarray, end: np.ndarray, n_keys: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(present keys, Σ of the union per present key) of start-sorted rows with keys in [0, n_keys < 256).

    Chunk by chunk: a chunk's rows grouped by key (a stable radix order: starts stay sorted within a key), each
    key's new coverage measured against its reach so far, carried from chunk to chunk. One pass over the rows
    in cache-sized pieces, instead of a mask and two gathered copies of the whole columns per key."""
    reach = np.full(n_keys, _I64_MIN, np.int64)  # latest end so far per key
    sums = np.zeros(n_keys, np.int64)
    counts = np.zeros(n_keys, np.int64)
    bounds = np.zeros(n_keys + 1, np.int64)
    for a in range(0, len(key), _CHUNK):
        kc = key[a:a + _CHUNK].astype(np.uint8)
        c = np.bincount(kc, minlength=n_keys)
        counts += c
        np.cumsum(c, out=bounds[1:])
        o = np.argsort(kc, kind="stable")
        sc, ec = start[a:a + _CHUNK][o], end[a:a + _CHUNK][o]
        for k in np.flatnonzero(c).tolist():
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            sums[k] += _covered_after(sc[lo:hi], ec[lo:hi], reach, k)
    present = np.flatnonzero(counts)
    return present.astype(np.int64), sums[present]


def _covered_after(s: np.ndarray, e: np.ndarray, reach: np.ndarray, k: int) -> int:
    """ns of start-sorted [s, e) not covered before (by ends up to ``reach[k]``), :func:`union_sorted_ns`'s rule;
    ``reach[k]`` becomes the latest end."""
    r = np.maximum.accumulate(e)
    np.maximum(r, reach[k], out=r)
    prev = np.empty_like(r)  # each row's new coverage: e - max(s, reach before it), >= 0
    prev[0] = reach[k]
    prev[1:] = r[:-1]
    np.maximum(prev, s, out=prev)
    np.subtract(e, prev, out=prev)
    np.maximum(prev, 0, out=prev)
    reach[k] = r[-1]
    return int(prev.sum())


def intersection_ns(a_start: np.ndarray, a_end: np.ndarray, b_start: np.ndarray, b_end: np.ndarray) -> int:
    """Total length where two sets of *disjoint, sorted* intervals (e.g. :func:`merge` results) both cover."""
    if len(a_start) == 0 or len(b_start) == 0:
        return 0
    t = np.concatenate([a_start, a_end, b_start, b_end])
    d = np.concatenate([np.full(len(a_start), 1, np.int8), np.full(len(a_end), -1, np.int8),
                        np.full(len(b_start), 2, np.int8), np.full(len(b_end), -2, np.int8)])
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    running = np.cumsum(d, dtype=np.int16)
    return int(np.diff(t)[running[:-1] == 3].sum())


def gaps(merged_start: np.ndarray, merged_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gaps between disjoint sorted intervals: (gap_start, gap_end) arrays (one fewer than the input)."""
    return merged_end[:-1], merged_start[1:]


def coarsen(s: np.ndarray, e: np.ndarray, resolution: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted disjoint intervals merged across gaps shorter than ``resolution``: (start, end, busy ns)."""
    if not len(s):
        return s, e, np.zeros(0, np.int64)
    new = np.ones(len(s), dtype=bool)
    new[1:] = (s[1:] - e[:-1]) >= resolution
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first), np.add.reduceat(e - s, first)


def exclusive_ns(start: np.ndarray, end: np.ndarray, windows: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> np.ndarray:
    """Each interval's exclusive share of wall time (float ns): time when k intervals run at once counts 1/k for
    each, so the shares add up to the union. ``windows`` (sorted disjoint (start, end) arrays, e.g. merged
    steps): only time inside them counts."""
    n = len(start)
    if n == 0:
        return np.zeros(0)
    s = np.asarray(start, dtype=np.int64)
    e = np.maximum(np.asarray(end, dtype=np.int64), s)
    ws = we = np.zeros(0, np.int64)
    if windows is not None:
        ws, we = np.asarray(windows[0], dtype=np.int64), np.asarray(windows[1], dtype=np.int64)
        if len(ws) <= 1:  # one window: clipping is exact and cheaper
            lo, hi = (int(ws[0]), int(we[0])) if len(ws) else (0, 0)
            s, e = clip(s, e, lo, hi)
            ws = we = np.zeros(0, np.int64)
    o = start_order(s)
    if o is not None:  # computed on start-sorted rows, returned in the caller's order
        out = np.empty(n)
        out[o] = _exclusive_sorted(s[o], e[o], ws, we)
        return out
    return _exclusive_sorted(s, e, ws, we)


def _exclusive_sorted(s: np.ndarray, e: np.ndarray, ws: np.ndarray, we: np.ndarray) -> np.ndarray:
    n, m = len(s), len(ws)
    pts = np.concatenate([s, e, ws, we])
    # sorted starts then ends: two nearly sorted runs, which timsort merges in about linear time
    order = np.argsort(pts, kind="stable")
    t = pts[order]
    del pts
    is_start = order < n
    if m:
        is_win = order >= 2 * n
        delta = is_start.view(np.int8) - (~is_start & ~is_win).view(np.int8)
    else:
        delta = is_start.view(np.int8) * np.int8(2) - np.int8(1)
    count = np.cumsum(delta[:-1], dtype=np.int32)  # rows running in [t[j], t[j+1])
    del delta
    seg = np.empty(len(t) - 1)
    np.subtract(t[1:], t[:-1], out=seg, casting="unsafe")
    del t
    if m:  # only time inside the windows counts
        wk = (order >= 2 * n).view(np.int8) - (order >= 2 * n + m).view(np.int8) * np.int8(2)
        seg[np.cumsum(wk[:-1], dtype=np.int32) <= 0] = 0.0
        del wk
    # segments where nothing runs lie inside no interval: their weight cancels out of every difference below
    np.maximum(count, 1, out=count)
    seg /= count
    del count
    acc = np.empty(len(order))
    acc[0] = 0.0
    np.cumsum(seg, out=acc[1:])
    del seg
    # the stable sort keeps the (sorted) starts in row order, so the k-th start point is row k's start
    out = np.empty(n)
    is_end = ~is_start
    if m:
        is_end &= order < 2 * n
    out[order[is_end] - n] = acc[is_end]
    out -= acc[is_start]
    np.maximum(out, 0.0, out=out)
    return out
