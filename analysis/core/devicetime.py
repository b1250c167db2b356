"""The one definition of an op's device time, its achieved rates and whether it is memory or compute bound.

**Device time** of a group of device rows (an op, a module, a python stack, an engine) is the sum over its
*invocations* (launching host ops) of the union of the intervals of the invocation's rows in the group: its
instructions on every engine and, on Neuron, the DMA transfers and collectives tied to the same host op.
Rows without a launching op form one set per group. Counting engine busy time alone (the sum of instruction
durations) would count concurrent engines twice and leave out the DMA a memory-bound op waits for, putting
such ops above the memory roof. ``hot_ops``, ``roofline`` and ``diff`` all use :func:`group_time`.

**Exclusive share**: when k device rows run at once each gets 1/k of that time (:func:`exclusive_ns`), so
the shares of all groups add up to the union of device activity and never exceed the time they come from.

**Achieved rates** are FLOPs (bytes) / device time. A rate above the device's peak is impossible; it means
the FLOPs or bytes are estimates that overstate the work (shape-derived bytes of data served from cache,
DMA bytes counted on the engine that waits for them): :func:`physical` replaces such rates by NaN and says why.

**Bound**: memory bound when the arithmetic intensity (FLOP/byte) is below the ridge point (peak FLOP/s /
memory roof), compute bound at or above it (work with FLOPs and no HBM bytes is compute bound), unknown when
either is unknown (:func:`bound`).
"""
from __future__ import annotations

import numpy as np

from .intervals import exclusive_ns, union_by_key

#: rows per chunk of :func:`group_sum`
_CHUNK = 1 << 16

__all__ = ["group_time", "group_sum", "exclusive_ns", "bound", "physical", "RATE_TOLERANCE"]

#: relative slack on physical bounds (integer-ns durations of work that runs exactly at a peak)
RATE_TOLERANCE = 1e-6


def group_time(group: np.ndarray, invocation: np.ndarray, start: np.ndarray, end: np.ndarray, n_groups: int, *,
               sorted_by_start: bool = False) -> np.ndarray:
    """Device time (ns, float) per group code 0..n_groups-1: Σ over (group, invocation) of the union of the
    rows' intervals. ``group`` -1 leaves a row out; ``invocation`` -1 = no launching op."""
    group = np.asarray(group, dtype=np.int64)
    keep = group >= 0
    if not keep.any():
        return np.zeros(n_groups)
    inv = np.asarray(invocation, dtype=np.int64)
    stride = int(inv.max()) + 2 if len(inv) else 1
    if keep.all():
        key = group * stride + (inv + 1)
        s, e = start, end
    else:
        key = group[keep] * stride + (inv[keep] + 1)
        s, e = start[keep], end[keep]
    u = union_by_key(key, s, e, sorted_by_start=sorted_by_start)
    return np.bincount(u.index.to_numpy() // stride, weights=u.to_numpy().astype(float), minlength=n_groups)


def group_sum(group: np.ndarray, values: np.ndarray, n_groups: int, at_least: float | None = None) -> np.ndarray:
    """Σ of ``values`` per group code (rows with group -1 left out); ``at_least``: each value counted as at least
    that (``np.maximum(values, at_least, dtype=float)``, chunk by chunk).

    Chunk by chunk with ``np.add.at`` (the left-out rows in a bin of their own): each bin adds its rows in row
    order from 0.0, as one ``np.bincount`` over all rows does, so the sums are the same floats; but no n-long
    array is made (bincount copies a read-only input, and the memoised columns are handed out read-only)."""
    group = np.asarray(group, dtype=np.int64)
    values = np.asarray(values)
    if not len(group):
        return np.zeros(n_groups)
    out = np.zeros(max(n_groups, int(group.max()) + 1) + 1)
    for a in range(0, len(group), _CHUNK):
        v = values[a:a + _CHUNK]
        v = v.astype(np.float64, copy=False) if at_least is None else np.maximum(v, at_least, dtype=np.float64)
        np.add.at(out, group[a:a + _CHUNK] + 1, v)
    return out[1:]


def bound(flops: np.ndarray, hbm_bytes: np.ndarray, ridge: np.ndarray) -> np.ndarray:
    """'memory' | 'compute' | 'unknown' per element (see the module doc). ``hbm_bytes`` NaN = unknown."""
    f = np.asarray(flops, dtype=float)
    b = np.asarray(hbm_bytes, dtype=float)
    r = np.asarray(ridge, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ai = np.where(b > 0, f / np.where(b > 0, b, 1.0), np.where(f > 0, np.inf, np.nan))
    known = np.isfinite(r) & ~np.isnan(ai) & ~np.isnan(b) & ~np.isnan(f)
    return np.where(~known, "unknown", np.where(ai < r, "memory", "compute")).astype(object)


def physical(rate: np.ndarray, peak: np.ndarray, why: str, note: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray]:
    """``rate`` with NaN where it exceeds ``peak`` (× 1 + :data:`RATE_TOLERANCE`), and the note per row
    (``why`` appended where a rate was removed). ``peak`` NaN: no bound to check."""
    r = np.asarray(rate, dtype=float).copy()
    p = np.asarray(peak, dtype=float)
    bad = np.isfinite(r) & np.isfinite(p) & (r > p * (1 + RATE_TOLERANCE))
    out_note = np.full(len(r), "", dtype=object) if note is None else np.asarray(note, dtype=object).copy()
    if bad.any():
        r[bad] = np.nan
        out_note[bad] = np.where(out_note[bad] == "", why, out_note[bad] + "; " + why)
    return r, out_note


