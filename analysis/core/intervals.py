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
_I64_MAX = np.iinfo(np.int64).max


def is_sorted(a: np.ndarray) -> bool:
    """True when ``a`` is non-decreasing."""
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def start_order(start: np.ndarray) -> np.ndarray | None:
    """Stable argsort of ``start``, or None when it is already sorted."""
    return None if is_sorted(start) else np.argsort(start, kind="stable")


def first_rows(keys: np.ndarray, where: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct non-negative keys, ascending; the index of each key's first row) in linear time for
    dense keys such as row ids (``np.unique(..., return_index=True)`` otherwise). ``where``: only the rows it
    marks count (indices still into ``keys``; no selected copy)."""
    keys = np.asarray(keys, dtype=np.int64)
    sel = len(keys) if where is None else int(np.count_nonzero(where))
    if not sel:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    lo = int(keys.min(where=where, initial=_I64_MAX)) if where is not None else int(keys.min())
    top = int(keys.max(where=where, initial=_I64_MIN)) if where is not None else int(keys.max())
    if lo < 0 or top > 8 * sel + 1024:
        rows = np.flatnonzero(where) if where is not None else None
        u, i = np.unique(keys if rows is None else keys[rows], return_index=True)
        return u, (i if rows is None else rows[i]).astype(np.int64)
    pos = np.full(top + 1, -1, np.int64)
    for a in range(((len(keys) - 1) // _CHUNK) * _CHUNK, -1, -_CHUNK):  # the last chunk first, each backwards:
        idx = np.arange(a, min(a + _CHUNK, len(keys)))  # the last write wins, i.e. each key's first row
        if where is not None:
            idx = idx[where[a:a + _CHUNK]]
        pos[keys[idx[::-1]]] = idx[::-1]
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


def union_by_key(key: np.ndarray, start: np.ndarray, end: np.ndarray, *, sorted_by_start: bool = False,
                 skip_negative: bool = False) -> pd.Series:
    """Σ of the union of [start, end) per key (ns): an int64 Series indexed by the distinct keys (ascending).
    ``skip_negative``: rows with a negative key are left out (no selected copies of the columns)."""
    key = np.asarray(key)
    if key.dtype.kind not in "iu":
        key = key.astype(np.int64)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if skip_negative and len(key) and key.min() < 0:
        m = key >= 0
        dense = sorted_by_start and 0 <= int(key.max()) < 4 * len(key) + 1024
        if not dense:  # the selected rows, then as any keys
            return union_by_key(key[m], start[m], end[m], sorted_by_start=sorted_by_start)
        present, sums = _dense_keys_union(key, start, end, int(key.max()) + 1)
        return pd.Series(sums, index=present, dtype=np.int64)
    if not len(key):
        return pd.Series(dtype=np.int64)
    if not sorted_by_start:
        o = start_order(start)
        if o is not None:
            key, start, end = key[o], start[o], end[o]
    lo_k, hi_k = int(key.min()), int(key.max())
    if lo_k >= 0 and hi_k < 16:  # a few keys (engines, kernel types): chunk by chunk, no array of all rows
        present, sums = _few_keys_union(key, start, end, hi_k + 1)
        return pd.Series(sums, index=present, dtype=np.int64)
    if lo_k >= 0 and hi_k < 4 * len(key) + 1024:  # small non-negative ids (row numbers) are their own dense codes
        present, sums = _dense_keys_union(key, start, end, hi_k + 1)
        return pd.Series(sums, index=present, dtype=np.int64)
    codes, uniques = pd.factorize(key, sort=True)
    present, sums = _dense_keys_union(codes, start, end, len(uniques))
    return pd.Series(sums, index=np.asarray(uniques, dtype=np.int64)[present], dtype=np.int64)


def _dense_keys_union(key: np.ndarray, start: np.ndarray, end: np.ndarray, n_keys: int
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(present keys, Σ of the union per present key) of start-sorted rows with keys < ``n_keys`` (rows with a
    negative key are left out), chunk by chunk: a chunk's rows grouped by key (stable: starts stay sorted within
    a key), each row's new coverage measured against the running maximum of its key's ends, carried from chunk to
    chunk in an array per key. The same row contributions as over all rows at once; their integer sums are exact."""
    reach = np.full(n_keys, _I64_MIN, np.int64)  # latest end so far per key
    sums = np.zeros(n_keys, np.int64)
    seen = np.zeros(n_keys, bool)
    for a in range(0, len(key), _CHUNK):
        k, s, e = key[a:a + _CHUNK], start[a:a + _CHUNK], end[a:a + _CHUNK]
        keep = k >= 0
        if not keep.all():
            k, s, e = k[keep], s[keep], e[keep]
        if not len(k):
            continue
        if not is_sorted(k):
            o = np.argsort(k, kind="stable")
            k, s, e = k[o], s[o], e[o]
        first = np.empty(len(k), dtype=bool)
        first[0] = True
        np.not_equal(k[1:], k[:-1], out=first[1:])
        heads = np.flatnonzero(first)
        keys = k[heads].astype(np.intp)
        carried = reach[keys]
        r = e.copy()  # running maximum of the ends within each key, from its reach so far
        r[heads] = np.maximum(r[heads], carried)
        _group_cummax(r, first, len(heads))
        prev = np.empty_like(r)  # each row's reach before it: the previous row's, the carried one at a key's first
        prev[1:] = r[:-1]
        prev[heads] = carried
        np.maximum(s, prev, out=prev)
        np.subtract(e, prev, out=prev)
        np.maximum(prev, 0, out=prev)
        sums[keys] += np.add.reduceat(prev, heads)
        reach[keys] = r[np.append(heads[1:], len(r)) - 1]
        seen[keys] = True
    present = np.flatnonzero(seen)
    return present.astype(np.int64), sums[present]


def _group_cummax(r: np.ndarray, first: np.ndarray, n_groups: int) -> None:
    """Running maximum of ``r`` in place within consecutive groups (``first`` marks each group's first row)."""
    t0 = int(r.min())
    span = int(r.max()) - t0 + 1
    if span * n_groups >= (1 << 62):
        r[:] = pd.Series(r).groupby(np.cumsum(first)).cummax().to_numpy()
        return
    shift = np.cumsum(first, dtype=np.int64)  # group i's values shifted above group i - 1's
    shift *= span
    r -= t0
    r += shift
    np.maximum.accumulate(r, out=r)
    r -= shift
    r += t0


#: rows per chunk of the chunked passes (:func:`_few_keys_union`, :func:`_dense_keys_union`, :func:`merge_where`,
#: :func:`_exclusive_chunked`): their arrays stay in the CPU caches
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
    steps): only time inside them counts.

    A row's share is A(end) - A(start), A(t) the running integral of 1 / (intervals running) over the sorted
    start, end and window points (:func:`_exclusive_chunked`: chunk by chunk, in the CPU caches)."""
    n = len(start)
    if n == 0:
        return np.zeros(0)
    s = np.asarray(start, dtype=np.int64)
    ws = we = np.zeros(0, np.int64)
    lo = hi = None
    if windows is not None:
        ws, we = np.asarray(windows[0], dtype=np.int64), np.asarray(windows[1], dtype=np.int64)
        if len(ws) <= 1:  # one window: clipping is exact and cheaper
            lo, hi = (int(ws[0]), int(we[0])) if len(ws) else (0, 0)
            ws = we = np.zeros(0, np.int64)
    if is_sorted(s):  # clipping keeps starts sorted: the rows are clipped chunk by chunk
        return _exclusive_chunked(s, np.asarray(end, dtype=np.int64), lo, hi, ws, we)
    s, e = clip(s, np.maximum(np.asarray(end, dtype=np.int64), s), lo, hi)
    o = np.argsort(s, kind="stable")  # computed on start-sorted rows, returned in the caller's order
    out = np.empty(n)
    out[o] = _exclusive_chunked(s[o], e[o], None, None, ws, we)
    return out


def _clip_rows(s: np.ndarray, e: np.ndarray, lo: int | None, hi: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Rows as :func:`exclusive_ns` counts them: ends before their start at the start, then :func:`clip`."""
    return clip(s, np.maximum(e, s), lo, hi)


