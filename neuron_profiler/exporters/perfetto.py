"""Trace -> Perfetto protobuf (`.pftrace`), opened natively by ui.perfetto.dev and trace_processor.

Hand-encoded with the stable field numbers of perfetto's `TracePacket`/`TrackDescriptor`/`TrackEvent`
(no dependency). Each of our tracks becomes a custom-scoped Perfetto track (the Perfetto docs advise
against faking accelerator timelines as threads); events that overlap without nesting on one track are
spread over sibling lanes, since Perfetto slices on a track must nest. Counters use counter tracks and
flows (host op -> device event) use `flow_ids`.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import BinaryIO

import numpy as np

from neuron_profiler.trace import TraceFile, read_trace
from neuron_profiler.trace.wire import encode_varint

_SEQ_ID = 1
_SLICE_BEGIN, _SLICE_END, _COUNTER = 1, 2, 4
_SEQ_CLEARED = 1
_EVENT_TABLES = {"host_ops": "name", "instructions": "name", "dma": "variable", "collectives": "operation"}


def _key(field: int, wire: int) -> bytes:
    return encode_varint((field << 3) | wire)


def _f_varint(field: int, v: int) -> bytes:
    return _key(field, 0) + encode_varint(v)


def _f_bytes(field: int, b: bytes) -> bytes:
    return _key(field, 2) + encode_varint(len(b)) + b


def _f_str(field: int, s: str) -> bytes:
    return _f_bytes(field, s.encode("utf-8"))


def _f_double(field: int, v: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", v)


def _f_fixed64(field: int, v: int) -> bytes:
    return _key(field, 1) + struct.pack("<Q", v)


def _packet(body: bytes) -> bytes:
    """A `Trace.packet` (field 1) holding ``body`` plus the sequence id."""
    return _f_bytes(1, body + _f_varint(10, _SEQ_ID))


def _track_descriptor(uuid: int, name: str, parent: int | None, counter_unit: str | None = None) -> bytes:
    td = _f_varint(1, uuid) + _f_str(2, name)
    if parent is not None:
        td += _f_varint(5, parent)
    if counter_unit is not None:
        td += _f_bytes(8, _f_str(6, counter_unit) if counter_unit else b"")
    return _packet(_f_bytes(60, td))


def _lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Lane per event (events sorted by start) so that events on one lane nest or are disjoint."""
    lanes = np.zeros(len(start), dtype=np.int64)
    stacks: list[list[int]] = []  # per lane: stack of open end times
    for i in range(len(start)):
        s, e = start[i], end[i]
        for li, st in enumerate(stacks):
            while st and st[-1] <= s:
                st.pop()
            if not st or e <= st[-1]:
                st.append(e)
                lanes[i] = li
                break
        else:
            stacks.append([e])
            lanes[i] = len(stacks) - 1
    return lanes


def _write_events(f: BinaryIO, tf: TraceFile, track_uuid: dict[int, int], track_names: np.ndarray) -> None:
    flows = tf.table("flows")
    flow_out: dict[tuple[str, int], list[int]] = {}
    flow_in: dict[tuple[str, int], list[int]] = {}
    for fid, (st, sr, dt, dr) in enumerate(zip(flows["src_table"].astype(str), flows["src_row"],
                                               flows["dst_table"].astype(str), flows["dst_row"]), start=1):
        flow_out.setdefault((st, int(sr)), []).append(fid)
        flow_in.setdefault((dt, int(dr)), []).append(fid)
    lane_uuid: dict[tuple[int, int], int] = {}
    next_uuid = max(track_uuid.values(), default=0) + 1
    for table, namecol in _EVENT_TABLES.items():
        df = tf.table(table, columns=["track", "start_ts", "duration_ns", namecol])
        if not len(df):
            continue
        df = df.sort_values(["track", "start_ts", "duration_ns"], ascending=[True, True, False], kind="stable")
        names = df[namecol].astype(str).to_numpy()
        for trk, idx in df.groupby("track", sort=False).indices.items():
            start = df["start_ts"].to_numpy()[idx]
            end = start + df["duration_ns"].to_numpy()[idx]
            lanes = _lanes(start, end)
            rows = df.index.to_numpy()[idx]
            for k in range(len(idx)):
                base = track_uuid.get(int(trk), 0)
                if lanes[k]:
                    key = (int(trk), int(lanes[k]))
                    if key not in lane_uuid:
                        lane_uuid[key] = next_uuid
                        next_uuid += 1
                        f.write(_track_descriptor(lane_uuid[key], f"{track_names[trk]} [{lanes[k]}]", base))
                    uuid = lane_uuid[key]
                else:
                    uuid = base
                ev = _f_varint(9, _SLICE_BEGIN) + _f_varint(11, uuid) + _f_str(23, names[idx[k]])
                for fid in flow_out.get((table, int(rows[k])), ()):
                    ev += _f_fixed64(47, fid)  # TrackEvent.flow_ids is fixed64
                for fid in flow_in.get((table, int(rows[k])), ()):
                    ev += _f_fixed64(48, fid)
                f.write(_packet(_f_varint(8, int(start[k])) + _f_bytes(11, ev)))
                f.write(_packet(_f_varint(8, int(end[k])) + _f_bytes(11, _f_varint(9, _SLICE_END) + _f_varint(11, uuid))))


def export_perfetto(src: str | os.PathLike, out: str | os.PathLike) -> Path:
    """Write ``src`` as a Perfetto protobuf trace to ``out``; returns ``out``."""
    tf = read_trace(src)
    out = Path(out)
    tracks = tf.table("tracks")
    names = tracks["name"].astype(str).to_numpy()
    kinds = tracks["kind"].astype(str).to_numpy()
    units = tracks["unit"].astype(str).to_numpy()
    parents = tracks["parent"].to_numpy()
    track_uuid = {int(i): int(i) + 1 for i in tracks.index}
    with open(out, "wb") as f:
        f.write(_packet(_f_varint(13, _SEQ_CLEARED)))
        for i in tracks.index:
            p = int(parents[i])
            f.write(_track_descriptor(track_uuid[int(i)], names[i], track_uuid.get(p) if p >= 0 else None,
                                      units[i] if kinds[i] == "counter" else None))
        _write_events(f, tf, track_uuid, names)
        counters = tf.table("counters")
        for t, ts, v in zip(counters["track"].to_numpy(), counters["ts"].to_numpy(), counters["value"].to_numpy()):
            ev = _f_varint(9, _COUNTER) + _f_varint(11, track_uuid.get(int(t), 0)) + _f_double(44, float(v))
            f.write(_packet(_f_varint(8, int(ts)) + _f_bytes(11, ev)))
    tf.close()
    return out
