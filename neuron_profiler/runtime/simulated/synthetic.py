"""Synthetic host op streams for tests and benches of the simulated runtime (no torch needed)."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from neuron_profiler.hardware import Target
from neuron_profiler.trace import TraceBuilder, make_header

__all__ = ["op", "comm", "host_ops_builder", "random_op_stream", "simulate"]


def _enc(v: Any) -> str:
    return v if isinstance(v, str) else ("" if v is None else json.dumps(v))


def op(name: str, start_ns: int, dur_ns: int, shapes: Any = None, dtypes: Any = None, *, track: str = "main",
       category: str = "cpu_op", flops: int = 0, args: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One host op row; ``shapes`` / ``dtypes`` lists are JSON-encoded like Kineto's Input Dims / Input type
    (pass a str to store it verbatim, e.g. garbage)."""
    return {"name": name, "start_ts": int(start_ns), "duration_ns": int(dur_ns), "input_shapes": _enc(shapes),
            "input_dtypes": _enc(dtypes), "category": category, "flops": int(flops), "track": track,
            "args": json.dumps(dict(args)) if args else ""}


def comm(name: str, start_ns: int, dur_ns: int, nelems: int, group_size: int, dtype: str = "Float", seq: int = 0,
         out_nelems: int | None = None, pg: str = "0", track: str = "main",
         async_op: bool | None = None) -> dict[str, Any]:
    """A ``record_param_comms`` host op with Kineto's collective args (``async_op``: capture's ``ASYNC_KEY``;
    None = absent, as in imported traces)."""
    args: dict[str, Any] = {
        "Collective name": name, "Process Group Name": pg, "Process Group Ranks": list(range(group_size)),
        "Group size": group_size, "Seq": seq, "In msg nelems": nelems,
        "Out msg nelems": nelems if out_nelems is None else out_nelems, "dtype": dtype}
    if async_op is not None:
        args["Async op"] = bool(async_op)
    return op("record_param_comms", start_ns, dur_ns, [[nelems]], [dtype], track=track, args=args)


def host_ops_builder(rows: Iterable[Mapping[str, Any]], *, world_size: int = 1, rank: int = 0) -> TraceBuilder:
    """A TraceBuilder holding one process track, one thread track per distinct ``track`` and the rows."""
    rows = list(rows)
    b = TraceBuilder(make_header("neuron_profiler.tests", source_format="synthetic", rank=rank,
                                 world_size=world_size, process_id=1234, instance_id="test-host"))
    inst = b.add_track("instance", "test-host")
    proc = b.add_track("process", f"rank {rank}", inst, pid=1234, rank=rank)
    tracks: dict[str, int] = {}
    for r in rows:
        if r["track"] not in tracks:
            tracks[r["track"]] = b.add_track("thread", r["track"], proc, pid=1234, tid=len(tracks) + 1, rank=rank)
    if rows:
        cols = {k: [r[k] for r in rows] for k in rows[0] if k != "track"}
        cols["track"] = [tracks[r["track"]] for r in rows]
        b.add_rows("host_ops", cols)
    return b


_MIX = [
    ("aten::mm", [[256, 512], [512, 1024]], ["c10::BFloat16"] * 2),
    ("aten::add", [[256, 1024], [256, 1024], []], ["c10::BFloat16", "c10::BFloat16", "Scalar"]),
    ("aten::gelu", [[256, 1024]], ["c10::BFloat16"]),
    ("aten::_softmax", [[8, 128, 128], [], []], ["float", "Scalar", "Scalar"]),
    ("aten::native_layer_norm", [[256, 1024], [1024], [1024], [1024], []], ["float"] * 4 + ["Scalar"]),
    ("aten::embedding", [[50000, 512], [8, 128]], ["float", "long int"]),
    ("aten::view", [[256, 1024], []], ["float", "ScalarList"]),
    ("aten::sum", [[256, 1024], [], []], ["float", "ScalarList", "Scalar"]),
]


def random_op_stream(n: int, seed: int = 0, gap_ns: int = 2000) -> list[dict[str, Any]]:
    """``n`` leaf ops cycling through a transformer-like mix, with host dispatch gaps."""
    rng = np.random.default_rng(seed)
    rows, t = [], 1_000_000
    for i in range(n):
        name, shapes, dtypes = _MIX[i % len(_MIX)]
        d = int(rng.integers(2000, 20000))
        rows.append(op(name, t, d, shapes, dtypes))
        t += d + gap_ns
    return rows


def simulate(rows: Iterable[Mapping[str, Any]], target: Target | str = Target.TRN2, *, rank: int = 0,
             world_size: int | None = None, **runtime_kw: Any) -> TraceBuilder:
    """Build the host ops of ``rows`` and run the simulated runtime on them; returns the filled builder."""
    from neuron_profiler.runtime.simulated.runtime import SimulatedRuntime

    b = host_ops_builder(rows, rank=rank, world_size=world_size or rank + 1)
    SimulatedRuntime(Target.parse(target), rank=rank, **runtime_kw).emit(b, b.table("host_ops"))
    return b
