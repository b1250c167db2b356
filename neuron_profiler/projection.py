"""Projection of a trace onto a Trainium target: what a workload profiled elsewhere would do on a NeuronCore.

``project_trace("gpu_rank0.pt.trace.json.gz", target="trn2")`` reads a torch.profiler (Kineto) trace captured
on a GPU with ``record_shapes=True`` (or any ``.nprof``), keeps its host side (ops, annotations, threads) and
re-simulates it on the target with the simulated runtime: the host timeline is projected onto the target's
host, the device side is the simulated NeuronCore's. The source's own device events (GPU kernels, memcpys,
NCCL kernels) are not carried over; the source's devices are listed in the header metadata. Ops the model
could not price (no recorded shapes, unknown ops) are named in ``Header.simulation.unpriced_ops``.
CLI: ``neuron-trace project TRACE --target trn2 -o out.nprof``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from neuron_profiler.trace import TraceBuilder
from neuron_profiler.trace.columns import columns_of

__all__ = ["project_trace", "HOST_TRACK_KINDS"]

#: track kinds of the host side that a projection keeps
HOST_TRACK_KINDS = ("instance", "process", "thread")


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


def project_trace(src: str | os.PathLike, target: str = "trn2", *, num_cores: int | None = None,
                  host_model: dict[str, float] | None = None) -> TraceBuilder:
    """The trace at ``src`` re-simulated on ``target`` (see the module docstring); nothing is written.

    Raises ``FileNotFoundError`` for a missing file, ``TraceFormatError`` for an unreadable one and
    ``ValueError`` for an unknown target or host-model parameter."""
    from neuron_profiler.runtime.simulated import SimulatedRuntime

    path = Path(src)
    if not path.exists():
        raise FileNotFoundError(f"no such trace: {path}")
    b, left = _host_side(_source_builder(path))
    rt = SimulatedRuntime(target, num_cores=num_cores, rank=max(int(b.header.rank), 0), host_model=host_model)
    b.header.simulation.source = "projection"
    b.header.source_path = str(path)
    b.header.metadata["projection_dropped_source_rows"] = json.dumps(left, sort_keys=True)
    rt.emit(b, b.table("host_ops"))
    return b
