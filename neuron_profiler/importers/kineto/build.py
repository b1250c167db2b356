"""Assemble a ``TraceBuilder`` from a parsed Kineto document (see ``api`` for the public API).

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np

from neuron_profiler.importers.kineto import counters as kc
from neuron_profiler.importers.kineto.args import ANNOTATION, DEVICE, HOST, TRACE, dumps, safe_dumps
from neuron_profiler.importers.kineto.collectives import collective_rows
from neuron_profiler.importers.kineto.decode import EventList
from neuron_profiler.importers.kineto.events import (
    DEVICE_CATEGORIES,
    KNOWN_CATEGORIES,
    RUNTIME_CATEGORIES,
    factorize,
    int_column,
    key_codes,
)
from neuron_profiler.importers.kineto.extract import NO_FRAME_ID, EventColumns, extract_events
from neuron_profiler.importers.kineto.links import resolve_links
from neuron_profiler.importers.kineto.stacks import operator_stacks
from neuron_profiler.importers.kineto.tracks import TrackTable, add_devices, read_meta
from neuron_profiler.trace import TraceBuilder, make_header
from neuron_profiler.trace.errors import TraceFormatError
from neuron_profiler.trace.strings import CodedStrings

PRODUCER = "neuron_profiler.importers.kineto"
_MAX_RANK = 2**31 - 1  # Header.rank / world_size are int32
_KEY_LIMIT = 2**62  # pid / tid keys at or below -_KEY_LIMIT stand for values that are not in-range ints
_MAX_BASE_NS = 2**62  # baseTimeNanoseconds beyond (year 2116) would overflow int64 ns once ts is added
_OP_PRIO = {"cpu_op": 0, "Operator": 0, "user_annotation": 1}
_DEVICE_KIND = {"mtia_ccp_events": "mtia"}


def _header_fields(doc: dict[str, Any]) -> tuple[int, int, dict[str, str]]:
    dist = doc.get("distributedInfo")
    rank, world = 0, 1
    if isinstance(dist, dict):
        r, w = dist.get("rank"), dist.get("world_size")
        rank = r if type(r) is int and 0 <= r < _MAX_RANK else 0
        world = w if type(w) is int and 0 < w <= _MAX_RANK else 1
        world = max(world, rank + 1, 1)
    meta = {}
    for k, v in doc.items():
        if k not in ("traceEvents", "deviceProperties"):
            meta[f"kineto.{k}"] = v if isinstance(v, str) else safe_dumps(v)
    if not isinstance(dist, dict):
        meta["kineto.distributedInfo"] = "absent: imported as rank 0 of world 1"
    elif any(v is not None and not (type(v) is int and lo <= v < _MAX_RANK + 1)
             for v, lo in ((dist.get("rank"), 0), (dist.get("world_size"), 1))):
        meta["kineto.distributedInfo.note"] = (f"rank {str(dist.get('rank'))[:40]} / world_size "
                                               f"{str(dist.get('world_size'))[:40]} not usable: imported as "
                                               f"rank {rank} of world {world}")
    return rank, world, meta


def build_trace(doc: dict[str, Any], source: str, *, run_id: str = "",
                stage: Callable[[str], None] | None = None) -> TraceBuilder:
    """Build the in-memory trace of one parsed Kineto document (``{"traceEvents": [...], ...}``); the
    document's ``traceEvents`` list is removed from ``doc``; its events become ``decode.Event`` structs, as the
    importer's decoder makes them (timestamps keep float64 precision: no text to re-read them from)."""
    events = msgspec.convert(doc.pop("traceEvents"), EventList)
    return build_from_columns(doc, extract_events(events), source, run_id=run_id, stage=stage)


@dataclass
class _Rows:
    """The complete events' columns (``EventColumns.finish``) and what every stage reads of them."""

    x: dict[str, Any]
    start: np.ndarray     # int64 ns, base time included
    dur: np.ndarray
    is_host: np.ndarray   # row class masks
    is_dev: np.ndarray
    is_anno: np.ndarray
    is_trace: np.ndarray
    dev_rows: np.ndarray  # device-side rows (kernels... and device annotations) with their device id / stream
    dev_id: np.ndarray
    stream: np.ndarray
    dev_of: np.ndarray    # x row -> (device id, stream) of device-side rows, else (-1, -1)


