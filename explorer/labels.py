"""Human labels and units of analysis columns and summary metrics, in one place.

Every summary metric carries its ``label`` and ``unit``, and every analysis documents its columns in
:mod:`analysis.registry` (label, unit): the headers and units come from there. For a column no analysis
documents (SQL results, area-selection aggregates) the explorer falls back to a humanised name and a unit
read from the column's suffix. Pages call only :func:`metric_label`, :func:`column_label` and
:func:`column_unit`.
"""
from __future__ import annotations

import functools
import re

from analysis import registry

#: Display units understood by the grid formatters (assets/dashAgGridFunctions.js) and the cards.
UNITS = ("ns", "ts", "bytes", "bytes/s", "FLOP", "FLOP/s", "percent", "count", "FLOP/byte", "")

_ACRONYMS = {"flop/s": "FLOP/s", "mfu": "MFU", "hfu": "HFU", "mbu": "MBU", "dma": "DMA", "hbm": "HBM",
             "sbuf": "SBUF", "psum": "PSUM", "cc": "CC", "gpu": "GPU", "cpu": "CPU", "id": "ID", "flops": "FLOPs",
             "nc": "NC", "io": "IO",
             "algbw": "algbw", "busbw": "busbw", "tflops": "TFLOP/s", "pid": "PID", "tid": "TID", "mm": "MM"}
_QUALIFIERS = ("mean", "median", "max", "min", "p50", "p90", "p95", "p99", "estimated", "total", "std")
_OVERRIDES = {"total_time": "Total time", "device_active_percent": "Device active",
              "arithmetic_intensity": "Arithmetic intensity", "nc_idx": "NeuronCore", "delta_ns": "Δ device time",
              "start_ts": "Start", "end_ts": "End", "ts": "Time", "duration_ns": "Duration",
              "algorithm_bandwidth": "Algorithm bandwidth", "bus_bandwidth": "Bus bandwidth",
              "algbw": "Algorithm bandwidth", "busbw": "Bus bandwidth"}
_UNIT_SUFFIXES = (("_bytes_per_s", "bytes/s"), ("_flops_per_s", "FLOP/s"), ("_per_s", "bytes/s"),
                  ("_percent", "percent"), ("_pct", "percent"), ("_pctg", "percent"), ("_ns", "ns"),
                  ("_ts", "ts"), ("_bytes", "bytes"), ("_flops", "FLOP"), ("_count", "count"))
_UNIT_NAMES = {"ts": "ts", "start_ts": "ts", "end_ts": "ts", "bytes": "bytes", "transfer_bytes": "bytes",
               "flops": "FLOP", "raw_flops": "FLOP", "calls": "count", "count": "count", "events": "count",
               "instructions": "count", "algorithm_bandwidth": "bytes/s", "bus_bandwidth": "bytes/s",
               "algbw": "bytes/s", "busbw": "bytes/s", "input_size": "bytes", "output_size": "bytes",
               "arithmetic_intensity": "FLOP/byte", "total_time": "ns"}


_KEEP_AS_WORD = {"_flops_per_s": "_FLOP/s", "_count": "_count", "_flops": "_flops"}


def _strip_unit(name: str) -> str:
    for suf, _ in _UNIT_SUFFIXES:
        if name.endswith(suf) and len(name) > len(suf):
            return name[: -len(suf)] + _KEEP_AS_WORD.get(suf, "")
    return name


def humanize(name: str) -> str:
    """``step_time_mean_ns`` -> "Step time (mean)"; ``mfu_estimated_percent`` -> "MFU (estimated)"."""
    name = str(name)
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    side = ""
    m = re.match(r"^(.*?)_(a|b)(_[a-z]+)?$", name)  # diff columns: per_call_a_ns -> "Per call (A)"
    if m and m.group(1):
        name, side = m.group(1) + (m.group(3) or ""), " (A)" if m.group(2) == "a" else " (B)"
    words = [w for w in re.split(r"[_\s]+", _strip_unit(name)) if w]
    quals = [w for w in words if w.lower() in _QUALIFIERS]
    words = [w for w in words if w.lower() not in _QUALIFIERS] or quals[:1]
    if words and quals and words[0] == quals[0]:
        quals = quals[1:]
    text = " ".join(_ACRONYMS.get(w.lower(), w if any(c.isupper() for c in w[1:]) else w.lower()) for w in words)
    text = text[:1].upper() + text[1:]
    return text + (f" ({', '.join(quals)})" if quals else "") + side


