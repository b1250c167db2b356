"""Trace -> Chrome trace JSON (chrome://tracing, the Perfetto UI), which our own importer reads back losslessly.

Display: host ops go to their process and thread; every device track (engine, DMA queue, CC core, GPU stream)
becomes a thread of its device's process (named "... (simulated by <model> for <target>)" when the device
events are simulated; the document's "simulation" key says the same);
counters become "C" events; flows become s/f pairs. Timestamps are microseconds relative to
``baseTimeNanoseconds`` (the trace's first event), as Kineto writes, with 3 decimals (exact to the ns).

Round trip (the contract with the importer): the document's ``"neuronProfiler"`` key holds
``{"version": 1, "header": MessageToDict(header), "tracks": [{column: value, ..., "row": id}], "flows":
[{"src_table", "src_row", "dst_table", "dst_row", "kind"}], "loss": loss report or null}``. Every slice from a
table carries ``args["nprof.table"]``, ``args["nprof.row"]`` (its row id) and ``args["nprof.track"]`` (its track's
row id), and the table's other columns in args under their names; a column holding its default value is left
out (the importer restores the default), the ``args`` column (a JSON object) is merged into args. Counter
samples carry the three ``nprof.*`` keys beside ``args`` instead of inside it, because viewers plot every
numeric arg of a "C" event as a counter series. ``name``, ``cat`` (host_ops.category), ``ts`` and ``dur``
hold the remaining columns. Written with bounded memory, streamed table batch by table batch.
"""
from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import orjson
import pandas as pd
from google.protobuf.json_format import MessageToDict

from neuron_profiler.exporters.common import (
    BATCH_ROWS,
    EVENT_TABLES,
    FlowEnds,
    TrackLayout,
    opened,
    string_array,
    strings,
)
from neuron_profiler.gcpause import gc_paused
from neuron_profiler.trace import TraceFile, simulated_by, simulation_note
from neuron_profiler.trace.columns import columns_of
from neuron_profiler.trace.files import atomic_output

FORMAT_VERSION = 1
#: Rows per batch: each becomes Python dicts (~1.5 KB per event) before it is serialized.
CHROME_BATCH_ROWS = 1 << 16
#: gzip level of .json.gz outputs: 6 (zlib's default) is ~2x faster than gzip's 9 for 5% more bytes.
GZIP_LEVEL = 6
_CATEGORY = {"host_ops": None, "instructions": "device_instruction", "dma": "dma", "collectives": "collective",
             "allocations": "memory_allocation"}
#: Columns carried by the event itself rather than in args.
_OWN = {"start_ts", "duration_ns", "track", "args"}


def export_chrome(src: str | os.PathLike | TraceFile, out: str | os.PathLike) -> Path:
    """Write trace ``src`` (a path or an open ``TraceFile``) as Chrome trace JSON to ``out`` (gzip when it ends
    in .gz); the file appears only when complete."""
    out = Path(out)
    with opened(src) as tf, atomic_output(out, [tf.path]) as tmp, gc_paused():
        with (gzip.open(tmp, "wb", compresslevel=GZIP_LEVEL) if out.suffix == ".gz" else open(tmp, "wb")) as f:
            _write(f, tf)
    return out


class _ByteSink(Protocol):
    """What the writer needs of its output: a binary file or a gzip stream."""

    def write(self, data: bytes, /) -> int: ...