@dataclass
class _HostOps:
    """The host_ops table's columns and what the link and collective stages need of them."""

    rows: np.ndarray      # x rows, in table order (start, then outermost first)
    cols: dict[str, Any]  # the table's columns
    link: dict[str, Any]  # pid / tid / start / ids, for ``resolve_links``
    runtime: np.ndarray   # runtime API calls (launch sources)
    op_prio: np.ndarray   # which enclosing operator names a kernel (``resolve_links``)
    is_py: np.ndarray     # python_function rows
    unknown: Counter      # unknown categories -> count


def build_from_columns(doc: dict[str, Any], ev: EventColumns, source: str, *, run_id: str = "",
                       stage: Callable[[str], None] | None = None) -> TraceBuilder:
    """Build the in-memory trace from extracted events (``ev``) and the document's other top-level keys.

    Warns (``UserWarning``) with counts of skipped events and of unknown categories; raises
    ``TraceFormatError`` when the document has events but none of them can be read."""
    stage = stage or (lambda _s: None)
    n_events = ev.n_events
    x = ev.finish()
    if n_events and not (len(x["cls"]) or ev.n_instants or ev.n_counters or ev.meta):
        why = ev.skipped + Counter({"unreadable flow event": ev.bad_flows})
        reasons = ", ".join(f"{n} {r}" for r, n in why.most_common()) or "no reason recorded"
        raise TraceFormatError(f"{source}: none of the {n_events} events could be read ({reasons})")
    b, rank, world, base_ns = _new_builder(doc, source, run_id)
    stage("columns")
    skipped = Counter(ev.skipped)
    r = _rows(x, base_ns, skipped)
    skipped.update(ev.skipped_memory)
    skipped.update(ev.skipped_counters)
    flows = x.pop("flows")
    flows["ts"] = flows["ts"] + base_ns
    skipped["unreadable flow event"] += ev.bad_flows
    if ev.inexact_ts:
        b.footer_metadata["inexact_timestamps"] = (
            f"{ev.inexact_ts} events in batches whose epoch-microsecond ts could not be re-read exactly from the "
            f"JSON text: float64 precision (up to 125 ns off)")
    tracks = _track_table(b, ev, r, doc, rank)
    stage("host ops")
    host = _host_ops(r, ev, tracks)
    stage("instructions")
    i_cols, links, coll = _instructions(r, ev, tracks, host, flows, world, stage)
    flows.clear()
    main_pid = _main_pid(r, host)
    mem = x.pop("mem")
    x.clear()  # the full columns: only the tables' selections are needed from here (peak memory)
    b.add_rows("host_ops", host.cols)
    host.cols = {}
    b.add_rows("instructions", i_cols)
    del i_cols
    b.add_flows("host_ops", links["launch_src"], "instructions", links["launch_dst"], kind="launch")
    b.add_flows("host_ops", links["fwd_src"], "host_ops", links["fwd_dst"], kind="fwdbwd")
    b.add_rows("collectives", coll)
    _add_counters(b, tracks, mem, ev.ctr, base_ns)
    _footer(b, source, links["unresolved"], r, skipped, host.unknown)
    if type(main_pid) is int and -(2**63) <= main_pid < 2**63:  # the header's int64 (a pid beyond: left 0)
        b.header.process_id = main_pid
    return b


def _new_builder(doc: dict[str, Any], source: str, run_id: str) -> tuple[TraceBuilder, int, int, int]:
    """(the builder with the trace's header, rank, world size, base time in ns: 0 without a usable one)."""
    rank, world, meta = _header_fields(doc)
    base = doc.get("baseTimeNanoseconds")
    base_ns = base if type(base) is int and 0 < base < _MAX_BASE_NS else 0
    meta["time_origin"] = ("kineto ts (us) + baseTimeNanoseconds" if base_ns else "kineto ts (us), no base time")
    if base is not None and not base_ns:
        meta["time_origin"] += f" (baseTimeNanoseconds {str(base)[:40]!r} is not a usable ns count: ignored)"
    hdr = make_header(PRODUCER, source_format="kineto-json", rank=rank, world_size=world, simulated=False,
                      metadata=meta, run_id=run_id, source_path=source,
                      instance_id=str(doc.get("host_name", "")))
    return TraceBuilder(hdr), rank, world, base_ns


