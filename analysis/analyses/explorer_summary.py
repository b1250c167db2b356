"""``neuron_explorer_comparison``: Neuron Explorer's own Summary numbers beside ours.

A profile imported from Neuron Explorer (Parquet or its JSON export) keeps Explorer's Summary row as a JSON
object in ``header.metadata["neuron_explorer.summary"]`` (Explorer's field names and values). This analysis
pairs each of those fields with the :func:`analysis.summary` metric that measures the same thing, so a user
sees where the two tools disagree and why: the definitions differ in the time base (Explorer's
``total_time`` is the on-device wall time from the TPB start/stop notifications; ours is first to last device
activity, or the window) and in the peaks (Explorer: the profile's Metadata, one HBM stack for MBU; ours: the
hardware table, per core × active cores). Formulas: ``shared/reference/neuron-explorer-data-model.md`` §7.2.
"""
from __future__ import annotations

import json
import math
import re

import pandas as pd

from ..registry import Column, register
from .summary import summary
from .summary_items import summary_items

__all__ = ["neuron_explorer_comparison", "COMPARISON_SPEC", "SUMMARY_KEY"]

SUMMARY_KEY = "neuron_explorer.summary"

COMPARISON_SPEC = (
    Column("label", "", "Metric", "Human name of the metric"),
    Column("unit", "", "Unit", "Unit of the row's values (ns, bytes, FLOP, FLOP/byte, percent, count)"),
    Column("ours", "", "Ours", "analysis.summary's value in the row's unit; NaN = unknown (the note says why)"),
    Column("neuron_explorer", "", "Neuron Explorer",
           "Neuron Explorer's Summary value in the row's unit; NaN = not in the profile's Summary"),
    Column("difference", "", "Difference (ours − Explorer)",
           "ours − neuron_explorer in the row's unit (percentage points for percent); NaN when either is unknown"),
    Column("note", "", "Note", "How the two definitions differ, or why one side is unknown"),
    Column("metric", "", "Our metric", "analysis.summary metric name ('' when we have no counterpart)"),
    Column("explorer_field", "", "Neuron Explorer field", "Field of Explorer's Summary table ('' when it has none)"),
)

_TIME = "each side over its own total_time (see Total time)"
_PEAK = ("Explorer: over the TensorE peak from the profile's Metadata (rows × cols × 2 × clock) × its "
         "total_time; ours: over the hardware table's BF16 peak per core × active cores × our total_time")
_ENGINE = "Explorer: the engine's ActiveTime; ours: union of its instructions; " + _TIME