def metric_label(metric: str, label: str | None = None) -> str:
    """A summary metric's label: analysis' ``label`` when the frame has one, else :func:`humanize`."""
    if isinstance(label, str) and label.strip():
        return label
    return humanize(metric)


@functools.lru_cache(maxsize=4096)
def _documented(col: str, analysis: str | None):
    """The registry's :class:`analysis.registry.Column` for ``col``: of ``analysis`` first, else of the first
    analysis documenting it; None when no analysis documents it or ``analysis`` is "" (not an analysis' frame)."""
    if analysis == "":  # a frame no analysis made (SQL results): the name alone
        return None
    if analysis and analysis in registry.REGISTRY:
        for c in registry.columns_of(analysis):
            if c.name == col:
                return c
    for name in registry.REGISTRY:
        for c in registry.columns_of(name):
            if c.name == col:
                return c
    return None


def _base(col: str) -> str:
    """A diff column's base name: ``per_call_a_ns`` -> ``per_call_ns``, ``bound_b`` -> ``bound``."""
    col = re.sub(r"_(a|b)$", "", str(col))
    return re.sub(r"_(a|b)(_[a-z]+)$", r"\2", col)


def column_label(col: str, analysis: str | None = None) -> str:
    """A column header: the analysis registry's label (``analysis.registry.column_label``; of ``analysis``
    first), with " (A)" / " (B)" for the sides of a diff; the humanised name when no analysis documents it."""
    c = _documented(str(col), analysis)
    if c is not None and c.label:
        return c.label
    m = re.match(r"^(.*?)_(a|b)(_[a-z]+)?$", str(col))
    if m and m.group(1):
        c = _documented(_base(col), analysis)
        if c is not None and c.label:
            return f"{c.label} ({m.group(2).upper()})"
    return humanize(col)


#: labels of trace-table columns (an event's fields), where the humanised name is not enough; a table column is
#: never labelled with an analysis' label (``duration_ns`` of an event is its duration, not a step time)
TABLE_COLUMN_LABELS = {"duration_ns": "Duration", "framework_op": "Host op row", "name": "Name",
                       "flops": "FLOPs (recorded by the profiler)", "opcode": "Opcode / Kineto category",
                       "dtype": "Data type", "stack": "Python stack", "hbm_write_bytes": "HBM written"}


def table_column_label(col: str) -> str:
    """The label of a trace-table column (an event's field in the timeline's details): its own name, never an
    analysis column's label of the same name."""
    return TABLE_COLUMN_LABELS.get(str(col)) or column_label(col, "")


def column_unit(col: str, analysis: str | None = None) -> str:
    """The display unit of a column (see :data:`UNITS`): "ts" for absolute timestamps (shown from the trace
    start), else the registry's unit (``analysis.registry.column_unit``), else one read from the name's
    suffix; '' for plain values."""
    col = _base(col)
    if col in ("ts", "start_ts", "end_ts") or col.endswith("_ts"):
        return "ts"
    c = _documented(col, analysis)
    if c is not None and c.unit:
        return c.unit
    if col in _UNIT_NAMES:
        return _UNIT_NAMES[col]
    for suf, unit in _UNIT_SUFFIXES:
        if col.endswith(suf):
            return unit
    if col.endswith(("_size", "size_bytes")):
        return "bytes"
    return ""


def stack_labels(stacks: list[str], frames: int = 2) -> list[str]:
    """Short labels of call stacks (frames outermost first, one per line): the innermost ``frames`` frames
    below the prefix all rows share, innermost first, deepened until the labels differ."""
    split = [[f for f in str(s).split("\n") if f.strip()] for s in stacks]
    if not split:
        return []
    common = 0
    for level in zip(*split):
        if len(set(level)) > 1:
            break
        common += 1
    depth = frames
    while True:
        labels = [" ← ".join(reversed(fr[common:][-depth:] or fr[-1:])) or "(no stack)" for fr in split]
        if len(set(labels)) == len(labels) or depth >= max(len(f) for f in split):
            return labels
        depth += 1


def fmt_ns(ns: int) -> str:
    """A time from the trace start in readable units."""
    a = abs(ns)
    if a < 1e3:
        return f"{ns} ns"
    if a < 1e6:
        return f"{ns / 1e3:.3f} µs"
    if a < 1e9:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.4f} s"
