"""Counter samples of a Kineto trace: ``[memory]`` instant events (``profile_memory=True``) become
"Total Allocated" / "Total Reserved" byte counters per device (CPU memory on the process track), and
``ph:"C"`` events (hardware / MTIA / XPU counters) one counter track per (process, name, arg)."""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import compress, repeat
from operator import attrgetter, eq, itemgetter
from typing import Any

import numpy as np

from neuron_profiler.importers.kineto.decode import Event
from neuron_profiler.importers.kineto.events import as_array, ok_ts, ts_to_ns, usable_ts_array

_MEMORY_KEYS = ("Total Allocated", "Total Reserved")
MAX_DEVICE_ID = 2**31  # device ids at or above are not ids (the trace format stores them as uint32)


def as_float(v: Any) -> float | None:
    """A sample value as a finite float; None for non-numbers, NaN/inf and integers beyond float range."""
    if type(v) is float:
        return v if v == v and v not in (float("inf"), float("-inf")) else None
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            return None
    return None
_CPU_DEVICE_TYPE = 0  # c10::DeviceType::CPU


def memory_samples(instants: list[Event], skipped: Counter, ns: bool = False) -> tuple[np.ndarray, ...]:
    """``[memory]`` events -> column arrays (pid, device id or -1 for host memory, counter name, ts_ns, bytes),
    one sample per event and counter (Total Allocated, Total Reserved), in event order."""
    mem = list(compress(instants, map(eq, map(_GET_NAME, instants), repeat("[memory]"))))  # instants: events
    fast = _fast_memory(mem, ns)
    if fast is not None:
        return fast
    good = [e for e in mem if ok_ts(e.ts, ns) and isinstance(e.args, dict)]
    skipped["[memory] event without ts or args"] += len(mem) - len(good)
    if not good:
        return _empty_samples()
    args = [e.args for e in good]
    dtype = [a.get("Device Type") for a in args]
    did = [a.get("Device Id") for a in args]
    dev = np.asarray([d if type(d) is int and 0 <= d < MAX_DEVICE_ID and type(t) is int and t != _CPU_DEVICE_TYPE
                      else -1 for d, t in zip(did, dtype)], dtype=np.int64)
    pid = [p if type(p) in (int, str) else repr(p) for p in (e.pid for e in good)]
    t = ts_to_ns([e.ts for e in good], ns)
    n = len(good)
    # interleave the samples per event (Allocated, then Reserved), keeping only numeric values
    vals = np.zeros(2 * n, dtype=np.float64)
    keep = np.zeros(2 * n, dtype=bool)
    for j, k in enumerate(_MEMORY_KEYS):
        v = [as_float(a.get(k)) for a in args]
        ok = [x is not None for x in v]
        keep[j::2] = ok
        vals[j::2] = [x if o else 0.0 for x, o in zip(v, ok)]
    pids = np.empty(2 * n, dtype=object)
    pids[0::2] = pid
    pids[1::2] = pid
    names = np.empty(2 * n, dtype=object)
    names[0::2], names[1::2] = _MEMORY_KEYS
    return (pids[keep], np.repeat(dev, 2)[keep], names[keep], np.repeat(t, 2)[keep], vals[keep])


_GET_NAME, _GET_TS, _GET_ARGS, _GET_PID = map(attrgetter, ("name", "ts", "args", "pid"))
_MEM_ARGS = tuple(map(itemgetter, ("Device Type", "Device Id", *_MEMORY_KEYS)))


def _fast_memory(mem: list[Event], ns: bool = False) -> tuple[np.ndarray, ...] | None:
    """``memory_samples`` of well-formed events (int device fields, numeric byte counts, int/str pid), in
    C-speed passes; None when any event needs the per-event checks."""
    if not mem:
        return None
    try:
        ts, args, pid = (list(map(g, mem)) for g in (_GET_TS, _GET_ARGS, _GET_PID))  # one C-level pass each
        ts_types = set(map(type, ts))
        if not (set(map(type, args)) <= {dict} and ts_types <= {int, float} and set(map(type, pid)) <= {int, str}):
            return None
        dtype, did, alloc, res = (list(map(g, args)) for g in _MEM_ARGS)
    except (KeyError, TypeError):
        return None
    if not (set(map(type, dtype)) <= {int} and set(map(type, did)) <= {int}
            and set(map(type, alloc)) <= {int, float} and set(map(type, res)) <= {int, float}):
        return None
    t_arr = usable_ts_array(ts, ns, ints=ts_types == {int})
    if t_arr is None:
        return None
    n = len(mem)
    vals = np.empty(2 * n, dtype=np.float64)
    try:
        did_a, dtype_a = as_array(did, np.int64), as_array(dtype, np.int64)
        vals[0::2], vals[1::2] = as_array(alloc, np.float64), as_array(res, np.float64)
    except OverflowError:
        return None
    dev = np.where((did_a >= 0) & (did_a < MAX_DEVICE_ID) & (dtype_a != _CPU_DEVICE_TYPE), did_a, -1)
    pids = np.empty(2 * n, dtype=object)
    pids[0::2] = pid
    pids[1::2] = pid
    names = np.empty(2 * n, dtype=object)
    names[0::2], names[1::2] = _MEMORY_KEYS
    return pids, np.repeat(dev, 2), names, np.repeat(ts_to_ns(ts if ns else t_arr, ns), 2), vals


def _empty_samples() -> tuple[np.ndarray, ...]:
    return (np.empty(0, dtype=object), np.zeros(0, np.int64), np.empty(0, dtype=object), np.zeros(0, np.int64),
            np.zeros(0, np.float64))


def concat_samples(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    """The ``memory_samples`` tuples of several event slices, concatenated in order."""
    if not parts:
        return _empty_samples()
    return tuple(np.concatenate(cols) for cols in zip(*parts))


def counter_samples(counters: list[Event], skipped: Counter,
                    ns: bool = False) -> list[tuple[Any, str, int, float]]:
    """``ph:"C"`` events -> (pid, track name, ts_ns, value); one track per numeric arg."""
    out: list[tuple[Any, str, int, float]] = []
    for e in counters:
        a, ts = e.args, e.ts
        if not isinstance(a, dict) or not ok_ts(ts, ns):
            skipped["counter event without ts or args"] += 1
            continue
        t = int(ts_to_ns([ts], ns)[0])
        name = "counter" if e.name is None else str(e.name)
        pid = e.pid if type(e.pid) in (int, str) else repr(e.pid)  # as memory_samples: a list is no key
        for k, v in a.items():
            f = as_float(v)
            if f is not None:
                out.append((pid, name if k == name or len(a) == 1 and k in ("value", name) else
                            f"{name}: {k}", t, f))
    return out


def counter_columns(track_ids: Sequence[int] | np.ndarray, ts: Sequence[int] | np.ndarray,
                    values: Sequence[float] | np.ndarray) -> dict[str, np.ndarray]:
    """Column dict of the counters table, sorted by (track, ts)."""
    tr = np.asarray(track_ids, dtype=np.int64)
    t = np.asarray(ts, dtype=np.int64)
    order = np.lexsort((t, tr))
    return {"track": tr[order], "ts": t[order], "value": np.asarray(values, dtype=np.float64)[order]}