def _exclusive_chunked(s: np.ndarray, e: np.ndarray, lo: int | None, hi: int | None, ws: np.ndarray,
                       we: np.ndarray) -> np.ndarray:
    """:func:`exclusive_ns` of start-sorted rows (clipped here, :func:`_clip_rows`) and windows.

    The points are taken in time order chunk by chunk: a chunk's starts, then the ends and window points before
    the next chunk's first start. Each chunk's ends are sorted once and wait, as a run of their own, until the
    chunk they fall in; :func:`_chunk_integral` carries the running count, window count and integral from
    chunk to chunk. No array of all rows but the result is made."""
    n, m = len(s), len(ws)
    out = np.empty(n)
    runs: list[tuple[np.ndarray, np.ndarray]] = []  # (sorted ends, their rows) not reached yet, one per chunk
    carry: list = [None, 0.0, 0, 0]  # the last point, the integral there, rows and windows running after it
    iw = jw = 0
    for a in range(0, n, _CHUNK):
        b = min(a + _CHUNK, n)
        sc, ec = _clip_rows(s[a:b], e[a:b], lo, hi)
        o = np.argsort(ec)  # (the order of equal ends does not matter: they add 0 ns between them)
        runs.append((ec[o], o + a))
        cut = int(_clip_rows(s[b:b + 1], e[b:b + 1], lo, hi)[0][0]) if b < n else None  # the next chunk's start
        taken, rows_in, left = [], [], []
        for rt, rr in runs:  # the ends before the cut
            j = len(rt) if cut is None else int(np.searchsorted(rt, cut, "left"))
            taken.append(rt[:j])
            rows_in.append(rr[:j])
            if j < len(rt):
                left.append((rt[j:], rr[j:]))
        runs = left
        iw2, jw2 = (m, m) if cut is None else (int(np.searchsorted(ws, cut)), int(np.searchsorted(we, cut)))
        acc, order = _chunk_integral(carry, [sc, *taken, ws[iw:iw2], we[jw:jw2]], b - a, m > 0)
        iw, jw = iw2, jw2
        rows = np.concatenate(rows_in)
        is_end = (order >= b - a) & (order < b - a + len(rows))
        out[a:b] = acc[order < b - a]
        ended = rows[order[is_end] - (b - a)]
        out[ended] = acc[is_end] - out[ended]
    np.maximum(out, 0.0, out=out)
    return out


