"""Timeline tracks of an imported Kineto trace: host process/thread tracks, device/stream tracks, and
the header ``Device`` entries built from ``deviceProperties``."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_profiler.trace import TraceBuilder
from schemas import pb

NO_STREAM = -(2**62)  # stream of device events without args.stream (extract.MISSING_STREAM)


@dataclass
class MetaNames:
    """Names from ``ph:"M"`` events: process names/labels per pid, thread names/sort indices per (pid, tid)."""

    process_name: dict[Any, str] = field(default_factory=dict)
    process_labels: dict[Any, str] = field(default_factory=dict)
    thread_name: dict[tuple[Any, Any], str] = field(default_factory=dict)
    thread_sort: dict[tuple[Any, Any], int] = field(default_factory=dict)


def read_meta(meta: list[Any]) -> MetaNames:
    """Collect the names carried by metadata events (``decode.Event``; unknown names are ignored)."""
    m = MetaNames()
    for e in meta:
        a = e.args
        if not isinstance(a, dict):
            continue
        name, pid, tid = e.name, e.pid, e.tid
        if not (type(pid) in (int, str) and type(tid) in (int, str)):
            continue
        if name == "process_name" and isinstance(a.get("name"), str):
            m.process_name[pid] = a["name"]
        elif name == "process_labels" and isinstance(a.get("labels"), str):
            m.process_labels[pid] = a["labels"]
        elif name == "thread_name" and isinstance(a.get("name"), str):
            m.thread_name[(pid, tid)] = a["name"].strip()
        elif name == "thread_sort_index" and type(a.get("sort_index")) is int and abs(a["sort_index"]) < 2**62:
            m.thread_sort[(pid, tid)] = a["sort_index"]
    return m


def _as_int(v: Any) -> int:
    """A pid / tid / sort index as stored in the tracks table (int64): -1 for anything else."""
    return v if type(v) is int and -(2**63) <= v < 2**63 else -1


class TrackTable:
    """Creates tracks lazily in a ``TraceBuilder`` and remembers their ids by key."""

    def __init__(self, b: TraceBuilder, names: MetaNames, rank: int) -> None:
        self.b, self.names, self.rank = b, names, rank
        self.process: dict[Any, int] = {}
        self.thread: dict[tuple[Any, Any], int] = {}
        self.device: dict[int, int] = {}          # kineto device id -> track id
        self.device_index: dict[int, int] = {}    # kineto device id -> index in header.devices
        self.stream: dict[tuple[int, int] | tuple[int, str, Any], int] = {}  # (dev, stream) or (dev, "no stream", tid)
        self.counter: dict[tuple[int, str], int] = {}

    def process_track(self, pid: Any) -> int:
        """The track of host process ``pid``."""
        t = self.process.get(pid)
        if t is None:
            label = self.names.process_labels.get(pid, "")
            name = self.names.process_name.get(pid) or f"process {pid}"
            if label and label not in name:
                name = f"{name} ({label})"
            t = self.b.add_track(kind="process", name=name, pid=_as_int(pid), rank=self.rank)
            self.process[pid] = t
        return t

    def thread_track(self, pid: Any, tid: Any) -> int:
        """The track of host thread (pid, tid), under its process track."""
        t = self.thread.get((pid, tid))
        if t is None:
            parent = self.process_track(pid)
            name = self.names.thread_name.get((pid, tid)) or f"thread {tid}"
            sort = self.names.thread_sort.get((pid, tid), _as_int(tid))
            t = self.b.add_track(kind="thread", name=name, parent=parent, pid=_as_int(pid), tid=_as_int(tid),
                                 rank=self.rank, sort_index=sort)
            self.thread[(pid, tid)] = t
        return t

    def device_track(self, dev: int) -> int:
        """The track of device ``dev`` (its header entry must exist: see ``add_devices``)."""
        t = self.device.get(dev)
        if t is None:
            d = self.b.header.devices[self.device_index[dev]]
            label = self.names.process_labels.get(dev) or f"{d.kind.upper()} {dev}"
            name = f"{label} ({d.name})" if d.name and d.name not in label else label
            t = self.b.add_track(kind="device", name=name, device=self.device_index[dev], pid=dev,
                                 rank=self.rank, sort_index=1_000_000 + dev)
            self.device[dev] = t
        return t

    def stream_track(self, dev: int, stream: int, kineto_tid: Any = None, event_name: str = "") -> int:
        """The track of stream ``stream`` on device ``dev``. ``stream == NO_STREAM`` (events without
        ``args.stream``): one track per Kineto tid, named "<thread or event name> (no stream)", with tid -1,
        so that HTA-compatible selections drop its events as HTA does."""
        key = (dev, stream) if stream != NO_STREAM else (dev, "no stream", kineto_tid)
        t = self.stream.get(key)
        if t is None:
            parent = self.device_track(dev)
            nm = self.names.thread_name.get((dev, stream if kineto_tid is None else kineto_tid))
            if stream == NO_STREAM:
                label = nm or event_name or f"thread {kineto_tid}"
                name, tid, sort = f"{label} (no stream)", -1, 1_000_000
            else:
                name, tid, sort = (nm if nm and "stream" in nm.lower() else f"stream {stream}"), stream, stream
            t = self.b.add_track(kind="stream", name=name, parent=parent, device=self.device_index[dev],
                                 pid=dev, tid=tid, rank=self.rank, sort_index=sort)
            self.stream[key] = t
        return t

    def counter_track(self, parent: int, name: str, unit: str) -> int:
        """A counter track ``name`` under ``parent`` (bytes, count...)."""
        t = self.counter.get((parent, name))
        if t is None:
            t = self.b.add_track(kind="counter", name=name, parent=parent, rank=self.rank, unit=unit)
            self.counter[(parent, name)] = t
        return t

    def tracks_for(self, keys: np.ndarray, make: Any) -> np.ndarray:
        """Vector helper: track id per row, calling ``make(key)`` once per distinct key (object array)."""
        uniq: dict[Any, int] = {}
        out = np.empty(len(keys), dtype=np.int64)
        for i, k in enumerate(keys):
            t = uniq.get(k)
            if t is None:
                t = uniq[k] = make(k)
            out[i] = t
        return out


def _props(p: dict[str, Any]) -> dict[str, str]:
    """Device properties as text: strings as they are, ints as their digits (what ``json.dumps`` gives them,
    without its per-call cost), anything else as JSON."""
    return {str(k): v if isinstance(v, str) else str(v) if type(v) is int else json.dumps(v) for k, v in p.items()}


def add_devices(b: TraceBuilder, tracks: TrackTable, used: dict[int, str], doc: dict[str, Any]) -> list[str]:
    """Append a header ``Device`` for each used device id (``used``: id -> kind guessed from categories).

    Names, kinds and specs come from ``deviceProperties`` when listed; the spec from the hardware table
    (``gpu_spec``). Returns descriptions of devices imported without peaks (unknown hardware)."""
    from neuron_profiler import hardware  # lazy: keeps importer import light

    props = {}
    listed = doc.get("deviceProperties")
    if listed is not None and not isinstance(listed, list):
        b.header.metadata["kineto.deviceProperties"] = (f"expected a list of devices, found a JSON "
                                                        f"{type(listed).__name__}: ignored")
    for p in listed if isinstance(listed, list) else []:  # anything else (a scalar, an object): no properties
        if isinstance(p, dict) and type(p.get("id")) is int:
            props[p["id"]] = p
    unknown = []
    rocm = any(k in doc for k in ("roctracer_version", "hip_runtime_version", "hip_driver_version"))
    for dev in sorted(used):
        p = props.get(dev, {})
        if not p and len(props) == 1 and len(used) == 1:
            # one listed device, events on another id (e.g. HIP/CUDA_VISIBLE_DEVICES renumbering)
            p = dict(next(iter(props.values())))
            p["note"] = f"deviceProperties id {p['id']} used for device {dev} (the only listed device)"
        name = p.get("name") if isinstance(p.get("name"), str) else ""
        kind = used[dev]
        if name and kind in ("cuda", "gpu"):
            kind = hardware.device_kind_for_gpu(name)
        elif kind == "gpu":
            kind = "rocm" if rocm else "cuda"
        if kind == "cuda" and rocm:
            kind = "rocm"
        mem = p.get("totalGlobalMem")
        from neuron_profiler.importers.kineto.counters import as_float

        spec = hardware.gpu_spec(name, as_float(mem)) if name else None  # a memory size beyond float: unknown
        d = pb.Device(index=dev, kind=kind, name=name or f"{kind} device {dev}", simulated=False)
        if spec is not None:
            d.spec.CopyFrom(spec)
        else:
            unknown.append(f"{dev}:{name or 'no deviceProperties entry'}")
        for k, v in _props(p).items():
            d.properties[k] = v
        tracks.device_index[dev] = len(b.header.devices)
        b.header.devices.append(d)
    return unknown
