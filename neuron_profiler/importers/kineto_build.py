"""Assemble a ``TraceBuilder`` from a parsed Kineto document (see ``kineto.py`` for the public API).

Mapping (documented in docs of ``neuron_profiler.importers.kineto``):
* cpu_op / user_annotation / python_function / runtime and driver calls / unknown categories -> ``host_ops``
  on per-(pid, tid) thread tracks, ``category`` = Kineto ``cat``;
* kernel / gpu_memcpy / gpu_memset / mtia_ccp_events / cuda_sync (and legacy Kernel / Memcpy / Memset) ->
  ``instructions`` on per-(device, stream) tracks, engine Kernel / Memcpy / Memset / Sync, opcode = ``cat``;
* gpu_user_annotation -> ``host_ops`` (category gpu_user_annotation) on the stream track, so that no
  analysis of ``instructions`` counts annotation spans as kernel time.
"""
from __future__ import annotations

import warnings
from collections import Counter
from typing import Any, Callable

import numpy as np
import pandas as pd

from neuron_profiler.importers import kineto_counters as kc
from neuron_profiler.importers.kineto_collectives import collective_rows
from neuron_profiler.importers.kineto_events import (DEVICE_ANNOTATION_CATEGORIES, DEVICE_CATEGORIES,
                                                     KNOWN_CATEGORIES, RUNTIME_CATEGORIES, in_set, int_column,
                                                     key_codes, map_values, split_events, x_frame)
from neuron_profiler.importers.kineto_links import flow_frame, resolve_links
from neuron_profiler.importers.kineto_stacks import operator_stacks
from neuron_profiler.importers.kineto_tracks import TrackTable, add_devices, read_meta
from neuron_profiler.trace import TraceBuilder, make_header
from neuron_profiler.trace.errors import TraceFormatError

try:
    import orjson

    def _dumps(v: Any) -> str:
        return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS).decode()
except ImportError:  # pragma: no cover
    import json

    def _dumps(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), default=str)

PRODUCER = "neuron_profiler.importers.kineto"
_MISSING = -(2**62)
_OP_PRIO = {"cpu_op": 0, "Operator": 0, "user_annotation": 1}
_DEVICE_KIND = {"mtia_ccp_events": "mtia"}


def _safe_dumps(v: Any) -> str:
    try:
        return _dumps(v)
    except (TypeError, ValueError):
        return ""


#: args stored in their own columns, or Kineto-internal per-event ids ("Ev Idx" = position in Kineto's event
#: list, "Record function id"): left out of the ``args`` JSON so that equal args give equal (interned) strings
_HOST_DROP = frozenset({"External id", "correlation", "Sequence number", "Input Dims", "Input type", "flops",
                        "Ev Idx", "Record function id"})
_INSTR_DROP = frozenset({"correlation", "Ev Idx"})


def _args_json(args: list[dict[str, Any]], drop: frozenset[str]) -> np.ndarray:
    """Each event's Kineto args as JSON without the ``drop`` keys ("" when nothing is left)."""
    out = np.empty(len(args), dtype=object)
    out[:] = [("" if not a else _safe_dumps({k: v for k, v in a.items() if k not in drop})
               if not drop.isdisjoint(a) else _safe_dumps(a)) for a in args]
    out[out == "{}"] = ""
    return out


