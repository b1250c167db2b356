"""Which captured host ops become device work: the leaf compute ops of a host op table, so nested ops
(``aten::linear`` -> ``aten::addmm``) are lowered once. The op model itself (FLOPs and bytes from shapes)
lives in :mod:`neuron_profiler.opmodel`.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_profiler.opmodel import COMPUTE_CLASSES, OpWork, classify, lower_signature, parse_json_list

__all__ = ["OpWork", "classify", "lower_signature", "leaf_compute_mask", "parse_json_list", "COMPUTE_CLASSES"]


def _innermost(track: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """True for intervals that contain no other interval of the set on the same track.

    Sorted by (track, start, -duration), a properly nested parent is immediately followed by its first
    descendant, which starts before the parent ends."""
    order = np.lexsort((-dur, start, track))
    t, s, d = track[order], start[order], dur[order]
    e = s + d
    parent = np.zeros(len(order), dtype=bool)
    same = t[1:] == t[:-1]
    parent[:-1] = same & (((s[1:] < e[:-1]) & (d[:-1] > 0)) | ((s[1:] == s[:-1]) & (e[1:] == e[:-1])))
    out = np.zeros(len(order), dtype=bool)
    out[order] = ~parent
    return out


def _inside_any(track: np.ndarray, start: np.ndarray, end: np.ndarray,
                q_track: np.ndarray, q_start: np.ndarray, q_end: np.ndarray) -> np.ndarray:
    """True for query intervals lying within some interval (track, start, end) on the same track."""
    out = np.zeros(len(q_track), dtype=bool)
    for tr in np.unique(q_track):
        m = track == tr
        if not m.any():
            continue
        o = np.argsort(start[m], kind="stable")
        st, run_end = start[m][o], np.maximum.accumulate(end[m][o])
        q = np.flatnonzero(q_track == tr)
        k = np.searchsorted(st, q_start[q], side="right") - 1
        ok = k >= 0
        out[q[ok]] = run_end[k[ok]] >= q_end[q[ok]]
    return out


def leaf_compute_mask(host_ops: pd.DataFrame, compute: np.ndarray, tensor_op: np.ndarray | None = None) -> np.ndarray:
    """Which compute ops to lower, so nested ops are lowered once (vectorised per track).

    A Tensor-engine op (``tensor_op``: matmul / conv / attention) is lowered unless it contains another
    Tensor-engine op (aten::linear -> aten::addmm: only addmm). Any other compute op is lowered when it
    contains no compute op and lies inside no Tensor-engine op (the bias ``copy_`` inside a CPU
    ``addmm`` is part of the addmm)."""
    n = len(host_ops)
    leaf = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(compute)
    if not len(idx):
        return leaf
    track = host_ops["track"].to_numpy(np.int64)
    start = host_ops["start_ts"].to_numpy(np.int64)
    dur = host_ops["duration_ns"].to_numpy(np.int64)
    leaf[idx] = _innermost(track[idx], start[idx], dur[idx])
    if tensor_op is None:
        return leaf
    tix = np.flatnonzero(compute & tensor_op)
    if len(tix):
        leaf[tix] = _innermost(track[tix], start[tix], dur[tix])
        other = np.flatnonzero(leaf & ~tensor_op)
        inside = _inside_any(track[tix], start[tix], start[tix] + dur[tix],
                             track[other], start[other], start[other] + dur[other])
        leaf[other[inside]] = False
    return leaf
