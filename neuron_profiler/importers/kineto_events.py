"""First pass over Kineto ``traceEvents``: validate, split by phase, and build column arrays.

Times: Kineto writes ``ts``/``dur`` in microseconds with 3 decimals (ns resolution) whatever
``displayTimeUnit`` says (``output_json.cpp`` ``fmtTs``; the Chrome trace format defines ``ts`` in µs);
they become int64 ns here, exactly for integer and 3-decimal values below 2**53 µs.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

_NUM = (int, float)

#: Kineto categories of device-side work -> our instruction ``engine``
DEVICE_CATEGORIES: dict[str, str] = {
    "kernel": "Kernel", "Kernel": "Kernel",
    "gpu_memcpy": "Memcpy", "Memcpy": "Memcpy",
    "gpu_memset": "Memset", "Memset": "Memset",
    "mtia_ccp_events": "Kernel",
    "cuda_sync": "Sync", "xpu_sync": "Sync",
}
#: device-side annotations: imported as host_ops on the stream track (never counted as kernel time)
DEVICE_ANNOTATION_CATEGORIES = frozenset({"gpu_user_annotation"})
#: host-side API calls that launch device work (sources of "launch" flows)
RUNTIME_CATEGORIES = frozenset({
    "cuda_runtime", "cuda_driver", "Runtime", "Driver", "mtia_runtime", "xpu_runtime", "xpu_driver",
    "privateuse1_runtime", "privateuse1_driver", "glow_runtime", "hpu_op",
})
#: framework operators (targets of ``framework_op``)
OPERATOR_CATEGORIES = frozenset({"cpu_op", "Operator", "user_annotation", "python_function"})
#: every ``cat`` this importer knows; other categories are imported as host ops and reported
KNOWN_CATEGORIES = frozenset(DEVICE_CATEGORIES) | DEVICE_ANNOTATION_CATEGORIES | RUNTIME_CATEGORIES | \
    OPERATOR_CATEGORIES | frozenset({
        "Trace", "overhead", "external_correlation", "cuda_event", "mtia_insight", "collective_comm",
        "cuda_profiler_range", "cpu_instant_event", "python_function", "fwdbwd", "ac2g",
        "async_cpu_to_gpu", "async", "mtia_counters", "hardware_counters", "xpu_scope_profiler",
        "mtia_ccp_events",
    })
FLOW_CATEGORIES = frozenset({"ac2g", "async_cpu_to_gpu", "async", "fwdbwd"})


@dataclass
class SplitEvents:
    """Events of one trace grouped by phase; ``skipped`` counts dropped events by reason."""

    x: list[dict[str, Any]] = field(default_factory=list)        # complete events
    flows: list[dict[str, Any]] = field(default_factory=list)    # s / f / t
    meta: list[dict[str, Any]] = field(default_factory=list)     # M
    instants: list[dict[str, Any]] = field(default_factory=list)  # i / I
    counters: list[dict[str, Any]] = field(default_factory=list)  # C
    skipped: Counter = field(default_factory=Counter)


def split_events(events: list[Any]) -> SplitEvents:
    """Group events by ``ph`` and drop those that cannot be read (counted in ``skipped`` by reason)."""
    out = SplitEvents()
    x_append, skipped = out.x.append, out.skipped
    for e in events:
        if type(e) is not dict:
            skipped["event is not a JSON object"] += 1
            continue
        ph = e.get("ph")
        if ph == "X":
            ts, dur = e.get("ts"), e.get("dur")
            if type(ts) not in _NUM:
                skipped["missing or non-numeric ts"] += 1
            elif type(dur) not in _NUM:
                skipped["missing or non-numeric dur"] += 1
            elif dur < 0:
                skipped["negative dur"] += 1
            elif ts < 0:
                skipped["negative ts"] += 1
            else:
                x_append(e)
        elif ph == "s" or ph == "f" or ph == "t":
            out.flows.append(e)
        elif ph == "M":
            out.meta.append(e)
        elif ph == "i" or ph == "I":
            out.instants.append(e)
        elif ph == "C":
            out.counters.append(e)
        else:
            skipped[f"unsupported ph {ph!r}"] += 1
    return out


def us_to_ns(values: list[Any] | np.ndarray) -> np.ndarray:
    """Microsecond numbers (int or float) -> int64 ns, splitting integer and fraction to keep ns exact."""
    arr = np.asarray(values)
    if arr.dtype.kind in "iu":
        return arr.astype(np.int64) * 1000
    arr = arr.astype(np.float64)
    ip = np.floor(arr)
    return ip.astype(np.int64) * 1000 + np.rint((arr - ip) * 1000.0).astype(np.int64)


def int_column(values: list[Any], default: int = -1) -> np.ndarray:
    """Values that should be ints -> int64 array; None, wrong types and non-numeric strings -> ``default``."""
    try:
        arr = np.asarray(values)
        if arr.dtype.kind in "iu":
            return arr.astype(np.int64)
    except (ValueError, OverflowError):
        pass
    out = np.full(len(values), default, dtype=np.int64)
    for i, v in enumerate(values):
        t = type(v)
        if t is int:
            out[i] = v
        elif t is float and v == v and abs(v) < 2**62:
            out[i] = int(v)
        elif t is str:
            try:
                out[i] = int(v)
            except ValueError:
                pass
    return out


def str_column(values: list[Any]) -> np.ndarray:
    """Values that should be strings -> object array of str (None -> "", others str())."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = [v if type(v) is str else ("" if v is None else str(v)) for v in values]
    return arr


