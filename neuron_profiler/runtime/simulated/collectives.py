"""Collective model: host ``record_param_comms`` ops -> rank-local collective executions on a CC core.

Ring model (n = group size, B = message bytes, bw = ring link bandwidth, L = per-step latency):
  all_reduce                 2(n-1)/n * B / bw + 2(n-1) L
  all_gather, reduce_scatter (n-1)/n * B / bw + (n-1) L     (B = the full, gathered buffer)
  all_to_all                 (n-1)/n * B / bw + (n-1) L
  broadcast, send, recv      B / bw + L
  barrier                    2(n-1) L
algorithm_bandwidth = B / time; bus_bandwidth = algbw * factor (NCCL tests: 2(n-1)/n all_reduce,
(n-1)/n all_gather / reduce_scatter / all_to_all, 1 otherwise).
"""
from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.collectives import bus_factor, normalize_collective
from neuron_profiler.hardware import dtype_size_bytes, normalize_dtype

__all__ = ["normalize_collective", "find_collectives", "ring_duration_ns", "bus_factor", "MIN_COLLECTIVE_NS"]

MIN_COLLECTIVE_NS = 50


def ring_duration_ns(operation: np.ndarray, nbytes: np.ndarray, n: np.ndarray, link_bw: float,
                     step_latency_ns: float) -> np.ndarray:
    """Ring-model duration of each collective (int64 ns, at least ``MIN_COLLECTIVE_NS``)."""
    op = np.asarray(operation, dtype=object)
    n = np.maximum(np.asarray(n, dtype=np.float64), 1.0)
    b = np.asarray(nbytes, dtype=np.float64)
    ar = op == "all_reduce"
    ring = np.isin(op, ["all_gather", "reduce_scatter", "all_to_all", "gather", "scatter"])
    barrier = op == "barrier"
    frac = np.ones(len(n))
    steps = np.ones(len(n))
    frac[ar], steps[ar] = 2 * (n[ar] - 1) / n[ar], 2 * (n[ar] - 1)
    frac[ring], steps[ring] = (n[ring] - 1) / n[ring], n[ring] - 1
    frac[barrier], steps[barrier] = 0.0, 2 * (n[barrier] - 1)
    single = n <= 1
    frac[single], steps[single] = 0.0, 0.0
    t = frac * b / link_bw * 1e9 + steps * step_latency_ns
    return np.maximum(np.ceil(t), MIN_COLLECTIVE_NS).astype(np.int64)


def _int(v: Any, default: int = -1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _ranks(v: Any) -> list[int]:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return [int(r) for r in v if isinstance(r, (int, float))] if isinstance(v, list) else []


def find_collectives(host_ops: pd.DataFrame, world_size: int = 1) -> pd.DataFrame:
    """Collective host ops (``args`` holding "Collective name"), one row each.

    Columns: host_row, start_ts (ns), operation, process_group, replica_group ("0,1,..."), group_size,
    sequence_number, input_size, output_size (bytes), num_elements, dtype, message_bytes (the B of the
    ring model)."""
    cols = ["host_row", "start_ts", "operation", "process_group", "replica_group", "group_size",
            "sequence_number", "input_size", "output_size", "num_elements", "dtype", "message_bytes"]
    if "args" not in host_ops.columns or not len(host_ops):
        return pd.DataFrame(columns=cols)
    args = host_ops["args"]
    cats = args.cat.categories if isinstance(args.dtype, pd.CategoricalDtype) else None
    if cats is not None:
        hit = np.asarray(cats.str.contains("Collective name", regex=False), dtype=bool)
        mask = hit[args.cat.codes.to_numpy()] & (args.cat.codes.to_numpy() >= 0)
    else:
        mask = args.astype(str).str.contains("Collective name", regex=False).to_numpy()
    rows = np.flatnonzero(mask)
    recs = []
    starts = host_ops["start_ts"].to_numpy(np.int64)
    for r in rows:
        try:
            a = json.loads(str(args.iat[r]))
        except ValueError:
            continue
        if not isinstance(a, dict):
            continue
        op = normalize_collective(a.get("Collective name", ""))
        if not op:  # "wait" and coalescing markers move no data
            continue
        ranks = _ranks(a.get("Process Group Ranks"))
        n = _int(a.get("Group size"), len(ranks) or world_size)
        dt = normalize_dtype(str(a.get("dtype", ""))) or "float32"
        size = dtype_size_bytes(dt) or 4
        in_n, out_n = max(_int(a.get("In msg nelems"), 0), 0), max(_int(a.get("Out msg nelems"), 0), 0)
        in_b, out_b = in_n * size, out_n * size
        msg = out_b if op == "all_gather" else (in_b or out_b)
        recs.append((host_ops.index[r], starts[r], op, str(a.get("Process Group Name", "")),
                     ",".join(map(str, ranks)), max(n, 1), _int(a.get("Seq")), in_b, out_b, max(in_n, out_n),
                     dt, msg))
    return pd.DataFrame.from_records(recs, columns=cols)
