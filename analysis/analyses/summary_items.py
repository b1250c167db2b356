"""Neuron Explorer's Summary items on our traces: where the time goes, the Tensor-engine FLOPs split, the
maximum achievable MFU, throttling, spill bytes, and DMA bytes by source and by data type.

Definitions follow ``shared/reference/neuron-explorer-data-model.md`` §7.1-7.3; where the trace lacks what an
item needs (no throttling counter, no matrix peak, no DMA rows), the value is NaN and its ``note`` says why,
never a 0 that reads as measured.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from ..core.categorical import cat_where
from ..core.intervals import union_ns
from ..registry import Column, register
from .activity import analysis_span, merged_activity
from .summary import summary_dict

__all__ = ["time_split", "flops_breakdown", "summary_items", "dma_bytes_by", "TIME_PARTS", "DMA_GROUPINGS"]

#: (part, kernel type of :func:`analysis.device_activity`), in the order a part is charged: a nanosecond goes to
#: the first part active then (compute hides the DMA under it, and so on); "idle" is what none covers
TIME_PARTS = (("compute", "COMPUTATION"), ("collectives", "COMMUNICATION"), ("dma", "MEMORY"), ("other", "OTHER"))
DMA_GROUPINGS = ("source", "data_type")

TIME_SPEC = (
    Column("part", "", "Part", "compute, collectives, dma (not hidden under compute or collectives), other "
                               "(other device work, e.g. Sync-engine waits, not under the former), idle"),
    Column("time_ns", "ns", "Time", "Exclusive time of the part over the analysed span"),
    Column("percent", "percent", "Share", "time_ns / analysed span; the parts add up to 100"),
)
FLOPS_SPEC = (
    Column("component", "", "Component", "model, transpose, throttled, unused (Neuron Explorer's TensorE FLOPs split)"),
    Column("flops", "FLOP", "FLOPs", "FLOPs of the component; NaN = unknown (the note says why)"),
    Column("percent", "percent", "Share of capacity", "flops / (matrix peak × active cores × analysed time)"),
    Column("note", "", "Note", "Definition, or why the value is unknown"),
)
ITEMS_SPEC = (
    Column("metric", "", "Metric", "Item name (Neuron Explorer's Summary field where it has one)"),
    Column("value", "", "Value", "Value in the row's unit; NaN = unknown (the note says why)"),
    Column("unit", "", "Unit", "percent, bytes"),
    Column("label", "", "Label", "Human name"),
    Column("note", "", "Note", "Definition, or why the value is unknown"),
)
DMA_SPEC = (
    Column("group", "", "Group", "Source (Static / Software dynamic (GpSimd) / Hardware dynamic (DGE)) or data "
                                 "type (Instruction / IO / Weights / Dynamic / Other)"),
    Column("bytes", "bytes", "Bytes", "Σ transfer_bytes of the group's DMA transfers"),
    Column("transfers", "count", "Transfers", "Number of transfers"),
    Column("percent", "percent", "Share of bytes", "bytes / all DMA bytes"),
)


@register("time_split", columns=TIME_SPEC, figure="time_split_figure")
def time_split(trace) -> pd.DataFrame:
    """Where the device time goes, exclusively: each nanosecond of the analysed span is charged to the first
    of compute, collectives, DMA, other device work active then, else to idle. The parts add up to the span.
    Empty (same columns) when the trace has no time span."""
    lo, hi = analysis_span(trace)
    span = hi - lo
    if span <= 0:
        return pd.DataFrame(columns=[c.name for c in TIME_SPEC])
    # the union of the parts charged so far, from each kernel type's merged intervals (memoised per trace and
    # shared with the breakdowns: far fewer than the activity's rows); clipping commutes with the union
    rows, covered, starts, ends = [], 0, [], []
    for part, kind in TIME_PARTS:
        s, e = merged_activity(trace, kind)
        starts.append(s)
        ends.append(e)
        cum = union_ns(np.concatenate(starts), np.concatenate(ends), lo, hi)
        rows.append((part, cum - covered))
        covered = cum
    rows.append(("idle", span - covered))
    df = pd.DataFrame(rows, columns=["part", "time_ns"])
    df["time_ns"] = df["time_ns"].astype(np.int64)
    df["percent"] = 100.0 * df["time_ns"] / span
    return df


def _throttle_series(trace, key: str = "throttl") -> tuple[np.ndarray, np.ndarray] | None:
    """(ts, value) of the counter(s) whose track name contains ``key`` (lower case), time-ordered; None when
    the trace has none."""
    tr = trace.whole_table("tracks", ["name"])
    cnt = trace.table("counters", ["track", "ts", "value"])
    if not len(tr) or not len(cnt):
        return None
    th = tr.index[cat_where(tr["name"], lambda s: key in s.lower())]
    rows = cnt[cnt["track"].isin(th)]
    if not len(rows):
        return None
    o = np.argsort(rows["ts"].to_numpy(), kind="stable")
    return rows["ts"].to_numpy()[o].astype(np.int64), rows["value"].to_numpy()[o].astype(float)


def _throttle_integrals(trace) -> tuple[float, float, str]:
    """(∫ throttling % dt / 100 in ns, time with throttling > 0 in ns, note) over the analysed span; each value
    held until the next sample, the last until the span's end. NaN when the trace has no Throttling counter."""
    lo, hi = analysis_span(trace)
    ser = _throttle_series(trace)
    if ser is None or hi <= lo:
        return math.nan, math.nan, "unknown: the trace has no Throttling counter"
    ts, v = ser
    nxt = np.append(ts[1:], hi)
    a, b = np.clip(ts, lo, hi), np.clip(nxt, lo, hi)
    dt = np.maximum(b - a, 0).astype(float)
    return float((dt * np.clip(v, 0, 100) / 100).sum()), float((dt * (v > 0)).sum()), \
        "the Throttling counter (percent of TensorE capacity withheld), each sample held until the next"


