"""A synthetic Neuron-style trace for tests and the explorer benchmark (not a simulator: random but
well-formed events with the track layout of a real capture). Written with ``TraceWriter`` so millions of
events stay in bounded memory."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from neuron_profiler.trace import TraceWriter, make_header

ENGINES = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
OPCODES = {"Tensor": "LoadStationary", "TensorMatrix": "MATMUL", "Vector": "TensorTensor",
           "Scalar": "ACTIVATE", "GpSimd": "Iota", "Sync": "SemaphoreWait"}
OPS = ("aten::mm", "aten::add", "aten::gelu", "aten::softmax", "aten::layer_norm", "aten::copy_")
MODULES = ("GPT.blocks.0.attn", "GPT.blocks.0.mlp", "GPT.blocks.1.attn", "GPT.blocks.1.mlp", "GPT.lm_head")


def write_synthetic(path: str | Path, n_instructions: int = 20_000, *, rank: int = 0, world_size: int = 1,
                    cores: int = 2, steps: int = 2, seed: int = 0, chunk_rows: int = 65536) -> Path:
    """Write a trace with ``steps`` ProfilerSteps of host ops (one thread), ``n_instructions`` engine
    instructions over ``cores`` NeuronCores, DMA on two queues per core, one all_reduce per step on a
    CC core, MFU / DMA counters and launch flows. Returns the path."""
    from neuron_profiler.hardware import neuron_device

    rng = np.random.default_rng(seed + rank)
    hdr = make_header("explorer.synthetic", source_format="synthetic", rank=rank, world_size=world_size,
                      simulated=True, devices=[neuron_device("trn2", 0)], run_id="synthetic",
                      metadata={"name": "synthetic"})
    t0 = 1_000_000_000
    n_ops_per_step = max(4, min(2000, n_instructions // 50))
    step_ns = max(1_000_000, n_instructions * 400 // max(steps * cores, 1))
    with TraceWriter(path, hdr, chunk_rows=chunk_rows) as w:
        tid = 0

        def track(kind, name, parent=-1, **kw):
            nonlocal tid
            cols = {"parent": [parent], "kind": [kind], "name": [name], "sort_index": [tid]}
            cols.update({k: [v] for k, v in kw.items()})
            w.append("tracks", cols)
            tid += 1
            return tid - 1

        proc = track("process", f"rank {rank}", rank=rank, pid=100 + rank)
        thread = track("thread", "thread 1 (python)", proc, pid=100 + rank, tid=1, rank=rank)
        dev = track("device", "device 0", proc, device=0, rank=rank)
        core_tracks = []
        for c in range(cores):
            core = track("core", f"nc{c}", dev, device=0, nc_idx=c, rank=rank)
            eng = {e: track("engine", e, core, device=0, nc_idx=c, rank=rank) for e in ENGINES}
            q = [track("dma_queue", n, core, device=0, nc_idx=c, rank=rank) for n in ("qSyncIO0", "qGpSimdDynamic")]
            core_tracks.append((eng, q))
        cc = track("cc_core", "CC-core 0", dev, device=0, rank=rank)
        mfu = track("counter", "Estimated Instant MFU", dev, device=0, rank=rank, unit="percent")
        dmat = track("counter", "DMA Throughput", dev, device=0, rank=rank, unit="bytes/s")

        # host ops: ProfilerStep#k containing module ops
        host_rows = []
        host_start = []
        for s in range(steps):
            st = t0 + s * step_ns
            w.append("host_ops", {"track": [thread], "name": [f"ProfilerStep#{s}"], "category": ["user_annotation"],
                                  "start_ts": [st], "duration_ns": [step_ns - 1000]})
            slot = (step_ns - 2000) // n_ops_per_step
            starts = st + 500 + np.arange(n_ops_per_step) * slot
            names = np.array(OPS)[rng.integers(0, len(OPS), n_ops_per_step)]
            mods = np.array(MODULES)[rng.integers(0, len(MODULES), n_ops_per_step)]
            first = w.append("host_ops", {"track": thread, "name": names, "category": "cpu_op", "start_ts": starts,
                                          "duration_ns": np.full(n_ops_per_step, max(slot // 2, 1)),
                                          "module": mods, "input_shapes": "[[512,512],[512,512]]",
                                          "input_dtypes": "[\"bfloat16\",\"bfloat16\"]"})
            host_rows.append(np.arange(first, first + n_ops_per_step))
            host_start.append(starts)
        host_rows_a = np.concatenate(host_rows)
        host_start_a = np.concatenate(host_start)
        # instructions, in batches to bound memory
        per_track = max(1, n_instructions // (cores * len(ENGINES)))
        span = steps * step_ns
        batch = 200_000
        dt = np.dtype("int64")
        for c, (eng, queues) in enumerate(core_tracks):
            for e, trk in eng.items():
                done = 0
                while done < per_track:
                    n = min(batch, per_track - done)
                    slot = span / per_track
                    start = (t0 + (done + np.arange(n)) * slot + rng.uniform(0, slot * 0.3, n)).astype(dt)
                    dur = np.maximum((slot * rng.uniform(0.2, 0.65, n)).astype(dt), 1)
                    fop = host_rows_a[np.clip(np.searchsorted(host_start_a, start) - 1, 0, len(host_rows_a) - 1)]
                    first = w.append("instructions", {
                        "track": trk, "start_ts": start, "duration_ns": dur, "engine": e, "opcode": OPCODES[e],
                        "name": np.array(OPS)[rng.integers(0, len(OPS), n)], "framework_op": fop,
                        "raw_flops": (rng.integers(1, 64, n) * (1 << 20) if e == "TensorMatrix" else np.zeros(n, dt)),
                        "hbm_read_bytes": rng.integers(0, 1 << 16, n), "hbm_write_bytes": rng.integers(0, 1 << 15, n),
                        "dtype": "bfloat16"})
                    if done == 0 and c == 0:
                        k = min(n, 200)
                        w.append("flows", {"src_table": "host_ops", "src_row": fop[:k], "dst_table": "instructions",
                                           "dst_row": np.arange(first, first + k), "kind": "launch"})
                    done += n
            for qi, q in enumerate(queues):
                n = max(10, per_track // 4)
                start = np.sort(rng.integers(t0, t0 + span, n))
                w.append("dma", {"track": q, "start_ts": start, "duration_ns": rng.integers(200, 4000, n),
                                 "transfer_bytes": rng.choice([2048, 8192, 65536, 262144], n), "source": "HBM",
                                 "dest": "SBUF", "queue_type": "data" if qi == 0 else "software_dynamic",
                                 "variable": "unknown"})
        for s in range(steps):
            st = t0 + s * step_ns + step_ns * 3 // 4 + int(rng.integers(0, step_ns // 20))
            w.append("collectives", {"track": [cc], "start_ts": [st], "duration_ns": [step_ns // 8],
                                     "operation": ["all_reduce"], "algorithm": ["ring"], "process_group": ["default"],
                                     "replica_group": [",".join(map(str, range(world_size)))],
                                     "group_size": [world_size], "sequence_number": [s], "input_size": [1 << 24],
                                     "output_size": [1 << 24], "num_elements": [1 << 23], "dtype": ["bfloat16"]})
        ts = np.linspace(t0, t0 + span, 400).astype(dt)
        w.append("counters", {"track": mfu, "ts": ts, "value": rng.uniform(10, 60, len(ts))})
        w.append("counters", {"track": dmat, "ts": ts, "value": rng.uniform(1e9, 5e10, len(ts))})
    return Path(path)