#: (our metric, Explorer field, label, unit, note on the definitions), in display order
PAIRS: tuple[tuple[str, str, str, str, str], ...] = (
    ("total_time", "total_time", "Total time", "ns",
     "Explorer: on-device wall time from the TPB start/stop notifications (excludes host overhead; unit taken "
     "as ns, as neuroncore_cycle_count / clock confirms); ours: first to last device activity (instructions, "
     "DMA, collectives), or the window"),
    ("mfu_estimated_percent", "mfu_estimated_percent", "MFU (estimated)", "percent",
     "Model FLOPs over peak × time. " + _PEAK),
    ("hfu_estimated_percent", "hfu_estimated_percent", "HFU (estimated)", "percent",
     "Hardware FLOPs (incl. transposes) over peak × time. " + _PEAK),
    ("mbu_estimated_percent", "mbu_estimated_percent", "MBU (estimated)", "percent",
     "HBM bytes read + written over time × bandwidth. Explorer's bandwidth is one HBM stack (the same for "
     "LNC1 and LNC2); ours the hardware table's HBM bandwidth per core × active cores; " + _TIME),
    ("model_flops", "model_flops", "Model FLOPs", "FLOP",
     "Explorer: 2 × MAC count of the matmuls; ours: raw_flops of the non-TRANSPOSE matrix instructions"),
    ("hardware_flops", "hardware_flops", "Hardware FLOPs", "FLOP",
     "Explorer: Σ 2 × active rows × active cols × elements over matmuls; ours: raw_flops of the matrix "
     "instructions incl. transposes"),
    ("transpose_flops", "transpose_flops", "Transpose FLOPs", "FLOP", "Same definition: TRANSPOSE instructions"),
    ("mm_arithmetic_intensity", "mm_arithmetic_intensity", "Arithmetic intensity (matrix work)", "FLOP/byte",
     "Same formula, (hardware − transpose FLOPs) / HBM bytes, each on its own side's counts"),
    ("peak_flops_bandwidth_ratio", "peak_flops_bandwidth_ratio", "Peak FLOP/s per HBM byte/s", "FLOP/byte",
     "Explorer: from the profile's peaks; ours: the hardware table's matrix peak / HBM bandwidth (active cores)"),
    ("hbm_read_bytes", "hbm_read_bytes", "HBM read", "bytes",
     "Ours: Σ instruction hbm_read_bytes (else DMA bytes out of HBM); Explorer's count may include DMA traffic"),
    ("hbm_write_bytes", "hbm_write_bytes", "HBM written", "bytes",
     "Ours: Σ instruction hbm_write_bytes (else DMA bytes into HBM); Explorer's count may include DMA traffic"),
    ("device_active_percent", "total_active_time_percent", "Device busy", "percent",
     "Explorer: total_active_time over total_time (its definition is not published in detail); ours: union "
     "of instructions, DMA and collectives; " + _TIME),
    ("Tensor_active_percent", "tensor_engine_active_time_percent", "Tensor busy", "percent", _ENGINE),
    ("Vector_active_percent", "vector_engine_active_time_percent", "Vector busy", "percent", _ENGINE),
    ("Scalar_active_percent", "scalar_engine_active_time_percent", "Scalar busy", "percent", _ENGINE),
    ("GpSimd_active_percent", "gpsimd_engine_active_time_percent", "GpSimd busy", "percent", _ENGINE),
    ("Sync_active_percent", "sync_engine_active_time_percent", "Sync busy", "percent", _ENGINE),
    ("dma_active_time_percent", "dma_active_time_percent", "DMA busy", "percent",
     "Union of DMA transfers over total_time on both sides; " + _TIME),
    ("dma_transfer_count", "dma_transfer_count", "DMA transfers", "count",
     "Ours: rows of the dma table (Explorer's DmaPacketAggregated transfers)"),
    ("dma_transfer_total_bytes", "dma_transfer_total_bytes", "DMA bytes", "bytes", "Bytes moved by DMA"),
    ("dma_transfer_average_bytes", "dma_transfer_average_bytes", "DMA transfer size (mean)", "bytes",
     "Bytes moved by DMA / transfers"),
    ("mfu_max_achievable_estimated_percent", "mfu_max_achievable_estimated_percent", "Max achievable MFU", "percent",
     "(model FLOPs / HBM bytes) / (peak FLOP/s / HBM bytes/s) on both sides, each with its own peaks; ours "
     "capped at 100 % (analysis.summary_items)"),
    ("spill_save_bytes", "spill_save_bytes", "Spill saved (SBUF -> HBM)", "bytes",
     "Explorer: the instructions' spill_save_bytes; ours: DMA bytes on spill-save queues or variables"),
    ("spill_reload_bytes", "spill_reload_bytes", "Spill reloaded (HBM -> SBUF)", "bytes",
     "Explorer: the instructions' spill_reload_bytes; ours: DMA bytes on spill-reload queues or variables"),
    ("cc_op_count", "cc_op_count", "Collectives", "count", "Collective operations (Explorer's CcOp rows)"),
    ("cc_op_active_time_percent", "cc_op_active_time_percent", "Collectives busy", "percent",
     "Union of the collective ops over total_time; " + _TIME),
)

#: the analysis.summary_items metrics Explorer's Summary also has (paired in PAIRS)
ITEM_METRICS = ("mfu_max_achievable_estimated_percent", "spill_save_bytes", "spill_reload_bytes")

_WORDS = {"mfu": "MFU", "hfu": "HFU", "mbu": "MBU", "dma": "DMA", "hbm": "HBM", "sbuf": "SBUF", "psum": "PSUM",
          "cc": "CC", "mm": "MM", "hlo": "HLO", "inst": "instruction", "gpsimd": "GpSimd", "neuroncore": "NeuronCore",
          "flops": "FLOPs", "estimated": "(estimated)", "percent": "(%)", "bytes": "(bytes)", "ns": "(ns)"}
_UNIT_SUFFIX = (("_percent", "percent"), ("_bytes", "bytes"), ("_size", "bytes"), ("_ns", "ns"),
                ("_count", "count"), ("_flops", "FLOP"))