def _json_or_empty(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = ["" if v is None else _safe_dumps(v) for v in values]
    return out


def _header_fields(doc: dict[str, Any]) -> tuple[int, int, dict[str, str]]:
    dist = doc.get("distributedInfo")
    rank, world = 0, 1
    if isinstance(dist, dict):
        rank = dist.get("rank") if type(dist.get("rank")) is int and dist["rank"] >= 0 else 0
        world = dist.get("world_size") if type(dist.get("world_size")) is int else 1
        world = max(world, rank + 1, 1)
    meta = {}
    for k, v in doc.items():
        if k not in ("traceEvents", "deviceProperties"):
            meta[f"kineto.{k}"] = v if isinstance(v, str) else _safe_dumps(v)
    if not isinstance(dist, dict):
        meta["kineto.distributedInfo"] = "absent: imported as rank 0 of world 1"
    return rank, world, meta


def build_trace(doc: dict[str, Any], source: str, *, run_id: str = "",
                stage: Callable[[str], None] | None = None) -> TraceBuilder:
    """Build the in-memory trace of one Kineto document (``{"traceEvents": [...], ...}``); the document's
    ``traceEvents`` list is removed from ``doc`` (its events are freed as soon as they are columns).

    Warns (``UserWarning``) with counts of skipped events and of unknown categories; raises
    ``TraceFormatError`` when the document has events but none of them can be read."""
    stage = stage or (lambda _s: None)
    events = doc.pop("traceEvents")  # taken over: the event dicts are freed once split into columns
    n_events = len(events)
    split = split_events(events)
    del events
    if n_events and not (split.n_x or split.instants or split.counters or split.meta):
        reasons = ", ".join(f"{n} {r}" for r, n in split.skipped.most_common())
        raise TraceFormatError(f"{source}: none of the {n_events} events could be read ({reasons})")
    rank, world, meta = _header_fields(doc)
    base = doc.get("baseTimeNanoseconds")
    base_ns = base if type(base) is int and base > 0 else 0
    meta["time_origin"] = ("kineto ts (us) + baseTimeNanoseconds" if base_ns else "kineto ts (us), no base time")
    hdr = make_header(PRODUCER, source_format="kineto-json", rank=rank, world_size=world, simulated=False,
                      metadata=meta, run_id=run_id, source_path=source,
                      instance_id=str(doc.get("host_name", "")))
    b = TraceBuilder(hdr)
    stage("columns")

    df, args = x_frame(split)
    cat = df["cat"]
    is_trace = cat == "Trace"
    engine = map_values(cat, DEVICE_CATEGORIES.get)
    is_dev = (engine != None) & ~is_trace  # noqa: E711 - elementwise comparison
    is_anno = in_set(cat, DEVICE_ANNOTATION_CATEGORIES)
    is_host = ~(is_dev | is_anno | is_trace)
    skipped = split.skipped
    pid, tid = df["pid"], df["tid"]
    start = df["start_ts"] + base_ns
    dur = df["duration_ns"]

    # device id / stream of device-side rows: args.device / args.stream, else Kineto pid / tid
    dev_rows = np.flatnonzero(is_dev | is_anno)
    d_arg = int_column([args[i].get("device") for i in dev_rows])
    s_arg = int_column([args[i].get("stream") for i in dev_rows], _MISSING)
    pid_int = int_column(list(pid[dev_rows]))
    tid_int = int_column(list(tid[dev_rows]))
    annos = is_anno[dev_rows]
    dev_id = np.where((d_arg >= 0) & ~annos, d_arg, pid_int)
    # an explicit stream -1 (device-wide "Event Sync") stays -1; a missing one falls back to the tid
    stream = np.where((s_arg != _MISSING) & ~annos, s_arg, tid_int)
    bad_dev = dev_id < 0
    if bad_dev.any():
        skipped["device event without a device id"] += int(bad_dev.sum())
        is_dev[dev_rows[bad_dev]] = False
        is_anno[dev_rows[bad_dev]] = False
        dev_rows, dev_id, stream = dev_rows[~bad_dev], dev_id[~bad_dev], stream[~bad_dev]
    mem = kc.memory_samples(split.instants, skipped)
    ctr = kc.counter_samples(split.counters, skipped)
    flows, bad_flows = flow_frame(split.flows)
    flows["ts"] += base_ns
    skipped["unreadable flow event"] += bad_flows
    split.flows, split.instants, split.counters = [], [], []  # free those event dicts early (peak memory)
    used: dict[int, str] = {}
    for r, d in zip(dev_rows.tolist(), dev_id.tolist()):
        if d not in used:
            used[d] = _DEVICE_KIND.get(cat[r], "gpu")
    for d in np.unique(mem[1]).tolist():
        if d >= 0 and d not in used:
            used[d] = "gpu"
    tracks = TrackTable(b, read_meta(split.meta), rank)
    unknown_devices = add_devices(b, tracks, used, doc)
    if unknown_devices:
        b.header.metadata["devices_without_spec"] = "; ".join(unknown_devices) + \
            " (not in the hardware table: imported without peaks, MFU/roofline unavailable)"
    stage("host ops")

    # ---- host ops (incl. device annotations on stream tracks), sorted by start then outermost first
    h_rows = np.flatnonzero(is_host | is_anno)
    h_order = np.lexsort((-dur[h_rows], start[h_rows]))
    h_rows = h_rows[h_order]
    dev_of = dict(zip(dev_rows.tolist(), zip(dev_id.tolist(), stream.tolist())))
    h_track = _host_tracks(tracks, h_rows, is_anno, dev_of, pid, tid)
    h_args = [args[r] for r in h_rows]
    h_cat = cat[h_rows]
    unknown = Counter({c: n for c, n in pd.Series(h_cat).value_counts().items() if c not in KNOWN_CATEGORIES})
    host = pd.DataFrame({
        "pid": pid[h_rows], "tid": tid[h_rows], "start_ts": start[h_rows], "duration_ns": dur[h_rows],
        "correlation_id": int_column([a.get("correlation") for a in h_args]),
        "external_id": int_column([a.get("External id") for a in h_args]),
        "sequence_number": int_column([a.get("Sequence number") for a in h_args]),
    })
    flops = int_column([a.get("flops") for a in h_args], 0)
    flops[flops < 0] = 0
    names = df["name"]
    h_names = names[h_rows]
    op_prio = map_values(h_cat, lambda c: _OP_PRIO.get(c, 9)).astype(np.int64)
    thread_key = np.asarray(h_track, dtype=np.int64)
    stacks = operator_stacks(h_cat == "python_function", in_set(h_cat, ["cpu_op", "Operator"]), thread_key,
                             host["start_ts"].to_numpy(), (host["start_ts"] + host["duration_ns"]).to_numpy(),
                             h_names, h_args)
    host_cols = {
        "track": h_track, "name": h_names, "category": h_cat, "start_ts": host["start_ts"].to_numpy(),
        "duration_ns": host["duration_ns"].to_numpy(),
        "input_shapes": _json_or_empty([a.get("Input Dims") for a in h_args]),
        "input_dtypes": _json_or_empty([a.get("Input type") for a in h_args]),
        "sequence_number": host["sequence_number"].to_numpy(), "correlation_id": host["correlation_id"].to_numpy(),
        "external_id": host["external_id"].to_numpy(), "flops": flops,
        "args": _args_json(h_args, _HOST_DROP),
    }
    if stacks is not None:
        host_cols["stack"] = stacks
    # keep only what collectives need, and free every other host event's args dict now (peak memory)
    h_coll_args = {j: a for j, a in enumerate(h_args) if "Collective name" in a}
    i_rows = np.flatnonzero(is_dev)
    i_rows = i_rows[np.argsort(start[i_rows], kind="stable")]
    i_args = [args[r] for r in i_rows]
    del h_args, args
    split.x_cols = ()
    stage("instructions")

    # ---- instructions, sorted by start
    i_track = _stream_tracks(tracks, i_rows, dev_of, tid)
    i_engine = engine[i_rows]
    i_names = names[i_rows]
    nbytes = int_column([a.get("bytes") for a in i_args], 0)
    nbytes[nbytes < 0] = 0
    is_memset = i_engine == "Memset"
    is_memcpy = i_engine == "Memcpy"
    htod = np.fromiter((m and "HtoD" in n for m, n in zip(is_memcpy.tolist(), i_names.tolist())), bool, len(i_names))
    dtoh = np.fromiter((m and "DtoH" in n for m, n in zip(is_memcpy.tolist(), i_names.tolist())), bool, len(i_names))
    instr = pd.DataFrame({
        "pid": pid[i_rows], "tid": tid[i_rows], "start_ts": start[i_rows],
        "correlation_id": int_column([a.get("correlation") for a in i_args]),
        "external_id": int_column([a.get("External id") for a in i_args]),
    })
    links = resolve_links(host, instr, flows, in_set(h_cat, RUNTIME_CATEGORIES), op_prio)
    del host, flows
    stage("collectives")
    coll = collective_rows(i_names, i_args, i_track, start[i_rows], dur[i_rows], links["framework_op"],
                           h_names, h_coll_args, h_track, host_cols["start_ts"], host_cols["duration_ns"], world)
    i_cols = {
        "track": i_track, "start_ts": start[i_rows], "duration_ns": dur[i_rows], "engine": i_engine,
        "opcode": cat[i_rows], "name": i_names, "framework_op": links["framework_op"],
        "correlation_id": instr["correlation_id"].to_numpy(),
        "hbm_read_bytes": np.where(is_memcpy & ~htod, nbytes, 0),
        "hbm_write_bytes": np.where(is_memset | (is_memcpy & ~dtoh), nbytes, 0),
        "args": _args_json(i_args, _INSTR_DROP),
    }
    del i_args, split, instr  # the event args dicts are no longer needed: free them first
    b.add_rows("host_ops", host_cols)
    del host_cols
    b.add_rows("instructions", i_cols)
    del i_cols
    b.add_flows("host_ops", links["launch_src"], "instructions", links["launch_dst"], kind="launch")
    b.add_flows("host_ops", links["fwd_src"], "host_ops", links["fwd_dst"], kind="fwdbwd")
    b.add_rows("collectives", coll)
    _add_counters(b, tracks, mem, ctr, base_ns)

    for k, v in links["unresolved"].items():
        b.footer_metadata[k] = str(v)
    if is_trace.any():
        span = np.flatnonzero(is_trace)[0]
        b.footer_metadata["kineto.profiler_span_ns"] = f"{start[span]},{dur[span]}"
    skipped = Counter({k: v for k, v in skipped.items() if v})
    if skipped:
        b.footer_metadata["skipped_events"] = _dumps(dict(skipped))
        warnings.warn(f"{source}: skipped {sum(skipped.values())} unreadable events: " +
                      ", ".join(f"{n} {r}" for r, n in skipped.most_common()), stacklevel=3)
    if unknown:
        b.footer_metadata["unknown_categories"] = _dumps(dict(unknown))
        warnings.warn(f"{source}: {sum(unknown.values())} events with unknown categories imported as host ops: "
                      + ", ".join(f"{c!r}: {n}" for c, n in unknown.most_common()), stacklevel=3)
    main_pid = pd.Series(pid[h_rows][h_cat != "python_function"]).value_counts()
    if len(main_pid) and type(main_pid.index[0]) is int:
        b.header.process_id = int(main_pid.index[0])
    return b


def _host_tracks(tracks: TrackTable, rows: np.ndarray, is_anno: np.ndarray, dev_of: dict[int, tuple[int, int]],
                 pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """Track id per host row: its (pid, tid) thread track, or the stream track for device annotations;
    one TrackTable call per distinct thread."""
    out = np.empty(len(rows), dtype=np.int64)
    anno = is_anno[rows]
    th = np.flatnonzero(~anno)
    if len(th):
        pc, tc = key_codes(pid[rows[th]], tid[rows[th]])
        code = pc * (int(tc.max()) + 1) + tc
        uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
        ids = np.asarray([tracks.thread_track(pid[rows[th[i]]], tid[rows[th[i]]]) for i in first.tolist()],
                         dtype=np.int64)
        out[th] = ids[inv.reshape(-1)]
    for j in np.flatnonzero(anno).tolist():
        out[j] = tracks.stream_track(*dev_of[int(rows[j])])
    return out


def _stream_tracks(tracks: TrackTable, rows: np.ndarray, dev_of: dict[int, tuple[int, int]],
                   tid: np.ndarray) -> np.ndarray:
    """Stream track id per device row (one ``stream_track`` call per distinct (device, stream, tid))."""
    cache: dict[tuple[int, int, Any], int] = {}
    out = np.empty(len(rows), dtype=np.int64)
    tids = tid[rows].tolist()
    for j, r in enumerate(rows.tolist()):
        d, s = dev_of[r]
        k = (d, s, tids[j])
        t = cache.get(k)
        if t is None:
            t = cache[k] = tracks.stream_track(d, s, tids[j])
        out[j] = t
    return out


def _add_counters(b: TraceBuilder, tracks: TrackTable, mem: tuple, ctr: list[tuple], base_ns: int) -> None:
    """Counter rows: memory samples (column arrays) and ph:"C" samples; one track per (parent, name)."""
    pids, devs, names, ts, values = mem
    track_ids = np.empty(len(ts), dtype=np.int64)
    if len(ts):
        key = pd.DataFrame({"p": pd.factorize(pids)[0], "d": devs, "n": pd.factorize(names)[0]})
        grp = key.groupby(["p", "d", "n"], sort=False).ngroup().to_numpy()
        first = pd.Series(np.arange(len(grp))).groupby(grp).first().to_numpy()
        ids = np.empty(len(first), dtype=np.int64)
        for g, i in enumerate(first.tolist()):
            parent = tracks.device_track(int(devs[i])) if devs[i] >= 0 else tracks.process_track(pids[i])
            ids[g] = tracks.counter_track(parent, str(names[i]), "bytes")
        track_ids = ids[grp]
    c_tracks = [tracks.counter_track(tracks.process_track(p), name, "count") for p, name, _t, _v in ctr]
    all_tracks = np.concatenate([track_ids, np.asarray(c_tracks, dtype=np.int64)])
    all_ts = np.concatenate([np.asarray(ts, dtype=np.int64), np.asarray([c[2] for c in ctr], dtype=np.int64)])
    all_v = np.concatenate([np.asarray(values, dtype=np.float64), np.asarray([c[3] for c in ctr], dtype=np.float64)])
    if len(all_tracks):
        b.add_rows("counters", kc.counter_columns(all_tracks, all_ts + base_ns, all_v))