def _rows(x: dict[str, Any], base_ns: int, skipped: Counter) -> _Rows:
    """Row masks, times, and the device id / stream of device-side rows: ``args.device`` / ``args.stream``,
    else the Kineto pid / tid. Device rows without a usable device id are dropped (counted in ``skipped``)."""
    cls = x["cls"]
    is_dev, is_anno = cls == DEVICE, cls == ANNOTATION
    pid, tid = x["pid"], x["tid"]
    dev_rows = np.flatnonzero(is_dev | is_anno)
    d_arg = x["device"][dev_rows]
    s_arg = x["stream"][dev_rows]
    pid_int = _int_ids(pid, x["pid_key"], dev_rows)
    tid_int = _int_ids(tid, x["tid_key"], dev_rows)
    annos = is_anno[dev_rows]
    dev_id = np.where((d_arg >= 0) & ~annos, d_arg, pid_int)
    # an explicit stream -1 (device-wide "Event Sync") stays -1; a missing one stays MISSING_STREAM: its rows
    # go on a "(no stream)" track with tid -1 (HTA drops events without args.stream, and so does the
    # hta_compatible selection); annotations take the stream of their Kineto tid
    stream = np.where(annos, tid_int, s_arg)
    bad_dev = (dev_id < 0) | (dev_id >= kc.MAX_DEVICE_ID)
    if bad_dev.any():
        skipped["device event without a device id"] += int(bad_dev.sum())
        is_dev[dev_rows[bad_dev]] = False
        is_anno[dev_rows[bad_dev]] = False
        dev_rows, dev_id, stream = dev_rows[~bad_dev], dev_id[~bad_dev], stream[~bad_dev]
    dev_of = np.full((len(cls), 2), -1, dtype=np.int64)
    dev_of[dev_rows, 0], dev_of[dev_rows, 1] = dev_id, stream
    return _Rows(x=x, start=x["start_ts"] + base_ns, dur=x["duration_ns"], is_host=cls == HOST, is_dev=is_dev,
                 is_anno=is_anno, is_trace=cls == TRACE, dev_rows=dev_rows, dev_id=dev_id, stream=stream,
                 dev_of=dev_of)