def _chunk_integral(carry: list, parts: list[np.ndarray], n_s: int, windowed: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(the integral of 1 / (rows running) at each point of one chunk, the stable order of its points) for the
    chunk's points ``parts`` (``n_s`` starts, sorted runs of ends, window starts, window ends; ``windowed``: only
    time inside windows counts), continuing ``carry`` = [last point, integral there, rows running, windows
    open], updated.
    The integral is one sequential sum as over all points at once (zero-length segments add 0.0): the shares
    are the same floats as from one sort of every point."""
    pts = np.concatenate(parts)
    order = np.argsort(pts, kind="stable")
    t = pts[order]
    n_ws = len(parts[-2])
    n_e = len(pts) - n_s - n_ws - len(parts[-1])
    t_prev, acc_prev, count_prev, win_prev = carry
    step = (order < n_s).view(np.int8) - ((order >= n_s) & (order < n_s + n_e)).view(np.int8)
    count = np.empty(len(t) + 1, np.int64)  # rows running after the previous point, then after each point
    count[0] = count_prev
    np.cumsum(step, out=count[1:])
    count[1:] += count_prev
    tt = np.concatenate([[t[0] if t_prev is None else t_prev], t])
    seg = np.empty(len(t) + 1)  # the integral so far, then each segment's length ending at t[j]
    seg[0] = acc_prev
    np.subtract(tt[1:], tt[:-1], out=seg[1:], casting="unsafe")
    if windowed:  # only time inside the windows counts
        wk = (order >= n_s + n_e).view(np.int8) - (order >= n_s + n_e + n_ws).view(np.int8) * 2
        win = np.empty(len(t), np.int64)
        win[0] = win_prev
        np.cumsum(wk[:-1], out=win[1:])
        win[1:] += win_prev
        seg[1:][win <= 0] = 0.0
        win_prev += int(wk.sum())
    carry[2] = int(count[-1])
    np.maximum(count, 1, out=count)
    seg[1:] /= count[:-1]
    np.cumsum(seg, out=seg)  # the integral at each point, sequential as over all points at once
    carry[0], carry[1], carry[3] = t[-1], float(seg[-1]), win_prev
    return seg[1:], order