@register("flops_breakdown", columns=FLOPS_SPEC, figure="flops_breakdown_figure")
def flops_breakdown(trace) -> pd.DataFrame:
    """Neuron Explorer's TensorE FLOPs split of the matrix capacity (peak × active cores × analysed time):
    model (matrix FLOPs without transposes), transpose, throttled (capacity withheld by throttling: peak ×
    ∫ throttling % dt) and unused (the rest). Unknown parts are NaN with the reason; unused is then unknown
    too, except that without a Throttling counter it includes any throttled capacity (the note says so)."""
    s = summary_dict(trace)
    total, peak = s.get("total_time", math.nan), s.get("peak_flops_per_s", math.nan)
    cap = peak * total * 1e-9 if total > 0 else math.nan
    model, tr = s.get("model_flops", math.nan), s.get("transpose_flops", math.nan)
    thr_ns, _, why = _throttle_integrals(trace)
    throttled = peak * thr_ns * 1e-9
    nocap = "unknown: the trace header has no matrix peak for this device" if not np.isfinite(peak) else \
        "unknown: no analysed time"
    notes = {"model": "matrix FLOPs excluding transposes (analysis.summary model_flops)",
             "transpose": "Tensor-engine FLOPs on TRANSPOSE instructions",
             "throttled": f"peak × ∫ throttling % dt: {why}" if np.isfinite(throttled) else why}
    known = [x for x in (model, tr, throttled) if np.isfinite(x)]
    unused = cap - sum(known) if np.isfinite(cap) and np.isfinite(model) and np.isfinite(tr) else math.nan
    notes["unused"] = ("capacity not used by the parts above" + ("" if np.isfinite(throttled) else
                       " (includes any throttled capacity: no Throttling counter)")) if np.isfinite(unused) else \
        (nocap if not np.isfinite(cap) else "unknown: the model FLOPs are unknown")
    if not np.isfinite(model):
        notes["model"] = "unknown: the FLOPs of the device work are unknown (no raw_flops nor input shapes)"
        tr, notes["transpose"] = math.nan, "unknown: the FLOPs of the device work are unknown"
    comps = [("model", model), ("transpose", tr), ("throttled", throttled), ("unused", unused)]
    df = pd.DataFrame({"component": [c for c, _ in comps], "flops": [float(v) for _, v in comps]})
    df["percent"] = 100.0 * df["flops"] / cap if np.isfinite(cap) and cap > 0 else math.nan
    df["note"] = [notes[c] for c, _ in comps]
    return df


