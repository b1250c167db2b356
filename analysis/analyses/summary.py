"""``summary``: the headline metrics of a trace (Neuron Explorer's Summary page, plus GPU equivalents).

Metric formulas live in :mod:`analysis.metrics`; the time base (``total_time``) is the analysed span
(:func:`analysis_span`: the window of a restricted trace, else first to last device activity, else the
trace's time range when there is no device work). Device activity is instructions, DMA transfers and, on
Neuron, collectives (:mod:`analysis.analyses.activity`), so ``idle_percent`` here equals the idle share of
:func:`analysis.temporal_breakdown` of the same trace. Every row has a human ``label`` and a ``unit``; a value
that cannot be known is NaN and its description says why (never 0 for "unknown").
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.categorical import cat_values, cat_where
from ..core.commkernels import is_collective_op
from ..core.devices import DevicePeaks, device_peaks
from ..core.devicetime import RATE_TOLERANCE
from ..core.intervals import union_by_key, union_ns
from ..core.tables import NON_COMPUTE_ENGINES
from ..registry import REGISTRY, Column, register
from .activity import analysis_span, merged_activity, trace_activity
from .breakdown import comm_comp_overlap
from .collectives import collective_time_ns
from .idle import idle_time_breakdown
from .measured import measured_flops
from .steps import STEP_BOUNDARY, steps
from .work import instruction_work, work_source

__all__ = ["summary", "summary_dict", "balance_metrics", "BALANCE_METRICS", "analysis_span", "primary_device",
           "union_ns", "SUMMARY_COLUMNS", "METRIC_LABELS"]

SUMMARY_SPEC = (Column("metric", "", "Metric", "Identifier of the metric (stable, for code)"),
                Column("value", "", "Value", "In the row's unit; NaN = not available (the description says why)"),
                Column("unit", "", "Unit", "ns, bytes, FLOP, FLOP/s, bytes/s, FLOP/byte, percent or count"),
                Column("description", "", "Definition", "How the value is computed, or why it is unknown"),
                Column("label", "", "Label", "Human name of the metric, for views"))
SUMMARY_COLUMNS = [c.name for c in SUMMARY_SPEC]

#: human labels of the fixed metrics (engine rows are "<engine> busy")
METRIC_LABELS = {
    "total_time": "Analysed time", "step_count": "Steps", "step_time_mean_ns": "Step time (mean)",
    "step_time_max_ns": "Step time (max)", "optimizer_step_time_mean_ns": "Time per optimizer step",
    "device_active_percent": "Device busy",
    "mfu_estimated_percent": "MFU (estimated)", "hfu_estimated_percent": "HFU (estimated)",
    "mbu_estimated_percent": "MBU (estimated)", "model_flops": "Model FLOPs", "hardware_flops": "Hardware FLOPs",
    "transpose_flops": "Transpose FLOPs", "peak_flops_per_s": "Matrix peak (BF16, active cores)",
    "active_cores": "Active cores", "hbm_bandwidth_bytes_per_s": "HBM bandwidth (active cores)",
    "memory_roof_bytes_per_s": "Memory roof per core (roofline)", "hbm_read_bytes": "HBM read",
    "hbm_write_bytes": "HBM written", "hbm_total_bytes": "HBM traffic",
    "mm_arithmetic_intensity": "Arithmetic intensity (matrix work)",
    "peak_flops_bandwidth_ratio": "Peak FLOP/s per HBM byte/s", "dma_transfer_count": "DMA transfers",
    "dma_transfer_total_bytes": "DMA bytes", "dma_transfer_average_bytes": "DMA transfer size (mean)",
    "small_dma_transfer_percent": "Small DMA transfers", "dma_active_time_percent": "DMA busy",
    "cc_op_count": "Collectives", "cc_op_active_time_percent": "Collectives busy",
    "comm_comp_overlap_percent": "Communication overlapped", "idle_percent": "Device idle",
    "idle_host_wait_percent": "Stream idle: host wait", "idle_kernel_wait_percent": "Stream idle: kernel wait",
    "idle_other_percent": "Stream idle: other",
}


def primary_device(trace, work: pd.DataFrame | None = None) -> tuple[int | None, DevicePeaks | None, int]:
    """(device position, :class:`DevicePeaks` or None, active core count) for utilisation denominators.

    The device is the one with the most instructions; active cores = distinct (device, nc_idx) with any
    instruction (one per GPU). Positions are positions in ``header.devices`` (:mod:`analysis.core.devices`)."""
    w = instruction_work(trace) if work is None else work
    if not len(w):
        return None, device_peaks(trace, None), 0
    dev, nc = w["device"].to_numpy(), w["nc_idx"].to_numpy()
    d = _most_common(dev)  # device positions are small ints, -1 unknown
    on_d = dev == d
    lo, hi = (int(nc.min()), int(nc.max())) if len(nc) else (0, 0)
    if hi - lo < 256:  # a few cores: one pass each, no gathered copy
        cores = sum(1 for c in range(lo, hi + 1) if np.logical_and(nc == c, on_d).any())
    else:
        cores = int(np.count_nonzero(np.bincount(nc[on_d] + 1)))
    return (d if d >= 0 else None), device_peaks(trace, d), max(1, int(cores))


def _most_common(dev: np.ndarray) -> int:
    """The most frequent value of small ints >= -1 (the smallest of equals), without an offset copy."""
    lo, hi = int(dev.min()), int(dev.max())
    if hi - lo >= 256:
        return int(np.argmax(np.bincount(dev + 1))) - 1
    counts = [np.count_nonzero(dev == v) for v in range(lo, hi + 1)]
    return lo + int(np.argmax(counts))


class _Rows:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, metric: str, value, unit: str, description: str, label: str | None = None) -> None:
        v = float(value) if value is not None else math.nan
        self.rows.append((metric, v, unit, description, label or METRIC_LABELS.get(metric, metric)))


@register("summary", columns=SUMMARY_SPEC, figure="summary_figure")
def summary(trace) -> pd.DataFrame:
    """Headline metrics. Columns: metric (str), value (float, NaN = not available), unit, description, label.

    Metrics (units): total_time (ns), step_count, step_time_mean_ns, step_time_max_ns (ns; the device's step:
    :data:`analysis.analyses.steps.STEP_BOUNDARY`), optimizer_step_time_mean_ns (only when the steps hold more
    or fewer than one optimizer step each, e.g. micro-steps of gradient accumulation),
    device_active_percent, ``<engine>_active_percent`` for each engine (Tensor, Vector, ..., Kernel, Memcpy on
    GPUs), mfu_estimated_percent, hfu_estimated_percent, mbu_estimated_percent (percent; Neuron Explorer
    definitions, per-core peaks from the header × active cores), model_flops, hardware_flops, transpose_flops
    (FLOP), mm_arithmetic_intensity and peak_flops_bandwidth_ratio (FLOP/byte), peak_flops_per_s (FLOP/s),
    hbm_bandwidth_bytes_per_s, memory_roof_bytes_per_s (bytes/s), active_cores, hbm_read_bytes,
    hbm_write_bytes, hbm_total_bytes (bytes), dma_transfer_count, dma_transfer_total_bytes,
    dma_transfer_average_bytes (bytes), small_dma_transfer_percent (share of transfers < 32768 B),
    dma_active_time_percent, cc_op_count, cc_op_active_time_percent (collectives share), comm_comp_overlap_percent,
    idle_percent, idle_host_wait_percent, idle_kernel_wait_percent, idle_other_percent. When a value is
    unknown (no peak for the device, no recorded shapes) it is NaN and the description says why.
    """
    R = _Rows()
    lo, hi, total, dev_active = _headline_rows(trace, R)
    w = instruction_work(trace)
    act = trace_activity(trace)
    _engine_rows(trace, act, total, R)
    dev, peaks, cores = primary_device(trace, w)
    src = work_source(trace)
    model_flops = _compute_rows(_flop_totals(w, src), peaks, cores, total, R)
    _memory_rows(trace, w, src, peaks, cores, total, model_flops, R)
    _dma_rows(trace, lo, hi, total, R)
    cc = trace.table("collectives", ["start_ts", "duration_ns"])
    R.add("cc_op_count", len(cc), "count", "Collective operations on this rank")
    cc_ns = collective_time_ns(trace)
    R.add("cc_op_active_time_percent", M._div(100.0 * cc_ns, total) if len(cc) or cc_ns else 0.0,
          "percent", "Collectives share: union of the rank's collective ops (collective kernels in a Kineto "
          "import) over total_time" + ("" if len(cc) or cc_ns else " (no collectives in the trace)"))
    _overlap_and_idle(trace, R, dev_active, total)
    _measured_rows(trace, R)
    return pd.DataFrame(R.rows, columns=["metric", "value", "unit", "description", "label"])


def _measured_rows(trace, R: _Rows) -> None:
    """FLOPs measured by hardware counters (CUPTI range profiler), when the trace has them."""
    m = measured_flops(trace)
    if len(m):
        R.add("measured_flops", float(m["flops"].sum()), "FLOP",
              f"Measured by CUPTI counters over {len(m)} profiled kernels: 2·FMA + ADD + MUL CUDA-core FP "
              "instructions (tensor-core work not counted: a lower bound)", "FLOPs (measured)")


#: the summary metrics a row of :func:`analysis.rank_balance` shows (:func:`balance_metrics`)
BALANCE_METRICS = ("total_time", "step_count", "step_time_mean_ns", "step_time_max_ns", "device_active_percent",
                   "mfu_estimated_percent")


def balance_metrics(trace, *, lean: bool = False) -> dict[str, float]:
    """``{metric: value}`` of :data:`BALANCE_METRICS`, equal to those of :func:`summary_dict` (the same row
    builders) without computing the other metrics (the idle categories, engines, memory and DMA rows): the
    per-rank reduction of the cross-rank analyses. ``lean``: the instruction work is not memoised (freed once
    reduced to its FLOP totals, before the device activity is built), for a trace reduced once and released."""
    w = REGISTRY["instruction_work"].func(trace) if lean else instruction_work(trace)
    _, peaks, cores = primary_device(trace, w)
    flops = _flop_totals(w, work_source(trace))
    del w
    R = _Rows()
    total = _headline_rows(trace, R)[2]
    _compute_rows(flops, peaks, cores, total, R)
    return {m: v for m, v, *_ in R.rows if m in BALANCE_METRICS}


def _headline_rows(trace, R: _Rows) -> tuple[int, int, int, int]:
    """The first rows of the summary (span, steps, device busy); returns (lo, hi, total, device active ns)."""
    lo, hi = analysis_span(trace)
    total = hi - lo
    R.add("total_time", total, "ns", "Analysed span: the window, else first to last device activity"
          + ("" if len(trace_activity(trace)) or trace.window_bounds is not None else
             " (no device activity: the trace's time range)"))
    _step_rows(trace, R)
    ms, me = merged_activity(trace)
    dev_active = int((me - ms).sum())
    R.add("device_active_percent", M._div(100.0 * dev_active, total), "percent",
          "Union of all device activity (instructions, DMA, collectives) over total_time"
          + ("" if dev_active else " (no device activity recorded)"))
    return lo, hi, total, dev_active


def _step_rows(trace, R: _Rows) -> None:
    st = steps(trace)
    R.add("step_count", len(st), "count",
          "ProfilerStep#N / step markers, else intervals between optimizer.step() calls")
    if len(st):
        R.add("step_time_mean_ns", st["duration_ns"].mean(), "ns", f"Mean step duration; {STEP_BOUNDARY}")
        R.add("step_time_max_ns", st["duration_ns"].max(), "ns", f"Longest step; {STEP_BOUNDARY}")
        n_opt = int(st["optimizer_steps"].sum())
        if n_opt and n_opt != len(st):  # gradient accumulation: several steps (micro-steps) per optimizer step
            R.add("optimizer_step_time_mean_ns", st["duration_ns"].sum() / n_opt, "ns",
                  f"Time per optimizer step: Σ step time / {n_opt} Optimizer.step# range(s) in {len(st)} steps")
    else:
        why = "No ProfilerStep#N, step markers or repeated optimizer.step() in the trace"
        R.add("step_time_mean_ns", math.nan, "ns", why)
        R.add("step_time_max_ns", math.nan, "ns", why)


def _engine_rows(trace, act: pd.DataFrame, total: int, R: _Rows) -> None:
    is_ins = act["table"].to_numpy() == 0
    if not is_ins.any():
        return
    eng = trace.analysis_table("instructions")["engine"]
    n_eng = len(eng.cat.categories)
    # engine code per activity row, the other tables' rows under one extra key (its union is not reported):
    # the start / end columns are used as they are, no gathered copies
    codes = np.take(eng.cat.codes.to_numpy(), act["row"].to_numpy(), mode="clip")
    codes = codes.astype(np.int8 if n_eng < 127 else np.int16 if n_eng < (1 << 15) - 1 else np.int64, copy=False)
    codes[~is_ins] = n_eng
    busy = union_by_key(codes, act["start_ts"].to_numpy(), act["end_ts"].to_numpy(), sorted_by_start=True)
    for code, name in enumerate(eng.cat.categories):
        if code in busy.index:
            R.add(f"{name}_active_percent", M._div(100.0 * busy[code], total), "percent",
                  f"Time the {name} engine/stream is busy, over total_time", f"{name} busy")


def _unknown_work(w: pd.DataFrame, col: str) -> tuple[float, float]:
    """(device ns of compute rows whose ``col`` is unknown, device ns of all compute rows); communication
    kernels, copies and syncs do no matrix work. Sums of the int64 durations, without gathered copies (exact,
    as the float sums were below 2**53 ns)."""
    compute = ~cat_values(w["engine"], NON_COMPUTE_ENGINES)
    compute &= ~cat_where(w["op"], _is_communication)
    d = w["duration_ns"].to_numpy()
    busy = float(np.add.reduce(d, where=compute))
    known = w[col].to_numpy()
    if known.all():
        return 0.0, busy
    compute &= ~known
    return float(np.add.reduce(d, where=compute)), busy


def _physical_pct(value: float, why: str) -> tuple[float, str]:
    """A utilisation, or NaN and the reason when it is above 100 % (impossible: its inputs are estimates)."""
    return (math.nan, why) if np.isfinite(value) and value > 100.0 * (1 + RATE_TOLERANCE) else (value, "")


def _is_communication(name: str) -> bool:
    return is_collective_op(name) or "c10d" in name.lower()


def _flop_totals(w: pd.DataFrame, src: str) -> tuple[float, float, float, str]:
    """(model FLOPs, hardware FLOPs, transpose FLOPs, where they come from) of the instruction work ``w``; the
    first two NaN when unknown."""
    mm = w["is_matmul"].to_numpy()
    model_flops, hw_flops, tr_flops = (float(np.add.reduce(w[c].to_numpy(), where=mm))
                                       for c in ("flops", "hardware_flops", "transpose_flops"))
    fsrc = ("raw_flops of Tensor-engine instructions" if src == "instructions"
            else "FLOPs derived from the launching ops' input shapes")
    unknown, busy = _unknown_work(w, "flops_known")
    if not len(w):
        return math.nan, math.nan, 0.0, "NaN: no device activity in the trace"
    if unknown > 0 and model_flops == 0:
        model_flops = hw_flops = math.nan
        fsrc += (f"; NaN: the FLOPs of {100 * unknown / busy:.0f}% of the device time are unknown (no recorded "
                 "input shapes, or kernels without a launching op)")
    elif unknown > 0:
        fsrc += f"; a lower bound: the FLOPs of {100 * unknown / busy:.0f}% of the device time are unknown"
    return model_flops, hw_flops, tr_flops, fsrc


def _compute_rows(flop_totals: tuple[float, float, float, str], peaks: DevicePeaks | None, cores: int, total: int,
                  R: _Rows) -> float:
    """The FLOP rows from :func:`_flop_totals`; returns the model FLOPs (NaN when unknown)."""
    model_flops, hw_flops, tr_flops, fsrc = flop_totals
    peak = (peaks.matrix_peak() if peaks is not None else math.nan) * cores
    why = "" if np.isfinite(peak) else " (NaN: the trace header has no matrix peak for this device)"
    over = "; NaN: above 100 %, so the FLOP count overstates the work (estimated from shapes)"
    mfu, mwhy = _physical_pct(M.mfu_pct(model_flops, total, peak), over)
    hfu, hwhy = _physical_pct(M.hfu_pct(hw_flops, total, peak), over)
    R.add("mfu_estimated_percent", mfu, "percent",
          f"Model FLOPs / (BF16 matrix peak × active cores × total_time); {fsrc}{why}{mwhy}")
    R.add("hfu_estimated_percent", hfu, "percent", f"Hardware FLOPs incl. transposes / (peak × total_time){why}{hwhy}")
    R.add("model_flops", model_flops, "FLOP", f"Matrix FLOPs excluding transposes ({fsrc})")
    R.add("hardware_flops", hw_flops, "FLOP", "Matrix FLOPs including transposes")
    R.add("transpose_flops", tr_flops, "FLOP", "Tensor-engine FLOPs spent on TRANSPOSE instructions")
    R.add("peak_flops_per_s", peak, "FLOP/s", f"BF16 matrix peak per core × {cores} active core(s){why}")
    R.add("active_cores", cores, "count", "NeuronCores (or GPUs) with device work")
    return model_flops


def _memory_rows(trace, w: pd.DataFrame, src: str, peaks: DevicePeaks | None, cores: int, total: int,
                 model_flops: float, R: _Rows) -> None:
    hbm_r, hbm_w, hbm_desc = _hbm_bytes(trace, w, src)
    hbm = hbm_r + hbm_w if np.isfinite(hbm_r) else float(w["hbm_bytes"].sum())
    unknown, busy = _unknown_work(w, "bytes_known")
    if src == "shapes" and unknown > 0:
        if hbm == 0:
            hbm = math.nan
            hbm_desc += f"; NaN: the bytes of {100 * unknown / busy:.0f}% of the device time are unknown"
        else:
            hbm_desc += f"; a lower bound: the bytes of {100 * unknown / busy:.0f}% of the device time are unknown"
    bw = (peaks.hbm_per_core if peaks is not None else math.nan) * cores
    bwhy = "" if np.isfinite(bw) else " (NaN: the trace header has no HBM bandwidth for this device)"
    mbu, uwhy = _physical_pct(M.mbu_pct(hbm, total, bw), "; NaN: above 100 %, so the HBM bytes overstate the "
                              "traffic (estimated from shapes, or served from cache)")
    R.add("mbu_estimated_percent", mbu, "percent",
          f"(HBM read + write bytes) / total_time / (HBM bandwidth per core × active cores); {hbm_desc}{bwhy}{uwhy}")
    R.add("hbm_bandwidth_bytes_per_s", bw, "bytes/s",
          f"MBU denominator: HBM bandwidth per core (one HBM stack per NeuronCore; a GPU's HBM) × {cores}{bwhy}")
    roof = peaks.memory_roof if peaks is not None else math.nan
    R.add("memory_roof_bytes_per_s", roof, "bytes/s",
          "The roofline's memory roof per core: min(HBM bandwidth per core, DMA bandwidth per core)"
          + ("" if np.isfinite(roof) else " (NaN: no bandwidth in the trace header)"))
    R.add("hbm_read_bytes", hbm_r, "bytes", hbm_desc)
    R.add("hbm_write_bytes", hbm_w, "bytes", hbm_desc)
    R.add("hbm_total_bytes", hbm, "bytes", "HBM bytes read + written; " + hbm_desc)
    R.add("mm_arithmetic_intensity", M.arithmetic_intensity(model_flops, hbm), "FLOP/byte",
          "(hardware_flops − transpose_flops) / HBM bytes")
    peak = (peaks.matrix_peak() if peaks is not None else math.nan) * cores
    R.add("peak_flops_bandwidth_ratio", M.ridge_point(peak, bw), "FLOP/byte",
          "Explorer's ridge point: matrix peak / HBM bandwidth (the roofline's ridge uses the memory roof)")


def _hbm_bytes(trace, w: pd.DataFrame, src: str) -> tuple[float, float, str]:
    if src == "instructions" and (w["hbm_bytes"].to_numpy() > 0).any():
        return (float(w["hbm_read_bytes"].sum()), float(w["hbm_write_bytes"].sum()),
                "Σ instruction hbm_read/write_bytes")
    dma = trace.table("dma", ["source", "dest", "transfer_bytes"])
    if len(dma):
        from_hbm = cat_where(dma["source"], lambda s: s.upper() == "HBM")
        to_hbm = cat_where(dma["dest"], lambda s: s.upper() == "HBM")
        b = dma["transfer_bytes"].to_numpy().astype(float)
        if from_hbm.any() or to_hbm.any():
            return float(b[from_hbm].sum()), float(b[to_hbm].sum()), "Σ DMA bytes from / to HBM"
    if src == "shapes" and len(w):
        return math.nan, math.nan, "read/write split unknown: hbm_total_bytes comes from the ops' input shapes"
    return 0.0, 0.0, "no HBM traffic recorded"


def _dma_rows(trace, lo: int, hi: int, total: int, R: _Rows) -> None:
    dma = trace.table("dma", ["start_ts", "duration_ns", "transfer_bytes"])
    n = len(dma)
    sizes = dma["transfer_bytes"].to_numpy() if n else np.zeros(0)
    R.add("dma_transfer_count", n, "count", "DMA transfers")
    R.add("dma_transfer_total_bytes", sizes.sum(), "bytes", "Bytes moved by DMA")
    R.add("dma_transfer_average_bytes", sizes.mean() if n else math.nan, "bytes",
          f"Average DMA size (efficient: >= {M.EFFICIENT_DMA_BYTES} B)" + ("" if n else " (no DMA rows)"))
    R.add("small_dma_transfer_percent", 100.0 * (sizes < M.EFFICIENT_DMA_BYTES).mean() if n else math.nan,
          "percent", f"Share of DMA transfers smaller than {M.EFFICIENT_DMA_BYTES} B" + ("" if n else " (no DMA rows)"))
    ds = dma["start_ts"].to_numpy()
    dact = union_ns(ds, ds + dma["duration_ns"].to_numpy(), lo, hi) if n else 0
    R.add("dma_active_time_percent", M._div(100.0 * dact, total) if n else math.nan, "percent",
          "Union of DMA transfers over total_time" + ("" if n else " (no DMA rows)"))


def _overlap_and_idle(trace, R: _Rows, dev_active: int, total: int) -> None:
    ov, why = math.nan, "analysis.comm_comp_overlap (HTA definition)"
    has_device = len(trace_activity(trace)) > 0
    if has_device:
        ov = float(comm_comp_overlap(trace)["comp_comm_overlap_pctg"].iloc[0])
        if not np.isfinite(ov):
            why += " (NaN: no communication in the trace)"
    else:
        why += " (NaN: the trace has no device work)"
    R.add("comm_comp_overlap_percent", ov, "percent", "Share of communication time overlapped by computation; " + why)
    if has_device:
        R.add("idle_percent", M._div(100.0 * (total - dev_active), total), "percent",
              "Time with no device activity, over total_time (the idle share of analysis.temporal_breakdown)")
    else:
        R.add("idle_percent", math.nan, "percent", "NaN: the trace has no device work (host-only trace)")
    cats = {"host_wait": math.nan, "kernel_wait": math.nan, "other": math.nan}
    why = "HTA idle categories (analysis.idle_time_breakdown): share of the streams' idle time"
    if has_device:
        df = idle_time_breakdown(trace)
        if len(df):
            tot = df.groupby("idle_category")["idle_time_ns"].sum()
            all_idle = tot.sum()
            for k in cats:
                cats[k] = M._div(100.0 * tot.get(k, 0.0), all_idle)
    for k, v in cats.items():
        R.add(f"idle_{k}_percent", v, "percent", why + ("" if has_device else " (NaN: no device work)"))


@register("summary_dict", returns="dict", method="summary_dict")
def summary_dict(trace) -> dict[str, float]:
    """:func:`summary` as ``{metric: value}``."""
    df = summary(trace)
    return dict(zip(df["metric"], df["value"]))
