"""Counter tracks of a simulated NeuronCore, sampled on a bounded grid (vectorised sweeps).

``DMA Throughput`` (bytes/s), ``Pending DMA Count`` (count), ``State Buffer Usage`` (percent),
``Estimated Instant MFU`` (percent).
"""
from __future__ import annotations

import numpy as np

__all__ = ["sample_grid", "rate_average", "level_at", "MAX_SAMPLES", "COUNTERS"]

MAX_SAMPLES = 2000
#: counter track name -> unit
COUNTERS = {"DMA Throughput": "bytes/s", "Pending DMA Count": "count", "State Buffer Usage": "percent",
            "Estimated Instant MFU": "percent"}


def sample_grid(t0: int, t1: int, max_samples: int = MAX_SAMPLES, min_step_ns: int = 100) -> np.ndarray:
    """Bin edges (int64 ns) covering [t0, t1]: at most ``max_samples`` bins, each >= ``min_step_ns``."""
    span = max(int(t1) - int(t0), 1)
    n = int(max(1, min(max_samples, span // min_step_ns)))
    return t0 + np.round(np.linspace(0, span, n + 1)).astype(np.int64)


def rate_average(edges: np.ndarray, start: np.ndarray, end: np.ndarray, amount: np.ndarray) -> np.ndarray:
    """Average rate per bin (amount per second) of quantities spread uniformly over [start, end).

    Exact: integrates the piecewise-constant total rate over each bin."""
    start = np.asarray(start, dtype=np.int64)
    if not len(start):
        return np.zeros(len(edges) - 1)
    end = np.maximum(np.asarray(end, dtype=np.int64), start + 1)
    rate = np.asarray(amount, dtype=np.float64) / (end - start)  # per ns
    times = np.concatenate([start, end])
    delta = np.concatenate([rate, -rate])
    order = np.argsort(times, kind="stable")
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)
    t_rel = (times - edges[0]).astype(np.float64)
    integral = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(t_rel))])
    e_rel = (edges - edges[0]).astype(np.float64)
    at_edges = np.interp(e_rel, t_rel, integral, left=0.0, right=integral[-1] if len(integral) else 0.0)
    widths = np.diff(e_rel)
    return np.diff(at_edges) / np.maximum(widths, 1) * 1e9


def level_at(points: np.ndarray, start: np.ndarray, end: np.ndarray, amount: np.ndarray | None = None) -> np.ndarray:
    """Sum of ``amount`` (1 each when None) over intervals [start, end) containing each point."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if amount is None:
        s, e = np.sort(start), np.sort(end)
        return (np.searchsorted(s, points, side="right") - np.searchsorted(e, points, side="right")).astype(np.float64)
    amount = np.asarray(amount, dtype=np.float64)
    o_s, o_e = np.argsort(start, kind="stable"), np.argsort(end, kind="stable")
    cs = np.concatenate([[0.0], np.cumsum(amount[o_s])])
    ce = np.concatenate([[0.0], np.cumsum(amount[o_e])])
    return cs[np.searchsorted(start[o_s], points, side="right")] - ce[np.searchsorted(end[o_e], points, side="right")]
