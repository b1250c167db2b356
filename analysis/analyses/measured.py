"""FLOPs measured by hardware counters: Kineto traces taken with CUPTI's range profiler
(``experimental_config=_ExperimentalConfig(profiler_metrics=[...])``) hold one ``cuda_profiler_range`` event per
kernel whose args are counter values, e.g. ``smsp__sass_thread_inst_executed_op_ffma_pred_on.sum``.

FLOPs per range: 2 × FMA + ADD + MUL thread instructions of each precision (half, single, double), the
counters Nsight Compute's FLOP count uses. They count CUDA-core floating-point instructions only: tensor-core
work (HMMA / IMMA) is not in them, so on a GEMM-heavy kernel they are a lower bound; the summary labels them
"measured". The range profiler serialises kernels and the ranges' times are not kernel times: these FLOPs
are totals, never divided by a duration here.
"""
from __future__ import annotations

import json
import re

import pandas as pd

from ..core.categorical import column
from ..registry import Column, register

__all__ = ["measured_flops", "MEASURED_COLUMNS"]

MEASURED_SPEC = (
    Column("kernel", "", "Kernel", "Name of the profiled range (the kernel)"),
    Column("start_ts", "ns", "Start", "Range start (the range profiler serialises kernels: not a kernel time)"),
    Column("flops", "FLOP", "Measured FLOPs", "2·FMA + ADD + MUL thread instructions, all precisions"),
    Column("flops_fp16", "FLOP", "FP16 FLOPs", "Half-precision part"),
    Column("flops_fp32", "FLOP", "FP32 FLOPs", "Single-precision part"),
    Column("flops_fp64", "FLOP", "FP64 FLOPs", "Double-precision part"),
)
MEASURED_COLUMNS = [c.name for c in MEASURED_SPEC]
_COUNTER = re.compile(r"^smsp__sass_thread_inst_executed_op_([hfd])(fma|add|mul)_pred_on\.sum$")
_PREC = {"h": "flops_fp16", "f": "flops_fp32", "d": "flops_fp64"}


def _range_flops(args: str) -> dict[str, float] | None:
    try:
        a = json.loads(args) if args else None
    except ValueError:
        return None
    if not isinstance(a, dict):
        return None
    out = {v: 0.0 for v in _PREC.values()}
    seen = False
    for k, v in a.items():
        m = _COUNTER.match(str(k))
        if m and isinstance(v, (int, float)) and not isinstance(v, bool):
            out[_PREC[m.group(1)]] += float(v) * (2 if m.group(2) == "fma" else 1)
            seen = True
    return out if seen else None


@register("measured_flops", columns=MEASURED_SPEC)
def measured_flops(trace) -> pd.DataFrame:
    """One row per CUPTI profiler range carrying FLOP counters (see the module doc): kernel, start_ts (ns),
    flops, flops_fp16, flops_fp32, flops_fp64 (FLOP). Empty when the trace has none."""
    ho = trace.table("host_ops", ["name", "category", "start_ts", "args"])
    rows = []
    if len(ho):
        m = column(ho, "category").astype(str).to_numpy() == "cuda_profiler_range"
        for name, ts, args in zip(ho["name"].astype(str).to_numpy()[m], ho["start_ts"].to_numpy()[m],
                                  column(ho, "args").astype(str).to_numpy()[m]):
            f = _range_flops(args)
            if f is not None:
                rows.append({"kernel": name, "start_ts": int(ts), "flops": sum(f.values()), **f})
    return pd.DataFrame(rows, columns=MEASURED_COLUMNS)
