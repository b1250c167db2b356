"""Trace -> Chrome trace JSON (opens in chrome://tracing and the Perfetto UI).

Host ops go to (pid = process, tid = thread); every device track (engine, DMA queue, CC core, GPU
stream) becomes a thread of its device's process; counters become "C" events; flows become s/f pairs.
Timestamps are microseconds relative to ``baseTimeNanoseconds`` (the trace's first event), as Kineto writes.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import IO, Any, Iterator

import numpy as np
import pandas as pd

from neuron_profiler.trace import TraceFile, read_trace

_EVENT_TABLES = {  # table -> (category, name column, extra arg columns)
    "host_ops": ("category", "name", ["input_shapes", "input_dtypes", "module", "sequence_number",
                                      "correlation_id", "external_id", "flops"]),
    "instructions": (None, "name", ["engine", "opcode", "framework_op", "correlation_id", "external_id",
                                    "raw_flops", "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes",
                                    "sbuf_write_bytes", "dtype"]),
    "dma": (None, "variable", ["transfer_bytes", "source", "dest", "queue_type", "framework_op"]),
    "collectives": (None, "operation", ["algorithm", "process_group", "replica_group", "sequence_number",
                                        "input_size", "output_size", "algorithm_bandwidth", "bus_bandwidth"]),
}
_DEFAULT_CAT = {"instructions": "device_instruction", "dma": "dma", "collectives": "collective"}


def _track_pids(tracks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, dict[int, str]]:
    """(pid per track, tid per track, process names). A track's process is its nearest ancestor of kind
    process/device/instance, else itself."""
    n = len(tracks)
    parent = tracks["parent"].to_numpy()
    kind = tracks["kind"].astype(str).to_numpy()
    names = tracks["name"].astype(str).to_numpy()
    pid = np.zeros(n, dtype=np.int64)
    pnames: dict[int, str] = {}
    for i in range(n):
        j, hops = i, 0
        while j >= 0 and kind[j] not in ("process", "device") and parent[j] >= 0 and hops < 64:
            j, hops = int(parent[j]), hops + 1
        pid[i] = j if j >= 0 else i
        pnames[int(pid[i])] = names[pid[i]]
    return pid, np.arange(n, dtype=np.int64), pnames


def iter_events(tf: TraceFile) -> Iterator[dict[str, Any]]:
    """Chrome trace events of ``tf`` (metadata, slices, counters, flows)."""
    tracks = tf.table("tracks")
    pid, tid, pnames = _track_pids(tracks) if len(tracks) else (np.zeros(0, int), np.zeros(0, int), {})
    tr = tf.time_range
    base = tr[0] if tr else 0
    for p, name in pnames.items():
        yield {"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": name}}
    for i, row in enumerate(tracks.itertuples(index=False)):
        label = str(row.name) if str(row.kind) != "counter" else f"{row.name} ({row.unit})"
        yield {"ph": "M", "name": "thread_name", "pid": int(pid[i]), "tid": int(tid[i]), "args": {"name": label}}
        yield {"ph": "M", "name": "thread_sort_index", "pid": int(pid[i]), "tid": int(tid[i]),
               "args": {"sort_index": int(row.sort_index)}}
    ends: dict[tuple[str, int], tuple[int, int, float]] = {}
    for table, (catcol, namecol, extra) in _EVENT_TABLES.items():
        df = tf.table(table)
        if not len(df):
            continue
        ts_us = (df["start_ts"].to_numpy() - base) / 1e3
        dur_us = df["duration_ns"].to_numpy() / 1e3
        trk = df["track"].to_numpy()
        names = df[namecol].astype(str).to_numpy()
        cats = df[catcol].astype(str).to_numpy() if catcol else None
        extras = {c: df[c].to_numpy() if df[c].dtype.kind in "if" else df[c].astype(str).to_numpy() for c in extra}
        raw_args = _parsed_args(df["args"]) if "args" in df else None
        for k, row_id in enumerate(df.index.to_numpy()):
            t = int(trk[k])
            args = {"row": int(row_id), **{c: _jsonable(v[k]) for c, v in extras.items() if _nonempty(v[k])}}
            if raw_args is not None:
                args.update(raw_args[k])
            ev = {"ph": "X", "cat": cats[k] if cats is not None else _DEFAULT_CAT[table], "name": names[k],
                  "pid": int(pid[t]) if t >= 0 else 0, "tid": int(tid[t]) if t >= 0 else 0,
                  "ts": round(float(ts_us[k]), 3), "dur": round(float(dur_us[k]), 3), "args": args}
            ends[(table, int(row_id))] = (ev["pid"], ev["tid"], ev["ts"])
            yield ev
    counters = tf.table("counters")
    if len(counters):
        names = tracks["name"].astype(str).to_numpy()
        for t, ts, v in zip(counters["track"].to_numpy(), counters["ts"].to_numpy(), counters["value"].to_numpy()):
            yield {"ph": "C", "name": names[t], "pid": int(pid[t]), "tid": int(tid[t]),
                   "ts": round((int(ts) - base) / 1e3, 3), "args": {"value": float(v)}}
    flows = tf.table("flows")
    for fid, f in enumerate(flows.itertuples(index=False)):
        src, dst = ends.get((str(f.src_table), int(f.src_row))), ends.get((str(f.dst_table), int(f.dst_row)))
        if src is None or dst is None:
            continue
        yield {"ph": "s", "id": fid, "cat": str(f.kind), "name": str(f.kind), "pid": src[0], "tid": src[1],
               "ts": src[2]}
        yield {"ph": "f", "bp": "e", "id": fid, "cat": str(f.kind), "name": str(f.kind), "pid": dst[0],
               "tid": dst[1], "ts": dst[2]}


def _parsed_args(col: pd.Series) -> list[dict[str, Any]]:
    """Per row, the event's extra args (the ``args`` JSON object column, e.g. a kernel's grid and block), each
    distinct text parsed once; text that is not a JSON object is kept under "args"."""
    cat = col.astype("category").array
    parsed = []
    for text in cat.categories:
        try:
            obj = json.loads(text) if text else {}
        except ValueError:
            obj = None
        parsed.append(obj if isinstance(obj, dict) else {"args": text})
    parsed.append({})  # code -1 (missing)
    return [parsed[c] for c in cat.codes]


def _nonempty(v: Any) -> bool:
    return not (v == "" or (isinstance(v, (int, np.integer)) and v in (0, -1)))


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def export_chrome(src: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write ``src`` (a trace file) as Chrome trace JSON to ``out`` (gzip when it ends in .gz)."""
    tf = read_trace(src)
    out = Path(out)
    tr = tf.time_range
    h = tf.header
    opener = gzip.open if out.suffix == ".gz" else open
    with opener(out, "wt", encoding="utf-8") as f:  # type: ignore[operator]
        _write(f, tf, {"schemaVersion": 1, "displayTimeUnit": "ns", "baseTimeNanoseconds": tr[0] if tr else 0,
                       "distributedInfo": {"rank": h.rank, "world_size": h.world_size},
                       "neuron_profiler": {"producer": h.producer, "format_version": tf.format_version,
                                           "simulated": h.simulated}})
    tf.close()
    return out


def _write(f: IO[str], tf: TraceFile, top: dict[str, Any]) -> None:
    head = json.dumps(top)[:-1]
    f.write(head + ', "traceEvents": [\n')
    first = True
    for ev in iter_events(tf):
        if not first:
            f.write(",\n")
        f.write(json.dumps(ev, separators=(",", ":")))
        first = False
    f.write("\n]}\n")