def _write(f: _ByteSink, tf: TraceFile) -> None:
    h = tf.header
    tr = tf.time_range
    base = tr[0] if tr else 0
    head = {"schemaVersion": 1, "displayTimeUnit": "ns", "baseTimeNanoseconds": base,
            "distributedInfo": {"rank": h.rank, "world_size": h.world_size}}
    if h.simulated:  # which model, for which target, under which assumptions (the full list beside it)
        head["simulation"] = f"device events {simulation_note(h)}"
        head["simulationAssumptions"] = dict(sorted(h.simulation.assumptions.items()))
    f.write(orjson.dumps(head)[:-1] + b', "traceEvents": [\n')
    layout = TrackLayout.of(tf)
    flows = FlowEnds(tf)
    w = _EventWriter(f)
    w.extend(_metadata_events(layout, simulated_by(h)))
    for table, namecol in EVENT_TABLES.items():
        for df in tf.iter_table(table, batch_rows=CHROME_BATCH_ROWS):
            start = df["start_ts"].to_numpy()
            flows.see(table, df.index.to_numpy(), df["track"].to_numpy(), start)
            w.extend(_slices(table, namecol, df, layout, base))
    for df in tf.iter_table("counters", batch_rows=CHROME_BATCH_ROWS):
        w.extend(_counters(df, layout, base))
    w.extend(_flow_events(flows, layout, base))
    f.write(b"\n],\n")
    f.write(b'"neuronProfiler": {"version": %d, "header": ' % FORMAT_VERSION)
    f.write(orjson.dumps(MessageToDict(h), option=orjson.OPT_SORT_KEYS))  # protobuf maps iterate in hash order
    f.write(b', "tracks": ')
    f.write(orjson.dumps(_rows_as_objects("tracks", layout.tracks)))
    f.write(b', "flows": [')
    first = True
    for df in tf.iter_table("flows", batch_rows=BATCH_ROWS):
        if len(df):
            f.write((b"" if first else b",") + orjson.dumps(_flow_objects(df))[1:-1])
            first = False
    f.write(b'], "loss": ' + orjson.dumps(tf.loss_report()) + b"}}\n")


class _EventWriter:
    """Writes events separated by ",\\n" inside the traceEvents list."""

    def __init__(self, f: _ByteSink) -> None:
        self.f = f
        self.first = True

    def extend(self, events: list[dict[str, Any]]) -> None:
        if not events:
            return
        if not self.first:
            self.f.write(b",\n")
        self.f.write(orjson.dumps(events)[1:-1])  # one line per batch
        self.first = False


def _pid_tid(layout: TrackLayout, track: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """pid (the track's process track row) and tid (the track row) of each event; 0, 0 without a valid track."""
    ok = layout.valid(track)
    safe = np.where(ok, track, 0)
    pid = np.where(ok, layout.process[safe] if len(layout) else 0, 0)
    return pid, np.where(ok, track, 0)


def _metadata_events(layout: TrackLayout, simulated: str) -> list[dict[str, Any]]:
    """Process / thread names and sort order; ``simulated``: :func:`simulated_by` of the header ("" when
    measured), appended to the device processes' names."""
    events: list[dict[str, Any]] = []
    for p in sorted(set(layout.process.tolist())):
        name = str(layout.names[p])
        if simulated and layout.kinds[p] == "device":
            name += f" ({simulated})"
        events.append({"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": name}})
    units = layout.tracks["unit"].astype(str).to_numpy(dtype=object)
    sort = layout.tracks["sort_index"].to_numpy()
    for i in range(len(layout)):
        label = str(layout.names[i]) if layout.kinds[i] != "counter" else f"{layout.names[i]} ({units[i]})"
        pid = int(layout.process[i])
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": i, "args": {"name": label}})
        events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": i,
                       "args": {"sort_index": int(sort[i])}})
    return events