def x_frame(xs: list[dict[str, Any]]) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """Complete events -> DataFrame (cat, name, pid, tid, start_ts, duration_ns) and their args dicts.

    ``pid``/``tid`` stay objects (Kineto uses strings such as "Spans"); non-dict args become {}."""
    empty: dict[str, Any] = {}
    args = [a if type(a) is dict else empty for a in (e.get("args") for e in xs)]
    df = pd.DataFrame({
        "cat": str_column([e.get("cat") for e in xs]),
        "name": str_column([e.get("name") for e in xs]),
        "pid": np.asarray([e.get("pid") for e in xs] + [None], dtype=object)[:-1],
        "tid": np.asarray([e.get("tid") for e in xs] + [None], dtype=object)[:-1],
        "start_ts": us_to_ns([e["ts"] for e in xs]) if xs else np.zeros(0, np.int64),
        "duration_ns": us_to_ns([e["dur"] for e in xs]) if xs else np.zeros(0, np.int64),
    })
    return df, args


def arg_values(args: list[dict[str, Any]], idx: np.ndarray, key: str) -> list[Any]:
    """``args[i].get(key)`` for the rows ``idx``."""
    return [args[i].get(key) for i in idx]


def to_int_or(v: Any, default: int) -> int:
    """One value -> int (numeric strings accepted), else ``default``."""
    if type(v) is int:
        return v
    if type(v) is float and v == v:
        return int(v)
    if type(v) is str:
        try:
            return int(v)
        except ValueError:
            return default
    return default


def key_codes(*columns: np.ndarray) -> list[np.ndarray]:
    """Factorize several object columns with one shared code book (so equal values get equal codes)."""
    lens = [len(c) for c in columns]
    allv = np.concatenate([np.asarray(c, dtype=object) for c in columns]) if columns else np.zeros(0, object)
    # repr keeps 1 and "1" apart while making unhashable junk hashable
    keyed = np.asarray([v if type(v) in (int, str) else repr(v) for v in allv] + [None], dtype=object)[:-1]
    codes, _ = pd.factorize(keyed)
    out, pos = [], 0
    for n in lens:
        out.append(codes[pos:pos + n].astype(np.int64))
        pos += n
    return out
