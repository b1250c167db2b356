"""Counter samples of a Kineto trace: ``[memory]`` instant events (``profile_memory=True``) become
"Total Allocated" / "Total Reserved" byte counters per device (CPU memory on the process track), and
``ph:"C"`` events (hardware / MTIA / XPU counters) one counter track per (process, name, arg)."""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from neuron_profiler.importers.kineto_events import ok_ts, us_to_ns

_MEMORY_KEYS = ("Total Allocated", "Total Reserved")
_CPU_DEVICE_TYPE = 0  # c10::DeviceType::CPU


def memory_samples(instants: list[dict[str, Any]], skipped: Counter) -> tuple[np.ndarray, ...]:
    """``[memory]`` events -> column arrays (pid, device id or -1 for host memory, counter name, ts_ns, bytes),
    one sample per event and counter (Total Allocated, Total Reserved)."""
    mem = [e for e in instants if e.get("name") == "[memory]"]
    good = [e for e in mem if ok_ts(e.get("ts")) and isinstance(e.get("args"), dict)]
    skipped["[memory] event without ts or args"] += len(mem) - len(good)
    pids, devs, names, ts, vals = [], [], [], [], []
    if good:
        t_all = us_to_ns([e["ts"] for e in good]).tolist()
        for e, t in zip(good, t_all):
            a = e["args"]
            dtype, did = a.get("Device Type"), a.get("Device Id")
            dev = did if type(did) is int and did >= 0 and type(dtype) is int and dtype != _CPU_DEVICE_TYPE else -1
            for k in _MEMORY_KEYS:
                v = a.get(k)
                if type(v) in (int, float):
                    pids.append(e.get("pid") if type(e.get("pid")) in (int, str) else repr(e.get("pid")))
                    devs.append(dev)
                    names.append(k)
                    ts.append(t)
                    vals.append(float(v))
    obj = np.empty(len(pids), dtype=object)
    obj[:] = pids
    nm = np.empty(len(names), dtype=object)
    nm[:] = names
    return (obj, np.asarray(devs, dtype=np.int64), nm, np.asarray(ts, dtype=np.int64),
            np.asarray(vals, dtype=np.float64))


def counter_samples(counters: list[dict[str, Any]], skipped: Counter) -> list[tuple[Any, str, int, float]]:
    """``ph:"C"`` events -> (pid, track name, ts_ns, value); one track per numeric arg."""
    out: list[tuple[Any, str, int, float]] = []
    for e in counters:
        a, ts = e.get("args"), e.get("ts")
        if not isinstance(a, dict) or not ok_ts(ts):
            skipped["counter event without ts or args"] += 1
            continue
        t = int(us_to_ns([ts])[0])
        name = str(e.get("name", "counter"))
        for k, v in a.items():
            if type(v) in (int, float):
                out.append((e.get("pid"), name if k == name or len(a) == 1 and k in ("value", name) else
                            f"{name}: {k}", t, float(v)))
    return out


def counter_columns(track_ids: list[int], ts: list[int], values: list[float]) -> dict[str, np.ndarray]:
    """Column dict of the counters table, sorted by (track, ts)."""
    tr = np.asarray(track_ids, dtype=np.int64)
    t = np.asarray(ts, dtype=np.int64)
    order = np.lexsort((t, tr))
    return {"track": tr[order], "ts": t[order], "value": np.asarray(values, dtype=np.float64)[order]}