def _arg_columns(table: str, df: pd.DataFrame, namecol: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """column -> (values: an object array for strings, else numeric; mask of rows not holding the default)."""
    out = {}
    for name, col in columns_of(table).items():
        if name in _OWN or name == namecol or (table == "host_ops" and name == "category"):
            continue
        s = df[name]
        if col.kind == "string":
            vals = string_array(s)
            out[name] = (vals, vals != "")
        else:
            arr = s.to_numpy()
            out[name] = (arr, arr != col.default)
    return out


def _slices(table: str, namecol: str, df: pd.DataFrame, layout: TrackLayout, base: int) -> list[dict[str, Any]]:
    """The "X" events of one batch of ``table``. Rows sharing one pattern of non-default columns are built together
    (their args dicts have the same keys), so the per-event Python work is two dict constructions."""
    n = len(df)
    if not n:
        return []
    track = df["track"].to_numpy()
    pid, tid = _pid_tid(layout, track)
    ts = np.round((df["start_ts"].to_numpy() - base) / 1e3, 3)
    dur = np.round(df["duration_ns"].to_numpy() / 1e3, 3)
    names = string_array(df[namecol])
    cats = string_array(df["category"]) if table == "host_ops" else np.full(n, _CATEGORY[table], dtype=object)
    rows = df.index.to_numpy()
    cols = _arg_columns(table, df, namecol)
    extra = _parsed_args(df["args"]) if "args" in df else None
    keys = list(cols)  # at most 19 columns: a pattern fits an int64
    bits = np.zeros(n, dtype=np.int64)
    for k, name in enumerate(keys):
        bits |= cols[name][1].astype(np.int64) << k
    if extra is not None:
        bits |= np.array([bool(e) for e in extra], dtype=np.int64) << len(keys)
    events: list[dict[str, Any]] = []
    for pattern in np.unique(bits).tolist():
        idx = np.flatnonzero(bits == pattern)
        present = [name for k, name in enumerate(keys) if pattern >> k & 1]
        arg_keys = ("nprof.table", "nprof.row", "nprof.track", *present)
        vals = [[table] * len(idx), rows[idx].tolist(), track[idx].tolist(),
                *(cols[c][0][idx].tolist() for c in present)]
        args = [dict(zip(arg_keys, v)) for v in zip(*vals)]
        if extra is not None and pattern >> len(keys) & 1:  # the pattern's args bit: rows with extra args
            for a, i in zip(args, idx.tolist()):
                a.update(extra[i])
        events += [{"ph": "X", "cat": c, "name": nm, "pid": p, "tid": t, "ts": s, "dur": d, "args": a}
                   for c, nm, p, t, s, d, a in zip(cats[idx].tolist(), names[idx].tolist(), pid[idx].tolist(),
                                                   tid[idx].tolist(), ts[idx].tolist(), dur[idx].tolist(), args)]
    return events


def _counters(df: pd.DataFrame, layout: TrackLayout, base: int) -> list[dict[str, Any]]:
    if not len(df):
        return []
    track = df["track"].to_numpy()
    pid, tid = _pid_tid(layout, track)
    ok = layout.valid(track)
    names = np.where(ok, layout.names[np.where(ok, track, 0)] if len(layout) else "", "").tolist()
    ts = np.round((df["ts"].to_numpy() - base) / 1e3, 3).tolist()
    return [{"ph": "C", "name": nm, "pid": p, "tid": t, "ts": s, "args": {"value": v}, "nprof.table": "counters",
             "nprof.row": r, "nprof.track": k}
            for nm, p, t, s, v, r, k in zip(names, pid.tolist(), tid.tolist(), ts, df["value"].to_numpy().tolist(),
                                            df.index.to_numpy().tolist(), track.tolist())]


def _flow_events(flows: FlowEnds, layout: TrackLayout, base: int) -> list[dict[str, Any]]:
    """s/f pairs of flows whose two events were exported (bound to the enclosing slice at the destination)."""
    if not flows.n:
        return []
    kinds = strings(flows.flows["kind"])
    (src_pid, src_tid), (dst_pid, dst_tid) = _pid_tid(layout, flows.track[0]), _pid_tid(layout, flows.track[1])
    src_ts, dst_ts = (np.round((flows.ts - base) / 1e3, 3)).tolist()
    out = []
    for fid in np.nonzero((flows.track >= 0).all(axis=0))[0].tolist():
        kind = kinds[fid]
        out.append({"ph": "s", "id": fid, "cat": kind, "name": kind, "pid": int(src_pid[fid]),
                    "tid": int(src_tid[fid]), "ts": src_ts[fid]})
        out.append({"ph": "f", "bp": "e", "id": fid, "cat": kind, "name": kind, "pid": int(dst_pid[fid]),
                    "tid": int(dst_tid[fid]), "ts": dst_ts[fid]})
    return out


def _rows_as_objects(table: str, df: pd.DataFrame) -> list[dict[str, Any]]:
    cols = {name: (strings(df[name]) if c.kind == "string" else df[name].to_numpy().tolist())
            for name, c in columns_of(table).items()}
    rows = df.index.to_numpy().tolist()
    return [{**{k: v[i] for k, v in cols.items()}, "row": r} for i, r in enumerate(rows)]


def _flow_objects(df: pd.DataFrame) -> list[dict[str, Any]]:
    st, dt, kind = strings(df["src_table"]), strings(df["dst_table"]), strings(df["kind"])
    return [{"src_table": a, "src_row": b, "dst_table": c, "dst_row": d, "kind": k}
            for a, b, c, d, k in zip(st, df["src_row"].to_numpy().tolist(), dt, df["dst_row"].to_numpy().tolist(),
                                     kind)]


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
