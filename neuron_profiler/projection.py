"""Projection of a trace onto a Trainium target: what a workload profiled elsewhere would do on a NeuronCore.

``project_trace("gpu_rank0.pt.trace.json.gz", target="trn2")`` reads a torch.profiler (Kineto) trace captured
on a GPU with ``record_shapes=True`` (or any ``.nprof``), keeps its host side (ops, annotations, threads) and
re-simulates it on the target with the simulated runtime: the host timeline is projected onto the target's
host, the device side is the simulated NeuronCore's. The source's own device events (GPU kernels, memcpys,
NCCL kernels) are not carried over; the source's devices are listed in the header metadata. Ops the model
could not price (no recorded shapes, unknown ops) are named in ``Header.simulation.unpriced_ops``.

Host work: the framework ops and the source's runtime calls (CUDA launches, synchronisations) are replaced by
the target's dispatch model; the rest of each host thread's time between its first and last op -- Python, data
loading, everything the profiler did not record as an op -- is work the target's host would also do, and is
kept: each such gap becomes a host op ``KEPT_HOST_WORK`` (category ``python_function``) that costs the target
host its measured duration. Sources captured with a simulated device (``simulation.source == "capture"``)
keep no gaps: their measured host ran the dry run, not the program. The header metadata
``projection_host_time`` says what was kept and what was replaced, in ns.
CLI: ``neuron-trace project TRACE --target trn2 -o out.nprof``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from neuron_profiler.hardware import Target
from neuron_profiler.trace import TraceBuilder
from neuron_profiler.trace.columns import columns_of

__all__ = ["project_trace", "HOST_TRACK_KINDS", "KEPT_HOST_WORK"]

#: track kinds of the host side that a projection keeps
HOST_TRACK_KINDS = ("instance", "process", "thread")
#: name of the host ops standing for the source host's work between its ops (Python), kept by a projection
KEPT_HOST_WORK = "host work between ops (kept from the source)"
#: host op categories that do not replace the source host's own time (frames, annotations, instants)
_NOT_REPLACED = ("python_function", "user_annotation", "cpu_instant_event", "Trace", "gpu_user_annotation")


def _source_builder(src: Path) -> TraceBuilder:
    if src.name.endswith((".json", ".json.gz")):
        from neuron_profiler.importers.kineto import load_kineto_builder
        return load_kineto_builder(src)
    from neuron_profiler.trace import read_trace
    tf = read_trace(src)
    b = TraceBuilder(type(tf.header).FromString(tf.header.SerializeToString()))
    for t in ("tracks", "host_ops"):
        if tf.row_counts.get(t):
            b.add_rows(t, tf.table(t))
    return b


def _host_side(src: TraceBuilder) -> tuple[TraceBuilder, dict[str, int]]:
    """A builder with only the source's host tracks and host ops (track ids remapped), measured times
    restored when the source was itself a projection; also per-table counts of what was left out."""
    hdr = type(src.header)()
    hdr.CopyFrom(src.header)
    sources = [f"{d.kind} {d.name}".strip() for d in hdr.devices]
    del hdr.devices[:]
    del hdr.clock_domains[:]
    del hdr.sync_points[:]
    hdr.ClearField("simulation")
    hdr.metadata["projected_from_devices"] = json.dumps(sources)
    out = TraceBuilder(hdr)
    tracks = src.table("tracks")
    keep = tracks[np.isin(tracks["kind"].astype(str).to_numpy(), HOST_TRACK_KINDS)]
    new_id = {int(r): i for i, r in enumerate(keep.index)}
    if len(keep):
        cols = {c: keep[c].to_numpy() for c in keep.columns}
        cols["parent"] = np.array([new_id.get(int(p), -1) for p in keep["parent"]], dtype=np.int64)
        out.add_rows("tracks", cols)
    host = src.table("host_ops")
    on_host = host["track"].isin(list(new_id)).to_numpy()
    host = host[on_host]
    if len(host):
        cols = {c: host[c].to_numpy() if c not in ("name", "category", "input_shapes", "input_dtypes", "module",
                                                    "stack", "args") else host[c].astype(str).to_numpy(dtype=object)
                for c in columns_of("host_ops") if c in host.columns}
        cols["track"] = np.array([new_id[int(t)] for t in host["track"]], dtype=np.int64)
        measured = host["measured_start_ts"].to_numpy(np.int64) if "measured_start_ts" in host.columns else None
        if measured is not None and (measured != 0).any():  # re-projecting a projection: start from what was measured
            cols["start_ts"] = np.where(measured != 0, measured, cols["start_ts"])
            cols["duration_ns"] = np.where(measured != 0, host["measured_duration_ns"].to_numpy(np.int64),
                                           cols["duration_ns"])
        cols.pop("measured_start_ts", None)
        cols.pop("measured_duration_ns", None)
        out.add_rows("host_ops", cols)
    left = {t: src.rows(t) for t in ("instructions", "dma", "collectives") if src.rows(t)}
    left["host_ops"] = int((~on_host).sum())
    return out, left


def _host_gaps(host) -> tuple[dict[str, np.ndarray], int]:
    """Rows for the source host's own work: per thread, the time between its first and last host op that no
    replaced row (a framework op, a runtime call) covers; and the ns those replaced rows took."""
    cat = host["category"].astype(str).to_numpy() if "category" in host.columns else np.full(len(host), "")
    replaced = ~np.isin(cat, _NOT_REPLACED)
    start = host["start_ts"].to_numpy(np.int64)
    end = start + host["duration_ns"].to_numpy(np.int64)
    track = host["track"].to_numpy(np.int64)
    gs: list[int] = []
    ge: list[int] = []
    gt: list[int] = []
    replaced_ns = 0
    for t in np.unique(track):
        on = track == t
        lo, hi = int(start[on].min()), int(end[on].max())
        m = on & replaced
        o = np.argsort(start[m], kind="stable")
        cursor = lo
        for a, z in zip(start[m][o].tolist(), end[m][o].tolist()):
            if a > cursor:
                gs.append(cursor)
                ge.append(a)
                gt.append(int(t))
            if z > cursor:
                replaced_ns += z - max(a, cursor)
                cursor = z
        if hi > cursor and m.any():
            gs.append(cursor)
            ge.append(hi)
            gt.append(int(t))
    n = len(gs)
    rows = {"name": np.full(n, KEPT_HOST_WORK, dtype=object), "category": np.full(n, "python_function", dtype=object),
            "start_ts": np.array(gs, np.int64), "duration_ns": np.array(ge, np.int64) - np.array(gs, np.int64),
            "track": np.array(gt, np.int64)}
    return rows, replaced_ns


def _projection_runtime(target: Target, **kw):
    """A simulated runtime whose program charges the host ops ``KEPT_HOST_WORK`` their measured duration (the
    simulator is imported here: reading traces does not need it)."""
    from neuron_profiler.runtime.simulated import SimulatedRuntime

    class ProjectionRuntime(SimulatedRuntime):
        def program(self, host_ops, p, graphs):
            prog = super().program(host_ops, p, graphs)
            kept = host_ops["name"].astype(str).to_numpy() == KEPT_HOST_WORK
            prog.self_ns[kept] = host_ops["duration_ns"].to_numpy(np.float64)[kept]
            return prog

    return ProjectionRuntime(target, **kw)


def project_trace(src: str | os.PathLike, target: Target | str = Target.TRN2, *, num_cores: int | None = None,
                  host_model: dict[str, float] | None = None, keep_host_work: bool | None = None) -> TraceBuilder:
    """The trace at ``src`` re-simulated on ``target`` (see the module docstring); nothing is written.
    ``keep_host_work``: keep the source host's time between its ops (default: unless the source was captured
    with a simulated device).

    Raises ``FileNotFoundError`` for a missing file, ``TraceFormatError`` for an unreadable one and
    ``ValueError`` for an unknown target or host-model parameter."""
    target = Target.parse(target)
    path = Path(src)
    if not path.exists():
        raise FileNotFoundError(f"no such trace: {path}")
    source = _source_builder(path)
    if keep_host_work is None:
        keep_host_work = not (source.header.simulated and source.header.simulation.source == "capture")
    b, left = _host_side(source)
    host = b.table("host_ops")
    kept = host["name"].astype(str).to_numpy() == KEPT_HOST_WORK
    gaps, replaced_ns = _host_gaps(host[~kept]) if len(host) else ({}, 0)
    if kept.any():  # re-projecting a projection: its kept rows are made again from what was measured
        b = _without_rows(b, kept)
    if keep_host_work and gaps and len(gaps["start_ts"]):
        b.add_rows("host_ops", gaps)
    kept_ns = int(gaps["duration_ns"].sum()) if keep_host_work and gaps else 0
    rt = _projection_runtime(target, num_cores=num_cores, rank=max(int(b.header.rank), 0), host_model=host_model)
    b.header.simulation.source = "projection"
    b.header.source_path = str(path)
    b.header.metadata["projection_dropped_source_rows"] = json.dumps(left, sort_keys=True)
    b.header.metadata["projection_host_time"] = json.dumps({
        "kept_host_work_ns": kept_ns,
        "dropped_host_work_ns": 0 if keep_host_work else int(gaps["duration_ns"].sum()) if gaps else 0,
        "replaced_by_dispatch_model_ns": int(replaced_ns)}, sort_keys=True)
    rt.emit(b, b.table("host_ops"))
    return b


def _without_rows(b: TraceBuilder, drop: np.ndarray) -> TraceBuilder:
    """A copy of ``b`` (header, tracks, host ops) without the host op rows ``drop``."""
    out = TraceBuilder(b.header)
    if b.rows("tracks"):
        out.add_rows("tracks", b.table("tracks"))
    host = b.table("host_ops")[~drop]
    out.add_rows("host_ops", {c: host[c].to_numpy() for c in host.columns})
    return out
