"""Trace -> Perfetto protobuf (``.pftrace``), opened natively by ui.perfetto.dev and trace_processor.

- Tracks: our tracks table keeps its hierarchy: process tracks become Perfetto processes, threads threads
  (matched by pid/tid), every other track a named track under its parent (devices, cores, engines, DMA queues,
  CC cores, counters with their unit). Events that overlap without nesting on one of our tracks go to child
  tracks "<name> [1]", "[2]"... (Perfetto slices on a track must nest).
- Simulated traces say so: device tracks are named "... (simulated by <model> for <target>)" and the trace metadata
  (``chrome_events.metadata``, shown by trace_processor as ``cr-neuron_profiler.*``) holds
  ``neuron_profiler.simulated``, the model, target and assumptions (``Header.simulation``) and the header.
- Packets are written in time order on their one sequence (slice ends before begins at equal times, inner
  ends before outer ends), in time windows of about a million events, so memory stays bounded; event names
  are interned. Flows (host op -> device event) become ``flow_ids`` / ``terminating_flow_ids``.

Descriptors and metadata are built with the Perfetto protobuf classes of the ``perfetto`` package (``pip install
'neuron-profiler[perfetto]'``); the millions of event packets with ``protowire``, 6x faster than the classes
(checked byte for byte against them in the tests; figures in ``bench/bench_export.py``).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from neuron_profiler.exporters.common import EVENT_TABLES, FlowEnds, MissingExtraError, TrackLayout, opened
from neuron_profiler.exporters.protowire import Batch
from neuron_profiler.gcpause import gc_paused
from neuron_profiler.trace import TIME_COLUMNS, TraceFile, simulated_by, simulation_note
from neuron_profiler.trace.files import atomic_output

SEQ_ID = 1
_BEGIN, _END, _COUNTER = 1, 2, 4
_INCREMENTAL_STATE_CLEARED, _NEEDS_INCREMENTAL_STATE = 1, 2
_EXPLICIT_ORDER = 3
#: Events (slices + counter samples) per time window (~1 KB of arrays per event while a window is encoded).
WINDOW_ROWS = 1 << 17


def _perfetto():
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2
    except ImportError:
        raise MissingExtraError("Perfetto export needs the perfetto package: pip install 'neuron-profiler[perfetto]'") \
            from None
    return perfetto_trace_pb2


def export_perfetto(src: str | os.PathLike | TraceFile, out: str | os.PathLike) -> Path:
    """Write trace ``src`` (a path or an open ``TraceFile``) as a Perfetto protobuf trace to ``out``; returns
    ``out`` (the file appears only when complete)."""
    pf = _perfetto()
    out = Path(out)
    with opened(src) as tf, atomic_output(out, [tf.path]) as tmp, open(tmp, "wb") as f, gc_paused():
        _Export(tf, f, pf).run()
    return out


@dataclass
class _Pending:
    """Slice ends not yet written (their slice began in an earlier window)."""

    ts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    uuid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    seq: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class _Slices:
    """Slices of a window: track, start and end (ns), interned name id; ``flow_out`` / ``flow_in``: (slice index,
    flow id) of the flows that leave / enter them."""

    track: np.ndarray
    start: np.ndarray
    end: np.ndarray
    iid: np.ndarray
    flow_out: tuple[np.ndarray, np.ndarray]
    flow_in: tuple[np.ndarray, np.ndarray]


class _Export:
    def __init__(self, tf: TraceFile, f: IO[bytes], pf) -> None:
        self.tf, self.f, self.pf = tf, f, pf
        self.layout = TrackLayout.of(tf)
        self.flows = FlowEnds(tf)
        self.names: dict[str, int] = {}  # interned event name -> iid
        self.stacks: dict[int, list[list[int]]] = {}  # our track -> per lane, the end times of open slices
        self.lane_uuid: dict[tuple[int, int], int] = {}
        self.next_uuid = len(self.layout) + 1
        self.pending = _Pending()
        self.seq = 0  # emission order of events (tie-break)

    # -- packets built with the Perfetto classes ---------------------------------------------------
    def _write(self, packet) -> None:
        packet.trusted_packet_sequence_id = SEQ_ID
        trace = self.pf.Trace()
        trace.packet.append(packet)
        self.f.write(trace.SerializeToString())

    def run(self) -> None:
        first = self.pf.TracePacket(sequence_flags=_INCREMENTAL_STATE_CLEARED)
        self._metadata(first.chrome_events, self._facts())
        self._write(first)
        self._track_descriptors()
        for a, b, last in _windows(self.tf):
            self._window(a, b, last)
        loss = self.tf.loss_report()
        if loss:
            p = self.pf.TracePacket()
            self._metadata(p.chrome_events, {"neuron_profiler.loss": loss})
            self._write(p)

    def _facts(self) -> dict[str, str]:
        from google.protobuf.json_format import MessageToJson

        h = self.tf.header
        sim = h.simulation
        facts = {"neuron_profiler.simulated": "yes" if h.simulated else "no",
                 "neuron_profiler.producer": f"{h.producer} {h.producer_version}",
                 "neuron_profiler.format_version": self.tf.format_version,
                 "neuron_profiler.rank": f"{h.rank} of {h.world_size}"}
        if h.simulated:
            facts["neuron_profiler.simulation"] = f"device events {simulation_note(h)}"
            facts["neuron_profiler.assumptions"] = json.dumps(dict(sim.assumptions), sort_keys=True)
        facts["neuron_profiler.header"] = MessageToJson(h, indent=None, sort_keys=True)
        return facts

    @staticmethod
    def _metadata(bundle, facts: dict[str, str]) -> None:
        for k, v in facts.items():
            bundle.metadata.add(name=k, string_value=v)

    def _track_descriptors(self) -> None:
        lay, t = self.layout, self.layout.tracks
        parent, pid, tid = (t[c].to_numpy() for c in ("parent", "pid", "tid"))
        units, order = t["unit"].astype(str).to_numpy(dtype=object), t["sort_index"].to_numpy()
        simulated = simulated_by(self.tf.header)
        seen_pid, seen_tid = set(), set()
        for i in range(len(lay)):
            td = self.pf.TrackDescriptor(uuid=i + 1, child_ordering=_EXPLICIT_ORDER, sibling_order_rank=int(order[i]))
            kind, name = lay.kinds[i], str(lay.names[i])
            if simulated and kind == "device":
                name += f" ({simulated})"
            if kind == "process" and pid[i] > 0 and pid[i] not in seen_pid:
                seen_pid.add(int(pid[i]))
                td.process.pid, td.process.process_name = int(pid[i]), name
            elif kind == "thread" and pid[i] > 0 and tid[i] > 0 and (pid[i], tid[i]) not in seen_tid:
                seen_tid.add((int(pid[i]), int(tid[i])))
                td.thread.pid, td.thread.tid, td.thread.thread_name = int(pid[i]), int(tid[i]), name
            else:
                td.name = name
                if 0 <= parent[i] < len(lay):
                    td.parent_uuid = int(parent[i]) + 1
                if kind == "counter":
                    td.counter.unit_name = str(units[i])
            self._write(self.pf.TracePacket(track_descriptor=td))

    def _uuid(self, track: int, lane: int) -> int:
        """Perfetto track of lane ``lane`` of our ``track`` (-1: events without a track); descriptors of lanes
        and of the no-track track are written on first use."""
        if track >= 0 and lane == 0:
            return track + 1
        key = (track, lane)
        if key not in self.lane_uuid:
            uuid = self.lane_uuid[key] = self.next_uuid
            self.next_uuid += 1
            if track < 0:
                td = self.pf.TrackDescriptor(uuid=uuid, name="(no track)")
            else:
                td = self.pf.TrackDescriptor(uuid=uuid, name=f"{self.layout.names[track]} [{lane}]",
                                             parent_uuid=track + 1, sibling_order_rank=lane)
            self._write(self.pf.TracePacket(track_descriptor=td))
        return self.lane_uuid[key]

    def _intern(self, cats: list[str]) -> np.ndarray:
        """iid of each name, writing an interned-data packet for names not seen before."""
        new = [c for c in dict.fromkeys(cats) if c not in self.names]
        if new:
            p = self.pf.TracePacket(sequence_flags=_NEEDS_INCREMENTAL_STATE)
            for c in new:
                self.names[c] = len(self.names) + 1
                p.interned_data.event_names.add(iid=self.names[c], name=c)
            self._write(p)
        return np.array([self.names[c] for c in cats], dtype=np.int64)

    # -- one time window -----------------------------------------------------------------------------
    def _window(self, a: int, b: int, last: bool) -> None:
        ev = self._events(a, b, last)
        n = len(ev.start)
        lanes, depth = self._lanes(ev.track, ev.start, ev.end)
        uuid = ev.track + 1
        odd = np.flatnonzero((lanes > 0) | (ev.track < 0))  # lanes beyond the first, events without a track
        uuid[odd] = [self._uuid(int(t), int(k)) for t, k in zip(ev.track[odd].tolist(), lanes[odd].tolist())]
        seq = self.seq + np.arange(n, dtype=np.int64)
        self.seq += n
        ends = _Pending(np.concatenate([self.pending.ts, ev.end]), np.concatenate([self.pending.uuid, uuid]),
                        np.concatenate([self.pending.depth, depth]), np.concatenate([self.pending.seq, seq]))
        now = np.ones(len(ends.ts), dtype=bool) if last else ends.ts < b
        self.pending = _Pending(ends.ts[~now], ends.uuid[~now], ends.depth[~now], ends.seq[~now])
        zero = ev.end == ev.start
        ctr = self._counters(a, b, last)
        m, k = int(now.sum()), len(ctr["ts"])
        ts = np.concatenate([ev.start, ends.ts[now], ctr["ts"]])
        kind = np.concatenate([np.full(n, _BEGIN), np.full(m, _END), np.full(k, _COUNTER)])
        # order: time; at one time ends (phase 0) before begins (1); a zero-length slice's end right after its begin
        end_zero = np.isin(ends.seq[now], seq[zero])
        phase = np.concatenate([np.ones(n), np.where(end_zero, 1, 0), np.full(k, 2)]).astype(np.int64)
        dkey = np.concatenate([depth, np.where(end_zero, ends.depth[now], -ends.depth[now]), np.zeros(k, np.int64)])
        sub = np.concatenate([np.zeros(n, np.int64), np.ones(m, np.int64), np.zeros(k, np.int64)])
        order = np.lexsort((sub, np.concatenate([seq, ends.seq[now], np.arange(k)]), dkey, phase, ts))
        begin_flows = [_csr(n, *flows) for flows in (ev.flow_out, ev.flow_in)]
        self.f.write(_packets(ts, kind, np.concatenate([uuid, ends.uuid[now], ctr["uuid"]]),
                              np.concatenate([ev.iid, np.zeros(m + k, np.int64)]),
                              np.concatenate([np.zeros(n + m), ctr["value"]]),
                              [_pad_csr(c, m + k) for c in begin_flows], order))

    def _events(self, a: int, b: int, last: bool) -> _Slices:
        """The slices that begin in [a, b) (all remaining when ``last``), every event table together, sorted by
        (track, start, longest first), with their interned name and flows."""
        parts: list[_Slices] = []
        for table, namecol in EVENT_TABLES.items():
            df = _window_rows(self.tf, table, ["track", "start_ts", "duration_ns", namecol], a, b, last)
            if not len(df):
                continue
            rows = df.index.to_numpy()
            cats = np.asarray(df[namecol].cat.categories, dtype=object).tolist()
            iid = self._intern(cats)[df[namecol].cat.codes.to_numpy()] if cats else np.zeros(len(df), np.int64)
            start = df["start_ts"].to_numpy()
            parts.append(_Slices(df["track"].to_numpy(), start, start + df["duration_ns"].to_numpy(), iid,
                                 self.flows.flow_ids_of(0, table, rows), self.flows.flow_ids_of(1, table, rows)))
        if not parts:
            z = np.zeros(0, dtype=np.int64)
            return _Slices(z, z, z, z, (z, z), (z, z))
        offsets = np.cumsum([0] + [len(p.start) for p in parts])
        track = np.concatenate([p.track for p in parts])
        start, end = np.concatenate([p.start for p in parts]), np.concatenate([p.end for p in parts])
        iid = np.concatenate([p.iid for p in parts])
        flow_out = (np.concatenate([p.flow_out[0] + o for p, o in zip(parts, offsets)]),
                    np.concatenate([p.flow_out[1] for p in parts]))
        flow_in = (np.concatenate([p.flow_in[0] + o for p, o in zip(parts, offsets)]),
                   np.concatenate([p.flow_in[1] for p in parts]))
        track = np.where(self.layout.valid(track), track, -1)
        order = np.lexsort((-(end - start), start, track))
        inverse = np.empty_like(order)
        inverse[order] = np.arange(len(order))
        return _Slices(track[order], start[order], end[order], iid[order], (inverse[flow_out[0]], flow_out[1]),
                       (inverse[flow_in[0]], flow_in[1]))

    def _lanes(self, track: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Lane and nesting depth of each slice (sorted by track, start, longest first) so that slices on one lane
        nest or are disjoint; the open slices of each track carry over to the next window."""
        n = len(start)
        lanes, depth = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        bounds = np.flatnonzero(np.diff(track)) + 1
        for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n]):
            if lo == hi:
                continue
            t = int(track[lo])
            stacks = self.stacks.setdefault(t, [])
            s, e = start[lo:hi], end[lo:hi]
            if not any(st and st[0] > s[0] for st in stacks) and (hi - lo == 1 or (s[1:] >= e[:-1]).all()):
                self.stacks[t] = [[int(e[-1])]]  # disjoint slices: all on lane 0 at depth 0
                continue
            for i in range(lo, hi):
                lanes[i], depth[i] = _place(stacks, int(start[i]), int(end[i]))
        return lanes, depth

    def _counters(self, a: int, b: int, last: bool) -> dict[str, np.ndarray]:
        df = _window_rows(self.tf, "counters", ["track", "ts", "value"], a, b, last)
        track = df["track"].to_numpy()
        uuid = np.array([self._uuid(int(t) if 0 <= t < len(self.layout) else -1, 0) for t in np.unique(track)],
                        dtype=np.int64)
        return {"ts": df["ts"].to_numpy(), "value": df["value"].to_numpy(),
                "uuid": uuid[np.searchsorted(np.unique(track), track)] if len(track) else np.zeros(0, np.int64)}