def _contains(key: str) -> Callable[[str], bool]:
    """A predicate: the lower-cased text contains ``key``."""
    return lambda s: key in s.lower()


def _spill_bytes(trace) -> tuple[float, float, str]:
    """(spill save bytes, spill reload bytes, note) from DMA transfers on spill queues (track name with
    'SpillSave' / 'SpillReload') or with a spill variable; NaN when the trace has no DMA rows."""
    dma = trace.table("dma", ["track", "transfer_bytes", "variable"])
    if not len(dma):
        return math.nan, math.nan, "unknown: the trace has no DMA rows (spills are SBUF<->HBM DMA transfers)"
    tr = trace.whole_table("tracks", ["name"])
    out = []
    for key in ("spillsave", "spillreload"):
        tracks = tr.index[cat_where(tr["name"], _contains(key))] if len(tr) else []
        m = np.isin(dma["track"].to_numpy(), np.asarray(tracks))
        m |= cat_where(dma["variable"], _contains("spill_" + key[5:]))
        out.append(float(dma["transfer_bytes"].to_numpy()[m].sum()))
    return out[0], out[1], "DMA bytes on spill queues (…SpillSave… / …SpillReload…) or spill variables"


@register("summary_items", columns=ITEMS_SPEC)
def summary_items(trace) -> pd.DataFrame:
    """Neuron Explorer's Summary items beyond :func:`analysis.summary`: maximum achievable MFU
    ((model FLOPs / HBM bytes) / (peak / HBM bandwidth), capped at 100 %), throttling (time-weighted mean of the
    Throttling counter, Explorer's 1 − utilisation limit), time throttled, spill save / reload bytes and the
    spill-reload share of HBM reads (Explorer's spilling insight fires above 25 %), and the SBUF and PSUM usage
    counters' time-weighted mean and maximum."""
    s = summary_dict(trace)
    total = s.get("total_time", math.nan)
    model, hbm = s.get("model_flops", math.nan), s.get("hbm_total_bytes", math.nan)
    ratio = s.get("peak_flops_bandwidth_ratio", math.nan)
    rows = []
    if np.isfinite(model) and hbm > 0 and ratio > 0:
        rows.append(("mfu_max_achievable_estimated_percent", min(100.0, 100 * model / hbm / ratio), "percent",
                     "Max achievable MFU", "(model FLOPs / HBM bytes) / (peak FLOP/s / HBM bytes/s), at most 100 %"))
    else:
        why = ("the model FLOPs are unknown" if not np.isfinite(model) else "no HBM traffic is known"
               if not hbm > 0 else "no matrix peak or HBM bandwidth for this device")
        rows.append(("mfu_max_achievable_estimated_percent", math.nan, "percent", "Max achievable MFU",
                     f"unknown: {why}"))
    thr_ns, on_ns, why = _throttle_integrals(trace)
    ok = np.isfinite(thr_ns) and total > 0
    rows.append(("throttling_percent", 100 * thr_ns / total if ok else math.nan, "percent", "Throttling (mean)",
                 f"time-weighted mean of {why[4:] if ok else why}" if ok else why))
    rows.append(("throttle_active_time_percent", 100 * on_ns / total if ok else math.nan, "percent",
                 "Time throttled", "share of the analysed time with throttling > 0" if ok else why))
    save, reload, why = _spill_bytes(trace)
    rows.append(("spill_save_bytes", save, "bytes", "Spill saved (SBUF -> HBM)", why))
    rows.append(("spill_reload_bytes", reload, "bytes", "Spill reloaded (HBM -> SBUF)", why))
    hr = s.get("hbm_read_bytes", math.nan)
    share = 100 * reload / hr if np.isfinite(reload) and hr > 0 else math.nan
    rows.append(("spill_reload_share_percent", share, "percent", "Spill reloads / HBM reads",
                 "spill_reload_bytes / hbm_read_bytes (Explorer flags > 25 %)" if np.isfinite(share) else
                 "unknown: " + ("no DMA rows" if not np.isfinite(reload) else "no HBM reads known")))
    rows += _usage_rows(trace)
    return pd.DataFrame(rows, columns=[c.name for c in ITEMS_SPEC])