def _int_ids(ids: Any, keys: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``int_column`` of the pid / tid ``ids`` (an ``IdColumn``) of ``rows``: an int within +-2**62 is its own
    key (``extract.IdKeys``), so only the rows with other values (strings, out-of-range ints) are converted."""
    out = keys[rows]
    odd = np.flatnonzero(out <= -_KEY_LIMIT)
    if len(odd):
        out[odd] = int_column(ids[rows[odd]].tolist())
    return out


def _track_table(b: TraceBuilder, ev: EventColumns, r: _Rows, doc: dict[str, Any], rank: int) -> TrackTable:
    """The track table, with a header device for every device that has events or memory samples."""
    cat = r.x["cat"]
    used: dict[int, str] = {}
    for row, d in zip(r.dev_rows.tolist(), r.dev_id.tolist()):
        if d not in used:
            used[d] = _DEVICE_KIND.get(cat[row], "gpu")
    for d in set(r.x["mem"][1].tolist()):  # (any order: ``add_devices`` takes them sorted)
        if d >= 0 and d not in used:
            used[d] = "gpu"
    tracks = TrackTable(b, read_meta(ev.meta), rank)
    unknown_devices = add_devices(b, tracks, used, doc)
    if unknown_devices:
        b.header.metadata["devices_without_spec"] = "; ".join(unknown_devices) + \
            " (not in the hardware table: imported without peaks, MFU/roofline unavailable)"
    return tracks


def _host_ops(r: _Rows, ev: EventColumns, tracks: TrackTable) -> _HostOps:
    """Host ops (incl. device annotations on stream tracks), sorted by start then outermost first."""
    x, start, dur = r.x, r.start, r.dur
    h_rows = np.flatnonzero(r.is_host | r.is_anno)
    h_rows = h_rows[np.lexsort((-dur[h_rows], start[h_rows]))]
    h_track = _host_tracks(tracks, h_rows, r.is_anno, r.dev_of, x["pid"], x["tid"], x["pid_key"], x["tid_key"])
    h_cat = x["cat"][h_rows]
    h_codes, h_uniq = factorize(h_cat)

    def cat_mask(members: Any) -> np.ndarray:
        return np.asarray([c in members for c in h_uniq] + [False], dtype=bool)[h_codes]

    unknown = Counter(h_cat[~cat_mask(KNOWN_CATEGORIES)].tolist())
    h_start, h_dur, h_names = start[h_rows], dur[h_rows], x["name"][h_rows]
    link = {"pid": x["pid_key"][h_rows], "tid": x["tid_key"][h_rows], "start_ts": h_start, "duration_ns": h_dur,
            "correlation_id": x["corr"][h_rows], "external_id": x["ext"][h_rows],
            "sequence_number": x["seq"][h_rows]}
    is_py = cat_mask({"python_function"})
    cols = {
        "track": h_track, "name": h_names, "category": CodedStrings(h_codes, h_uniq.tolist()), "start_ts": h_start,
        "duration_ns": h_dur,
        "input_shapes": x["input_shapes"][h_rows], "input_dtypes": x["input_dtypes"][h_rows],
        "sequence_number": link["sequence_number"], "correlation_id": link["correlation_id"],
        "external_id": link["external_id"], "flops": x["flops"][h_rows], "args": x["args"][h_rows],
    }
    if is_py.any():
        py_pos = np.flatnonzero(is_py)
        frames = _frames_of(x["frames"], h_rows[py_pos], len(start))
        cols["stack"] = operator_stacks(is_py, cat_mask({"cpu_op", "Operator"}), np.asarray(h_track, dtype=np.int64),
                                        h_start, h_start + h_dur, h_names, frames)
    for c in ("input_shapes", "input_dtypes"):  # all "" (no record_shapes): the reader's default, skip encoding
        if cols[c].tolist().count("") == len(h_rows):  # (list.count tests identity first: "" is one object)
            del cols[c]
    op_prio = np.asarray([_OP_PRIO.get(c, 9) for c in h_uniq] + [9], dtype=np.int64)[h_codes]
    return _HostOps(rows=h_rows, cols=cols, link=link, runtime=cat_mask(RUNTIME_CATEGORIES), op_prio=op_prio,
                    is_py=is_py, unknown=unknown)


def _instructions(r: _Rows, ev: EventColumns, tracks: TrackTable, host: _HostOps, flows: dict[str, Any],
                  world: int, stage: Callable[[str], None]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(the instructions table's columns, sorted by start; the resolved links (``resolve_links``); the
    collectives table's columns)."""
    x, start, dur = r.x, r.start, r.dur
    i_rows = np.flatnonzero(r.is_dev)
    i_rows = i_rows[np.argsort(start[i_rows], kind="stable")]
    h_coll_args, i_coll_args = _rows_of(ev.coll_args, host.rows, len(start)), _rows_of(ev.coll_args, i_rows, len(start))
    i_track = _stream_tracks(tracks, i_rows, r.dev_of[i_rows, 0], r.dev_of[i_rows, 1], x["tid"], x["tid_key"],
                             x["name"])
    i_codes, i_uniq = factorize(x["cat"][i_rows])
    engines = [DEVICE_CATEGORIES.get(c) for c in i_uniq.tolist()]
    i_names = x["name"][i_rows]
    nbytes = x["bytes"][i_rows]
    is_memset = np.asarray([e == "Memset" for e in engines] + [False], dtype=bool)[i_codes]
    is_memcpy = np.asarray([e == "Memcpy" for e in engines] + [False], dtype=bool)[i_codes]
    htod, dtoh = _copy_directions(i_names, is_memcpy)
    instr = {"pid": x["pid_key"][i_rows], "tid": x["tid_key"][i_rows], "start_ts": start[i_rows],
             "correlation_id": x["corr"][i_rows], "external_id": x["ext"][i_rows]}
    links = resolve_links(host.link, instr, flows, host.runtime, host.op_prio)
    host.link = {}
    stage("collectives")
    i_start, i_dur = start[i_rows], dur[i_rows]
    hc = host.cols
    coll = collective_rows(i_names, i_coll_args, i_track, i_start, i_dur, links["framework_op"],
                           hc["name"], h_coll_args, hc["track"], hc["start_ts"], hc["duration_ns"], world)
    i_cols = {
        "track": i_track, "start_ts": i_start, "duration_ns": i_dur, "engine": _coded(i_codes, engines),
        "opcode": CodedStrings(i_codes, i_uniq.tolist()), "name": i_names, "framework_op": links["framework_op"],
        "correlation_id": instr["correlation_id"], "external_id": instr["external_id"],
        "hbm_read_bytes": np.where(is_memcpy & ~htod, nbytes, 0),
        "hbm_write_bytes": np.where(is_memset | (is_memcpy & ~dtoh), nbytes, 0),
        "args": x["args"][i_rows],
    }
    return i_cols, links, coll


def _coded(codes: np.ndarray, mapped: list[Any]) -> CodedStrings:
    """The column whose rows hold ``mapped[code]`` (``codes`` in order of first use, -1: ""), its distinct
    values listed once each in order of first use (several codes may map to one value)."""
    code_of: dict[Any, int] = {}
    remap = [code_of.setdefault(v, len(code_of)) for v in mapped]
    return CodedStrings(np.asarray(remap + [-1], dtype=np.int64)[codes], list(code_of))


def _frames_of(frames: np.ndarray, x_rows: np.ndarray, n_x: int) -> np.ndarray:
    """The (Python id, Python parent id) of each of ``x_rows`` (python_function rows) from ``frames`` (the
    extraction's (row, id, parent id) triples; ``n_x`` rows in all); ``NO_FRAME_ID`` for a row it does not hold."""
    where = np.full(n_x, -1, dtype=np.int64)  # x row -> its triple (rows are unique: one triple per frame row)
    where[frames[:, 0]] = np.arange(len(frames), dtype=np.int64)
    at = where[x_rows]
    hit = at >= 0
    if hit.all():  # the usual case: every python_function row has its ids
        return frames[at, 1:]
    out = np.full((len(x_rows), 2), NO_FRAME_ID, dtype=np.int64)
    out[hit] = frames[at[hit], 1:]
    return out


def _copy_directions(names: np.ndarray, is_memcpy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(host-to-device, device-to-host) masks of the memcpy rows, from their names; False on other rows
    (only the memcpy rows' names are read: a trace has few)."""
    htod = np.zeros(len(names), dtype=bool)
    dtoh = np.zeros(len(names), dtype=bool)
    rows = np.flatnonzero(is_memcpy)
    if len(rows):
        copy_names = names[rows].tolist()
        htod[rows] = ["HtoD" in n for n in copy_names]
        dtoh[rows] = ["DtoH" in n for n in copy_names]
    return htod, dtoh


def _rows_of(by_x_row: dict[int, Any], table_rows: np.ndarray, n_x: int) -> dict[int, Any]:
    """``by_x_row`` re-keyed by table row (``table_rows``: the x row of each table row); x rows not in the
    table are left out."""
    row_of = np.full(n_x, -1, dtype=np.int64)
    row_of[table_rows] = np.arange(len(table_rows))
    return {int(row_of[xr]): v for xr, v in by_x_row.items() if row_of[xr] >= 0}


def _main_pid(r: _Rows, host: _HostOps) -> Any:
    """The Kineto pid of the process with most host ops, python frames aside (the first of equals); None
    without host ops."""
    main_rows = host.rows[~host.is_py]
    if not len(main_rows):
        return None
    main_codes, _ = factorize(r.x["pid_key"][main_rows])
    return r.x["pid"][main_rows[np.argmax(main_codes == np.argmax(np.bincount(main_codes)))]]


def _footer(b: TraceBuilder, source: str, unresolved: dict[str, Any], r: _Rows, skipped: Counter,
            unknown: Counter) -> None:
    """Footer metadata (unresolved links, the profiler's span, skipped events, unknown categories) and the
    warnings for the last two."""
    for k, v in unresolved.items():
        b.footer_metadata[k] = str(v)
    if r.is_trace.any():
        span = np.flatnonzero(r.is_trace)[0]
        b.footer_metadata["kineto.profiler_span_ns"] = f"{r.start[span]},{r.dur[span]}"
    skipped = Counter({k: v for k, v in skipped.items() if v})
    if skipped:
        b.footer_metadata["skipped_events"] = dumps(dict(skipped))
        warnings.warn(f"{source}: skipped {sum(skipped.values())} unreadable events: " +
                      ", ".join(f"{n} {reason}" for reason, n in skipped.most_common()), stacklevel=4)
    if unknown:
        b.footer_metadata["unknown_categories"] = dumps(dict(unknown.most_common()))  # most frequent first
        warnings.warn(f"{source}: {sum(unknown.values())} events with unknown categories imported as host ops: "
                      + ", ".join(f"{c!r}: {n}" for c, n in unknown.most_common()), stacklevel=4)


def _host_tracks(tracks: TrackTable, rows: np.ndarray, is_anno: np.ndarray, dev_of: np.ndarray,
                 pid: np.ndarray, tid: np.ndarray, pid_k: np.ndarray, tid_k: np.ndarray) -> np.ndarray:
    """Track id per host row: its (pid, tid) thread track, or the stream track for device annotations;
    one TrackTable call per distinct thread (``pid_k``/``tid_k``: the same ids as hash keys)."""
    out = np.empty(len(rows), dtype=np.int64)
    anno = is_anno[rows]
    th = np.flatnonzero(~anno)
    if len(th):
        pc, tc = key_codes(pid_k[rows[th]], tid_k[rows[th]])
        code = pc * (int(tc.max()) + 1) + tc
        uniq, first, inv = np.unique(code, return_index=True, return_inverse=True)
        ids = np.asarray([tracks.thread_track(pid[rows[th[i]]], tid[rows[th[i]]]) for i in first.tolist()],
                         dtype=np.int64)
        out[th] = ids[inv.reshape(-1)]
    for j in np.flatnonzero(anno).tolist():
        dev, stream = dev_of[rows[j]].tolist()  # (device id, stream) as ints
        out[j] = tracks.stream_track(dev, stream)
    return out


def _stream_tracks(tracks: TrackTable, rows: np.ndarray, dev_id: np.ndarray, stream: np.ndarray,
                   tid: np.ndarray, tid_k: np.ndarray, names: np.ndarray) -> np.ndarray:
    """Stream track id per device row (``dev_id``/``stream`` aligned with ``rows``): one ``stream_track``
    call per distinct (device, stream, tid), in order of first appearance."""
    if len(rows) == 0:
        return np.zeros(0, dtype=np.int64)
    (tc,) = key_codes(tid_k[rows])
    dc, ds = factorize(dev_id)[0], factorize(stream)[0]
    codes, first = _first_codes((dc * (int(ds.max()) + 1) + ds) * (int(tc.max()) + 1) + tc)
    ids = np.asarray([tracks.stream_track(int(dev_id[j]), int(stream[j]), tid[rows[j]], names[rows[j]])
                      for j in first.tolist()], dtype=np.int64)
    return ids[codes]


def _first_codes(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes of ``key`` in order of first appearance, and the position of each code's first row."""
    codes, uniq = factorize(key)
    first = np.full(len(uniq), len(key), dtype=np.int64)
    np.minimum.at(first, codes, np.arange(len(key)))
    return codes, first


def _add_counters(b: TraceBuilder, tracks: TrackTable, mem: tuple, ctr: list[tuple], base_ns: int) -> None:
    """Counter rows: memory samples (column arrays) and ph:"C" samples; one track per (parent, name)."""
    pids, devs, names, ts, values = mem
    track_ids = np.empty(len(ts), dtype=np.int64)
    if len(ts):
        pc, dc, nc = factorize(pids)[0], factorize(devs)[0], factorize(names)[0]
        grp, first = _first_codes((pc * (int(dc.max()) + 1) + dc) * (int(nc.max()) + 1) + nc)
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