def _place(stacks: list[list[int]], s: int, e: int) -> tuple[int, int]:
    """Put slice [s, e] on the first lane where it nests or follows; (lane, depth)."""
    for li, st in enumerate(stacks):
        while st and st[-1] <= s:
            st.pop()
        if not st or e <= st[-1]:
            st.append(e)
            return li, len(st) - 1
    stacks.append([e])
    return len(stacks) - 1, 0


def _window_rows(tf: TraceFile, table: str, cols: list[str], a: int, b: int, last: bool):
    """Rows of ``table`` whose time column is in [a, b) (or >= a when ``last``)."""
    tcol = TIME_COLUMNS[table][0]
    if tf.footer is None:  # one window: the whole table
        return tf.table(table, columns=cols)
    df = tf.table(table, columns=cols, start_ns=a, end_ns=None if last else b - 1)
    t = df[tcol].to_numpy()
    keep = (t >= a) & ((t < b) | last)
    return df if keep.all() else df[keep]


def _windows(tf: TraceFile) -> list[tuple[int, int, bool]]:
    """Consecutive time windows [a, b) holding about ``WINDOW_ROWS`` events each, estimated from the footer
    index (each chunk's rows spread evenly over its time span); one window for a file without footer."""
    tr = tf.time_range
    if tr is None or tf.footer is None:
        return [(-(1 << 62), 1 << 62, True)]
    lo, hi = tr
    edges = np.linspace(lo, hi + 1, 4097)
    density = np.zeros(len(edges) - 1)
    for c in (c for t in TIME_COLUMNS for c in tf.chunk_index(t) if c.rows):
        a, b = np.searchsorted(edges, [c.min_ts, c.max_end_ts], side="right") - 1
        a, b = max(a, 0), min(max(b, a), len(density) - 1)
        density[a:b + 1] += c.rows / (b - a + 1)
    cum = np.cumsum(density)
    cuts = np.searchsorted(cum, np.arange(WINDOW_ROWS, cum[-1] if len(cum) else 0, WINDOW_ROWS))
    bounds = [lo] + sorted({int(edges[i + 1]) for i in cuts if lo < int(edges[i + 1]) <= hi}) + [hi + 1]
    return [(a, b, i == len(bounds) - 2) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def _csr(n: int, idx: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(count per event, ids grouped by event) from (event index, id) pairs."""
    order = np.argsort(idx, kind="stable")
    return np.bincount(idx, minlength=n).astype(np.int64), ids[order]


def _pad_csr(c: tuple[np.ndarray, np.ndarray], extra: int) -> tuple[np.ndarray, np.ndarray]:
    return np.concatenate([c[0], np.zeros(extra, np.int64)]), c[1]


def _packets(ts: np.ndarray, kind: np.ndarray, uuid: np.ndarray, iid: np.ndarray, value: np.ndarray,
             flows: list[tuple[np.ndarray, np.ndarray]], order: np.ndarray) -> bytes:
    """``Trace.packet`` bytes of TrackEvent packets, taken in ``order``."""
    ts, kind, uuid, iid, value = ts[order], kind[order], uuid[order], iid[order], value[order]
    te = Batch(len(ts)).varint(9, kind).varint(10, iid, kind == _BEGIN).varint(11, uuid)
    te.double(44, value, kind == _COUNTER)
    for number, (counts, ids) in zip((47, 48), flows):
        counts, ids = _reorder_csr(counts, ids, order)
        te.repeated_fixed64(number, counts, ids)
    pk = Batch(len(ts)).varint(8, ts).varint(10, SEQ_ID).message(11, te)
    pk.varint(13, _NEEDS_INCREMENTAL_STATE, kind == _BEGIN)
    return pk.as_repeated(1)


def _reorder_csr(counts: np.ndarray, ids: np.ndarray, order: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = counts[order]
    if not len(ids):
        return c, ids
    starts = np.cumsum(counts) - counts
    first = np.repeat(starts[order] - (np.cumsum(c) - c), c)
    return c, ids[first + np.arange(int(c.sum()))]
