"""``summary``: the headline metrics of a trace (Neuron Explorer's Summary page, plus GPU equivalents).

Metric definitions live in :mod:`analysis.metrics`; the time base (``total_time``) is the analysed span:
the window of a restricted trace, else the device span (first instruction start to last instruction end),
else the trace's time range when there is no device work.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import metrics as M
from .breakdown import _is_sorted
from .flops import cat_where, instruction_work, work_source

SUMMARY_COLUMNS = ["metric", "value", "unit", "description"]


def union_ns(start: np.ndarray, end: np.ndarray, lo: int | None = None, hi: int | None = None) -> int:
    """Length (ns) of the union of intervals [start, end), optionally clipped to [lo, hi). Vectorised."""
    start = np.asarray(start, dtype=np.int64)
    end = np.asarray(end, dtype=np.int64)
    if lo is not None:
        start, end = np.maximum(start, lo), np.minimum(end, hi)
    keep = end > start
    start, end = start[keep], end[keep]
    if not len(start):
        return 0
    order = np.argsort(start, kind="stable")
    return _union_sorted(start[order], end[order])


def _union_sorted(start: np.ndarray, end: np.ndarray) -> int:
    if not len(start):
        return 0
    prev = np.maximum.accumulate(end)
    prev = np.concatenate(([np.iinfo(np.int64).min], prev[:-1]))
    return int(np.maximum(0, end - np.maximum(start, prev)).sum())


def analysis_span(trace) -> tuple[int, int]:
    """(start_ns, end_ns) that ``total_time`` covers (see module docstring)."""
    if trace.window_bounds is not None:
        return trace.window_bounds
    ins = trace.analysis_table("instructions")
    if len(ins):
        s = ins["start_ts"].to_numpy()
        return int(s.min()), int((s + ins["duration_ns"].to_numpy()).max())
    return trace.time_range


def primary_device(trace, work: pd.DataFrame | None = None) -> tuple[int | None, object, int]:
    """(device index, pb.HardwareSpec or None, active core count) for utilisation denominators.

    The device is the one with the most device time; active cores = distinct (device, nc_idx) with any
    instruction (one per GPU)."""
    w = instruction_work(trace) if work is None else work
    if not len(w):
        return None, trace.device_spec(), 0
    dev = w["device"].to_numpy()
    d = int(np.argmax(np.bincount(dev + 1))) - 1  # device indices are small ints, -1 unknown
    spec = trace.device_spec(d if d >= 0 else None)
    cores = np.count_nonzero(np.bincount(w["nc_idx"].to_numpy()[dev == d] + 1))
    return (d if d >= 0 else None), spec, max(1, int(cores))


class _Rows:
    def __init__(self):
        self.rows: list[tuple] = []

    def add(self, metric: str, value, unit: str, description: str):
        v = float(value) if value is not None else math.nan
        self.rows.append((metric, v, unit, description))


def summary(trace) -> pd.DataFrame:
    """Headline metrics. Columns: metric (str), value (float, NaN = not available), unit, description.

    Metrics (units): total_time (ns), step_count, step_time_mean_ns, step_time_max_ns (ns),
    device_active_percent, ``<engine>_active_percent`` for each engine (Tensor, Vector, ..., Kernel,
    Memcpy on GPUs), mfu_estimated_percent, hfu_estimated_percent, mbu_estimated_percent (percent;
    Neuron Explorer definitions, per-core peaks from the header × active cores), model_flops,
    hardware_flops, transpose_flops (FLOP), mm_arithmetic_intensity and peak_flops_bandwidth_ratio
    (FLOP/byte), peak_flops_per_s (FLOP/s), hbm_bandwidth_bytes_per_s (bytes/s), active_cores,
    hbm_read_bytes, hbm_write_bytes, hbm_total_bytes (bytes), dma_transfer_count,
    dma_transfer_total_bytes, dma_transfer_average_bytes (bytes), small_dma_transfer_percent (share of
    transfers < 32768 B), dma_active_time_percent, cc_op_count, cc_op_active_time_percent (collectives
    share), comm_comp_overlap_percent, idle_percent, idle_host_wait_percent, idle_kernel_wait_percent,
    idle_other_percent. When a peak is unknown the value is NaN and the description says why.
    """
    if "summary" in trace._cache:
        return trace._cache["summary"]
    R = _Rows()
    lo, hi = analysis_span(trace)
    total = hi - lo
    R.add("total_time", total, "ns", "Analysed span: window, else first to last device instruction")

    st = trace.steps()
    R.add("step_count", len(st), "count", "ProfilerStep#N / step markers overlapping the span")
    if len(st):
        R.add("step_time_mean_ns", st["duration_ns"].mean(), "ns", "Mean step duration")
        R.add("step_time_max_ns", st["duration_ns"].max(), "ns", "Longest step")
    else:
        R.add("step_time_mean_ns", math.nan, "ns", "No ProfilerStep#N or step markers in the trace")
        R.add("step_time_max_ns", math.nan, "ns", "No ProfilerStep#N or step markers in the trace")

    w = instruction_work(trace)
    s = w["start_ts"].to_numpy()
    e = s + w["duration_ns"].to_numpy()
    if trace.window_bounds is not None:  # else [lo, hi) is the instructions' own span: nothing to clip
        s, e = np.maximum(s, lo), np.minimum(e, hi)
    order = None if _is_sorted(s) else np.argsort(s, kind="stable")
    s_o, e_o = (s, e) if order is None else (s[order], e[order])
    dev_active = _union_sorted(s_o, e_o)
    R.add("device_active_percent", M._div(100.0 * dev_active, total), "percent",
          "Union of all device work over total_time")
    if len(w):
        eng = w["engine"].cat.codes.to_numpy()
        eng = eng if order is None else eng[order]
        for code, name in enumerate(w["engine"].cat.categories):
            m = eng == code
            if m.any():
                R.add(f"{name}_active_percent", M._div(100.0 * _union_sorted(s_o[m], e_o[m]), total), "percent",
                      f"Time the {name} engine/stream is busy, over total_time")

    # --- compute utilisation
    dev, spec, cores = primary_device(trace, w)
    mm = w["is_matmul"].to_numpy()
    model_flops = float(w["flops"].to_numpy()[mm].sum())
    hw_flops = float(w["hardware_flops"].to_numpy()[mm].sum())
    tr_flops = float(w["transpose_flops"].to_numpy()[mm].sum())
    per_core_peak = M.lookup_peak(dict(spec.peak_flops_per_s)) if spec is not None else math.nan
    peak = per_core_peak * cores
    why = ("" if np.isfinite(peak) else " (NaN: the trace header has no matrix peak for this device)")
    src = work_source(trace)
    fsrc = ("raw_flops of Tensor-engine instructions" if src == "instructions"
            else "FLOPs derived from the launching ops' input shapes")
    R.add("mfu_estimated_percent", M.mfu_pct(model_flops, total, peak), "percent",
          f"Model FLOPs / (BF16 matrix peak × active cores × total_time); {fsrc}{why}")
    R.add("hfu_estimated_percent", M.hfu_pct(hw_flops, total, peak), "percent",
          f"Hardware FLOPs incl. transposes / (peak × total_time){why}")
    R.add("model_flops", model_flops, "FLOP", f"Matrix FLOPs excluding transposes ({fsrc})")
    R.add("hardware_flops", hw_flops, "FLOP", "Matrix FLOPs including transposes")
    R.add("transpose_flops", tr_flops, "FLOP", "Tensor-engine FLOPs spent on TRANSPOSE instructions")
    R.add("peak_flops_per_s", peak, "FLOP/s", f"BF16 matrix peak per core × {cores} active core(s){why}")
    R.add("active_cores", cores, "count", "NeuronCores (or GPUs) with device work")

    # --- memory
    hbm_r, hbm_w, hbm_desc = _hbm_bytes(trace, w, src)
    hbm = hbm_r + hbm_w if np.isfinite(hbm_r) else float(w["hbm_bytes"].sum())
    bw_core = math.nan
    if spec is not None and spec.hbm_bandwidth_per_core_bytes_per_s:
        bw_core = float(spec.hbm_bandwidth_per_core_bytes_per_s)
    bw = bw_core * cores
    bwhy = "" if np.isfinite(bw) else " (NaN: the trace header has no HBM bandwidth for this device)"
    R.add("mbu_estimated_percent", M.mbu_pct(hbm, total, bw), "percent",
          f"(HBM read + write bytes) / total_time / (one HBM stack per core × active cores){bwhy}")
    R.add("hbm_bandwidth_bytes_per_s", bw, "bytes/s", f"MBU denominator{bwhy}")
    R.add("hbm_read_bytes", hbm_r, "bytes", hbm_desc)
    R.add("hbm_write_bytes", hbm_w, "bytes", hbm_desc)
    R.add("hbm_total_bytes", hbm, "bytes", "HBM bytes read + written")
    R.add("mm_arithmetic_intensity", M.arithmetic_intensity(model_flops, hbm), "FLOP/byte",
          "(hardware_flops − transpose_flops) / HBM bytes")
    R.add("peak_flops_bandwidth_ratio", M.ridge_point(peak, bw), "FLOP/byte",
          "Ridge point: below it the work is memory bound")

    # --- DMA
    dma = trace.dma
    n_dma = len(dma)
    sizes = dma["transfer_bytes"].to_numpy() if n_dma else np.zeros(0)
    R.add("dma_transfer_count", n_dma, "count", "DMA transfers")
    R.add("dma_transfer_total_bytes", sizes.sum(), "bytes", "Bytes moved by DMA")
    R.add("dma_transfer_average_bytes", sizes.mean() if n_dma else math.nan, "bytes",
          f"Average DMA size (efficient: >= {M.EFFICIENT_DMA_BYTES} B)" + ("" if n_dma else " (no DMA rows)"))
    R.add("small_dma_transfer_percent", 100.0 * (sizes < M.EFFICIENT_DMA_BYTES).mean() if n_dma else math.nan,
          "percent", f"Share of DMA transfers smaller than {M.EFFICIENT_DMA_BYTES} B")
    if n_dma:
        ds = dma["start_ts"].to_numpy()
        dact = union_ns(ds, ds + dma["duration_ns"].to_numpy(), lo, hi)
    else:
        dact = 0
    R.add("dma_active_time_percent", M._div(100.0 * dact, total) if n_dma else math.nan, "percent",
          "Union of DMA transfers over total_time")

    # --- collectives
    cc = trace.collectives
    R.add("cc_op_count", len(cc), "count", "Collective operations on this rank")
    if len(cc):
        cs = cc["start_ts"].to_numpy()
        cact = union_ns(cs, cs + cc["duration_ns"].to_numpy(), lo, hi)
        R.add("cc_op_active_time_percent", M._div(100.0 * cact, total), "percent",
              "Collectives share: union of collective ops over total_time")
    else:
        R.add("cc_op_active_time_percent", 0.0, "percent", "No collectives in the trace")

    _overlap_and_idle(trace, R, dev_active, total)
    out = pd.DataFrame(R.rows, columns=SUMMARY_COLUMNS)
    trace._cache["summary"] = out
    return out


def _hbm_bytes(trace, w: pd.DataFrame, src: str) -> tuple[float, float, str]:
    if src == "instructions" and (w["hbm_bytes"].to_numpy() > 0).any():
        return (float(w["hbm_read_bytes"].sum()), float(w["hbm_write_bytes"].sum()),
                "Σ instruction hbm_read/write_bytes")
    dma = trace.dma
    if len(dma) and "source" in dma.columns:
        from_hbm = cat_where(dma["source"], lambda s: s.upper() == "HBM")
        to_hbm = cat_where(dma["dest"], lambda s: s.upper() == "HBM")
        b = dma["transfer_bytes"].to_numpy().astype(float)
        if from_hbm.any() or to_hbm.any():
            return float(b[from_hbm].sum()), float(b[to_hbm].sum()), "Σ DMA bytes from / to HBM"
    if src == "shapes" and len(w):
        return math.nan, math.nan, "Read/write split unknown: hbm_total_bytes comes from op input shapes"
    return 0.0, 0.0, "No HBM traffic recorded"


def _overlap_and_idle(trace, R: _Rows, dev_active: int, total: int) -> None:
    ov, why = math.nan, "analysis.breakdown.comm_comp_overlap (HTA definition)"
    has_device = len(trace.analysis_table("instructions")) > 0
    if has_device:
        ov = float(trace.comm_comp_overlap()["comp_comm_overlap_pctg"].iloc[0])
        if not np.isfinite(ov):
            why += " (NaN: no communication in the trace)"
    else:
        why += " (NaN: the trace has no device work)"
    R.add("comm_comp_overlap_percent", ov, "percent", "Share of communication time overlapped by computation; " + why)
    if has_device:
        R.add("idle_percent", M._div(100.0 * (total - dev_active), total), "percent",
              "Time with no device work, over total_time")
    else:
        R.add("idle_percent", math.nan, "percent", "NaN: the trace has no device work (host-only trace)")
    cats = {"host_wait": math.nan, "kernel_wait": math.nan, "other": math.nan}
    why = "HTA idle categories from analysis.breakdown.idle_time_breakdown, share of idle time"
    if has_device:
        df = trace.idle_time_breakdown()
        if len(df):
            tot = df.groupby("idle_category")["idle_time_ns"].sum()
            all_idle = tot.sum()
            for k in cats:
                cats[k] = M._div(100.0 * tot.get(k, 0.0), all_idle)
    for k, v in cats.items():
        R.add(f"idle_{k}_percent", v, "percent", why)


def summary_dict(trace) -> dict[str, float]:
    """:func:`summary` as ``{metric: value}``."""
    df = summary(trace)
    return dict(zip(df["metric"], df["value"]))
