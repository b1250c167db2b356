"""Synthetic Neuron-style traces for tests, benchmarks and demos, written through ``TraceWriter`` so millions
of events stay in bounded memory.

Not a simulator (that is ``neuron_profiler.runtime.simulated``): random but well-formed events with the
track layout of a real capture. Per engine track, instructions sit in consecutive, non-overlapping slots.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neuron_profiler.hardware import neuron_device
from neuron_profiler.trace import TraceWriter, make_header

ENGINES = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
OPCODES = {"Tensor": "LoadStationary", "TensorMatrix": "MATMUL", "Vector": "TensorTensor",
           "Scalar": "ACTIVATE", "GpSimd": "Iota", "Sync": "SemaphoreWait"}
OPS = ("aten::mm", "aten::add", "aten::gelu", "aten::softmax", "aten::layer_norm", "aten::copy_")
MODULES = ("GPT.blocks.0.attn", "GPT.blocks.0.mlp", "GPT.blocks.1.attn", "GPT.blocks.1.mlp", "GPT.lm_head")
DMA_QUEUES = ("qSyncIO0", "qGpSimdDynamic", "qSyncIO1", "qVectorDynamic")

_BATCH = 200_000  # rows generated and appended at a time (bounds memory)


@dataclass
class _Layout:
    """Sizes and times shared by the parts of one synthetic trace."""

    world_size: int
    steps: int
    n_ops_per_step: int
    step_ns: int
    t0: int = 1_000_000_000

    @property
    def span(self) -> int:
        return self.steps * self.step_ns


def write_synthetic_trace(path: str | Path, n_instructions: int = 20_000, *, rank: int = 0, world_size: int = 1,
                          cores: int = 2, steps: int = 2, seed: int = 0, chunk_rows: int = 65536,
                          host_ops_per_step: int | None = None, dma_queues: int = 2, n_dma: int | None = None,
                          collectives_per_step: int = 1, fp32_fraction: float = 0.0,
                          transpose_fraction: float = 0.0) -> Path:
    """Write a trace and return its path.

    It holds ``steps`` ProfilerSteps of host ops on one thread (``host_ops_per_step`` aten ops with module
    paths and shapes; default n_instructions / 50, within [4, 2000]), ``n_instructions`` engine instructions
    over ``cores`` NeuronCores x 6 engines, DMA transfers on ``dma_queues`` queues per core (``n_dma`` in
    total; default a quarter of one engine track's count per queue), ``collectives_per_step`` all_reduces
    per step on a CC core, MFU and DMA-throughput counters, and launch flows. ``fp32_fraction`` of the
    instructions are float32 (bfloat16 otherwise) and ``transpose_fraction`` of the matmuls are TRANSPOSEs.
    """
    if not 1 <= dma_queues <= len(DMA_QUEUES):
        raise ValueError(f"dma_queues must be in [1, {len(DMA_QUEUES)}], got {dma_queues}")
    rng = np.random.default_rng(seed + rank)
    hdr = make_header("neuron_profiler.synthetic_trace", source_format="synthetic", rank=rank,
                      world_size=world_size, simulated=True, devices=[neuron_device("trn2", 0)], run_id="synthetic",
                      metadata={"name": "synthetic"})
    lay = _Layout(world_size=world_size, steps=steps,
                  n_ops_per_step=host_ops_per_step or max(4, min(2000, n_instructions // 50)),
                  step_ns=max(1_000_000, n_instructions * 400 // max(steps * cores, 1)))
    per_track = max(1, n_instructions // (cores * len(ENGINES)))
    per_queue = max(10, per_track // 4) if n_dma is None else max(1, n_dma // (cores * dma_queues))
    with TraceWriter(path, hdr, chunk_rows=chunk_rows) as w:
        tracks = _Tracks(w)
        proc = tracks.add("process", f"rank {rank}", rank=rank, pid=100 + rank)
        thread = tracks.add("thread", "thread 1 (python)", proc, pid=100 + rank, tid=1, rank=rank)
        dev = tracks.add("device", "device 0", proc, device=0, rank=rank)
        core_tracks = []
        for c in range(cores):
            core = tracks.add("core", f"nc{c}", dev, device=0, nc_idx=c, rank=rank)
            eng = {e: tracks.add("engine", e, core, device=0, nc_idx=c, rank=rank) for e in ENGINES}
            qs = [tracks.add("dma_queue", n, core, device=0, nc_idx=c, rank=rank) for n in DMA_QUEUES[:dma_queues]]
            core_tracks.append((eng, qs))
        cc = tracks.add("cc_core", "CC-core 0", dev, device=0, rank=rank)
        mfu = tracks.add("counter", "Estimated Instant MFU", dev, device=0, rank=rank, unit="percent")
        dmat = tracks.add("counter", "DMA Throughput", dev, device=0, rank=rank, unit="bytes/s")

        host_rows, host_start = _host_ops(w, rng, lay, thread)
        for c, (eng, queues) in enumerate(core_tracks):
            for e, trk in eng.items():
                _engine_instructions(w, rng, lay, trk, e, per_track, host_rows, host_start, flows=c == 0,
                                     fp32_fraction=fp32_fraction, transpose_fraction=transpose_fraction)
            for qi, q in enumerate(queues):
                _dma(w, rng, lay, q, per_queue, "data" if qi == 0 else "software_dynamic")
        _collectives(w, rng, lay, cc, collectives_per_step)
        ts = np.linspace(lay.t0, lay.t0 + lay.span, 400).astype(np.int64)
        w.append("counters", {"track": mfu, "ts": ts, "value": rng.uniform(10, 60, len(ts))})
        w.append("counters", {"track": dmat, "ts": ts, "value": rng.uniform(1e9, 5e10, len(ts))})
    return Path(path)


class _Tracks:
    """Appends tracks one by one, numbered in order (``sort_index`` = id)."""

    def __init__(self, w: TraceWriter) -> None:
        self.w, self.n = w, 0

    def add(self, kind: str, name: str, parent: int = -1, **kw: object) -> int:
        cols = {"parent": [parent], "kind": [kind], "name": [name], "sort_index": [self.n]}
        cols.update({k: [v] for k, v in kw.items()})
        self.w.append("tracks", cols)
        self.n += 1
        return self.n - 1


def _host_ops(w: TraceWriter, rng: np.random.Generator, lay: _Layout, thread: int) -> tuple[np.ndarray, np.ndarray]:
    """ProfilerStep#k spans containing module ops; returns (row, start) of every op."""
    host_rows, host_start = [], []
    n = lay.n_ops_per_step
    for s in range(lay.steps):
        st = lay.t0 + s * lay.step_ns
        w.append("host_ops", {"track": [thread], "name": [f"ProfilerStep#{s}"], "category": ["user_annotation"],
                              "start_ts": [st], "duration_ns": [lay.step_ns - 1000]})
        slot = (lay.step_ns - 2000) // n
        starts = st + 500 + np.arange(n) * slot
        names = np.array(OPS)[rng.integers(0, len(OPS), n)]
        mods = np.array(MODULES)[rng.integers(0, len(MODULES), n)]
        first = w.append("host_ops", {"track": thread, "name": names, "category": "cpu_op", "start_ts": starts,
                                      "duration_ns": np.full(n, max(slot // 2, 1)),
                                      "module": mods, "input_shapes": "[[512,512],[512,512]]",
                                      "input_dtypes": "[\"bfloat16\",\"bfloat16\"]"})
        host_rows.append(np.arange(first, first + n))
        host_start.append(starts)
    return np.concatenate(host_rows), np.concatenate(host_start)


def _engine_instructions(w: TraceWriter, rng: np.random.Generator, lay: _Layout, trk: int, engine: str,
                         per_track: int, host_rows: np.ndarray, host_start: np.ndarray, *, flows: bool,
                         fp32_fraction: float, transpose_fraction: float) -> None:
    """``per_track`` instructions of one engine track in consecutive slots, each under the host op that
    starts last before it; with ``flows``, launch flows to the first 200."""
    dt = np.dtype("int64")
    ins_slot = lay.span / per_track  # ns per instruction slot of an engine track (float)
    mm = engine == "TensorMatrix"
    for done in range(0, per_track, _BATCH):
        n = min(_BATCH, per_track - done)
        start = (lay.t0 + (done + np.arange(n)) * ins_slot + rng.uniform(0, ins_slot * 0.3, n)).astype(dt)
        dur = np.maximum((ins_slot * rng.uniform(0.2, 0.65, n)).astype(dt), 1)
        fop = host_rows[np.clip(np.searchsorted(host_start, start) - 1, 0, len(host_rows) - 1)]
        first = w.append("instructions", {
            "track": trk, "start_ts": start, "duration_ns": dur, "engine": engine, "opcode": OPCODES[engine],
            "name": np.array(OPS)[rng.integers(0, len(OPS), n)], "framework_op": fop,
            "raw_flops": rng.integers(1, 64, n) * (1 << 20) if mm else np.zeros(n, dt),
            "hbm_read_bytes": rng.integers(0, 1 << 16, n), "hbm_write_bytes": rng.integers(0, 1 << 15, n),
            "dtype": _mix(rng, n, fp32_fraction, "float32", "bfloat16"),
            "tensor_instruction_type": _mix(rng, n, transpose_fraction if mm else 0.0, "TRANSPOSE", "")})
        if done == 0 and flows:
            k = min(n, 200)
            w.append("flows", {"src_table": "host_ops", "src_row": fop[:k], "dst_table": "instructions",
                               "dst_row": np.arange(first, first + k), "kind": "launch"})


def _dma(w: TraceWriter, rng: np.random.Generator, lay: _Layout, queue: int, per_queue: int,
         queue_type: str) -> None:
    """``per_queue`` HBM -> SBUF transfers at random times on one queue."""
    for done in range(0, per_queue, _BATCH):
        n = min(_BATCH, per_queue - done)
        start = np.sort(rng.integers(lay.t0, lay.t0 + lay.span, n))
        w.append("dma", {"track": queue, "start_ts": start, "duration_ns": rng.integers(200, 4000, n),
                         "transfer_bytes": rng.choice([2048, 8192, 65536, 262144], n), "source": "HBM",
                         "dest": "SBUF", "queue_type": queue_type, "variable": "unknown"})


def _collectives(w: TraceWriter, rng: np.random.Generator, lay: _Layout, cc: int, per_step: int) -> None:
    """``per_step`` all_reduces over the whole world in the last 3/4 of each step."""
    seq = 0
    gap = lay.step_ns * 3 // 4 // per_step
    for s in range(lay.steps):
        for k in range(per_step):
            st = lay.t0 + s * lay.step_ns + gap * (k + 1) + int(rng.integers(0, max(gap // 15, 1)))
            w.append("collectives", {
                "track": [cc], "start_ts": [st], "duration_ns": [lay.step_ns // (8 * per_step)],
                "operation": ["all_reduce"], "algorithm": ["ring"], "process_group": ["default"],
                "replica_group": [",".join(map(str, range(lay.world_size)))], "group_size": [lay.world_size],
                "sequence_number": [seq], "input_size": [1 << 24], "output_size": [1 << 24],
                "num_elements": [1 << 23], "dtype": ["bfloat16"]})
            seq += 1


def _mix(rng: np.random.Generator, n: int, fraction: float, rare: str, common: str) -> np.ndarray | str:
    """``rare`` for about ``fraction`` of ``n`` rows, else ``common`` (no random draw when fraction is 0)."""
    if fraction <= 0:
        return common
    return np.where(rng.random(n) < fraction, rare, common)