def _explorer_label(field: str) -> str:
    """A field Explorer shows without a counterpart here, in words: ``neuroncore_cycle_count`` ->
    "NeuronCore cycle count"."""
    words = [_WORDS.get(w, w) for w in field.split("_") if w and w not in ("percent", "bytes", "ns")]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def _explorer_unit(field: str) -> tuple[str, str]:
    """(unit, note) of an Explorer field from its suffix (schema 7.4.0: ``_ns``, ``_bytes``, ``_percent``);
    other units are not stated by the schema."""
    for suf, unit in _UNIT_SUFFIX:
        if field.endswith(suf):
            return unit, ""
    if field.endswith("_time") or field == "total_time":
        return "ns", "unit taken as ns, like total_time; "
    if field.endswith(("_cycle_count", "_cycles")):
        return "count", ""
    return "", "unit not stated by the schema; "


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def explorer_summary_of(trace) -> dict[str, float] | None:
    """Explorer's Summary row kept in the trace header (numeric fields only), or None when the trace has none.
    Raises ValueError naming the metadata key when it is not a JSON object."""
    raw = trace.header.metadata.get(SUMMARY_KEY)
    if raw is None:
        return None
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"header.metadata[{SUMMARY_KEY!r}] is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"header.metadata[{SUMMARY_KEY!r}] is a JSON {type(obj).__name__}, expected an object")
    return {str(k): n for k, v in obj.items() if (n := _number(v)) is not None}


def _diff(a: float, b: float) -> float:
    return a - b if math.isfinite(a) and math.isfinite(b) else math.nan


@register("neuron_explorer_comparison", columns=COMPARISON_SPEC)
def neuron_explorer_comparison(trace) -> pd.DataFrame:
    """Neuron Explorer's Summary beside :func:`analysis.summary` (and the :data:`ITEM_METRICS` of
    :func:`analysis.summary_items`), one row per metric. Columns: label, unit,
    ours (float), neuron_explorer (float), difference (ours − neuron_explorer), note, metric (ours),
    explorer_field.

    First the metrics both tools define (:data:`PAIRS`; the note says how the definitions differ), then
    Explorer's other Summary fields (ours NaN: no counterpart), then our other metrics (Explorer's NaN: its
    Summary has no such field). Empty (same columns) when the trace has no Explorer Summary (a trace not
    imported from Neuron Explorer). Values are in the row's unit; each side uses its own time base.
    """
    theirs = explorer_summary_of(trace)
    cols = [c.name for c in COMPARISON_SPEC]
    if theirs is None:
        return pd.DataFrame({c: pd.Series(dtype=float if c in ("ours", "neuron_explorer", "difference") else str)
                             for c in cols})
    items = summary_items(trace).rename(columns={"note": "description"})
    s = pd.concat([summary(trace), items[items["metric"].isin(ITEM_METRICS)]], ignore_index=True)
    ours = dict(zip(s["metric"], s["value"].astype(float)))
    why_ours = dict(zip(s["metric"], s["description"]))
    engines = any(re.fullmatch(r".+_active_percent", m) and m != "device_active_percent" for m in ours)
    rows, used_ours, used_theirs = [], set(), set()
    for m, f, label, unit, note in PAIRS:
        if m not in ours and f not in theirs:
            continue
        o = ours.get(m, math.nan)
        extra = ""
        if m not in ours and m.endswith("_active_percent") and engines:
            o, extra = 0.0, f"; ours 0: no {label.split()[0]} instructions in the analysed span"
        elif not math.isfinite(o):
            extra = f"; ours unknown: {why_ours.get(m, 'not computed for this trace')}"
        t = theirs.get(f, math.nan)
        if f not in theirs:
            extra += "; not in this profile's Summary"
        rows.append((label, unit, o, t, _diff(o, t), note + extra, m, f))
        used_ours.add(m)
        used_theirs.add(f)
    for f, t in theirs.items():
        if f not in used_theirs:
            unit, unote = _explorer_unit(f)
            rows.append((_explorer_label(f), unit, math.nan, t, math.nan,
                         unote + "ours unknown: analysis.summary has no counterpart", "", f))
    for m, lab, unit, v in zip(s["metric"], s["label"], s["unit"], s["value"].astype(float)):
        if m not in used_ours:
            rows.append((lab, unit, v, math.nan, math.nan,
                         "Neuron Explorer's Summary has no such field", m, ""))
    return pd.DataFrame(rows, columns=cols)