def _usage_rows(trace) -> list[tuple]:
    """Time-weighted mean and the maximum of the SBUF and PSUM usage counters (percent of capacity), each
    sample held until the next; NaN with the reason when the trace has no such counter."""
    lo, hi = analysis_span(trace)
    rows = []
    for key, name, label in (("state buffer", "sbuf", "SBUF"), ("psum", "psum", "PSUM")):
        ser = _throttle_series(trace, key)
        if ser is None or hi <= lo:
            why = f"unknown: the trace has no {label} usage counter"
            rows += [(f"{name}_usage_mean_percent", math.nan, "percent", f"{label} usage (mean)", why),
                     (f"{name}_usage_max_percent", math.nan, "percent", f"{label} usage (max)", why)]
            continue
        ts, v = ser
        dt = np.maximum(np.clip(np.append(ts[1:], hi), lo, hi) - np.clip(ts, lo, hi), 0).astype(float)
        mean = float((dt * v).sum() / dt.sum()) if dt.sum() > 0 else float(v.mean())
        rows += [(f"{name}_usage_mean_percent", mean, "percent", f"{label} usage (mean)",
                  f"time-weighted mean of the {label} usage counter"),
                 (f"{name}_usage_max_percent", float(v.max()), "percent", f"{label} usage (max)",
                  f"largest sample of the {label} usage counter")]
    return rows


_SOURCE = {"software_dynamic": "Software dynamic (GpSimd)", "hardware_dynamic": "Hardware dynamic (DGE)",
           "unknown": "Unknown"}
_DATA_TYPE = {"instruction": "Instruction", "input": "IO", "output": "IO", "software_dynamic": "Dynamic",
              "hardware_dynamic": "Dynamic"}


def _dma_group(qt: str, var: str, source: str, by: str) -> str:
    if by == "source":
        return _SOURCE.get(qt, "Static")
    if "weight" in var.lower() or "weight" in source.lower():
        return "Weights"
    return _DATA_TYPE.get(qt, "Other" if qt != "unknown" else "Unknown")


@register("dma_bytes_by", columns=DMA_SPEC, figure="dma_bytes_figure")
def dma_bytes_by(trace, by: str = "source") -> pd.DataFrame:
    """DMA bytes grouped as Neuron Explorer's DMA utilisation: ``by="source"``: Static (instruction, input,
    output, data queues) / Software dynamic (GpSimd) / Hardware dynamic (DGE) from the queue type;
    ``by="data_type"``: Weights (variable or source names a weight) / Instruction / IO (input, output queues) /
    Dynamic (software or hardware dynamic queues) / Other. Sorted by bytes, descending; empty (same columns)
    when the trace has no DMA rows."""
    if by not in DMA_GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; valid: {', '.join(DMA_GROUPINGS)}")
    dma = trace.table("dma", ["transfer_bytes", "queue_type", "variable", "source"])
    if not len(dma):
        return pd.DataFrame(columns=[c.name for c in DMA_SPEC])
    keys = [k for k in ("queue_type", "variable", "source") if k in dma]
    agg = dma.groupby(keys, observed=True, sort=False, dropna=False)["transfer_bytes"].agg(["sum", "size"])
    agg = agg.reset_index()
    val = {k: agg[k].astype(str).to_numpy() if k in agg else np.full(len(agg), "") for k in
           ("queue_type", "variable", "source")}
    agg["group"] = [_dma_group(q, v, s, by) for q, v, s in zip(val["queue_type"], val["variable"], val["source"])]
    out = agg.groupby("group", sort=False).agg(bytes=("sum", "sum"), transfers=("size", "sum")).reset_index()
    out["bytes"] = out["bytes"].astype(np.int64)
    tot = out["bytes"].sum()
    out["percent"] = 100.0 * out["bytes"] / tot if tot > 0 else math.nan
    return out.sort_values("bytes", ascending=False, kind="stable").reset_index(drop=True)
