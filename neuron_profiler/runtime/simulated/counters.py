"""Counter tracks of a simulated NeuronCore (Neuron Explorer names), vectorised.

Rates (``DMA Throughput`` bytes/s, ``Estimated Instant MFU`` percent) are averaged over a bounded grid of
bins; levels (``State Buffer Usage``, ``PSUM Usage``, ``Pending DMA Count``) are exact step functions at
their change points (thinned to a bounded number of points on long traces); ``Throttling`` (percent of the
Tensor engine's rate withheld by dI/dt throttling) has a point at each ramp's start, middle and end.
"""
from __future__ import annotations

import numpy as np

__all__ = ["sample_grid", "rate_average", "level_at", "step_series", "MAX_SAMPLES", "MAX_LEVEL_POINTS", "COUNTERS"]

MAX_SAMPLES = 2000
MAX_LEVEL_POINTS = 20000
#: counter track name -> unit
COUNTERS = {"DMA Throughput": "bytes/s", "Pending DMA Count": "count", "State Buffer Usage": "percent",
            "PSUM Usage": "percent", "Estimated Instant MFU": "percent", "Throttling": "percent"}


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


def step_series(start: np.ndarray, end: np.ndarray, amount: np.ndarray | None = None,
                max_points: int = MAX_LEVEL_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """(ts, value) of the step function "sum of ``amount`` over the intervals [start, end) containing t":
    one point per change (ending at 0); above ``max_points`` the largest value per bin of a regular grid."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if not len(start):
        return np.zeros(0, np.int64), np.zeros(0)
    amt = np.ones(len(start)) if amount is None else np.asarray(amount, dtype=np.float64)
    times = np.concatenate([start, end])
    delta = np.concatenate([amt, -amt])
    order = np.argsort(times, kind="stable")
    times, level = times[order], np.cumsum(delta[order])
    last = np.append(times[1:] != times[:-1], True)  # the level after all changes at one time
    ts, val = times[last], np.maximum(level[last], 0.0)
    if len(ts) > max_points:
        edges = sample_grid(int(ts[0]), int(ts[-1]), max_points - 1)
        b = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, len(edges) - 1)
        peak = np.zeros(len(edges))
        np.maximum.at(peak, b, val)
        ts, val = edges, peak
        val[-1] = 0.0
    return ts, val
