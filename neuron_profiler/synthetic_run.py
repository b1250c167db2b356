"""Large synthetic multi-rank runs built on the simulated runtime, with injected stragglers and slow links.

``write_synthetic_run("runs/", ranks=64, events_per_rank=500_000, stragglers={17: 1.5}, slow_links={42: 3.0})``
writes one trace per rank (``<out>/<run_id>/rankRRRRR_window000.nprof``) whose answer is known:
- every rank runs the same training steps (a transformer-like op mix), a tensor-parallel all-reduce per
  layer inside its TP group (``tp_size`` consecutive ranks) and a data-parallel gradient all-reduce per step
  over all ranks, then an optimizer step that waits for it and a ``loss.item()``;
- a straggler computes ``slowdown`` times more per step (an uneven shard: its ops see ``slowdown`` x the
  tokens) and its host dispatches ``slowdown`` times slower, so it arrives late at every collective and the
  others wait for it;
- a slow link on a rank makes the collectives of that rank's TP group ``factor`` times slower.
The ranks are simulated together: a collective runs on every member once the last member arrives, and its
duration includes slow links, so waits and skews are consistent across the files (a few fixed-point passes).
Each rank's collective row starts when that rank arrived at it (as an NCCL kernel in a Kineto trace: a rank
that arrives early is blocked in the collective until the last member arrives), so the arrival skew and the
wait are in the files; the simulated runtime alone writes the start of the transfer (every member at once).
The truth is returned and written as ``<out>/<run_id>/truth.json``.

CLI: ``python -m neuron_profiler.synthetic_run OUT --ranks 64 --events 500000 --straggler 17:1.5
--slow-link 42:3``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from neuron_profiler.hardware import Target, host_model_params
from neuron_profiler.runtime.simulated import SimulatedRuntime
from neuron_profiler.runtime.simulated.synthetic import comm, host_ops_builder, op

__all__ = ["write_synthetic_run", "step_ops"]

BF16 = "c10::BFloat16"


def step_ops(layers: int, hidden: int, tokens: int, tp: int, ranks: int, step: int, t0: int,
             tp_group: list[int], tp_seq0: int, work: float = 1.0) -> list[dict[str, Any]]:
    """Host ops of one training step of one rank (synthetic rows, 1 us apart on the capturing clock).
    ``work``: the rank's compute relative to the others (its ops see ``work`` x ``tokens`` tokens, rounded to
    128; the collectives keep their size, as every member must send the same message)."""
    f = 4 * hidden // tp
    msg_tokens, tokens = tokens, max(128, int(round(tokens * work / 128)) * 128)
    rows, t = [], t0
    rows.append(op(f"ProfilerStep#{step}", t, 0, category="user_annotation"))
    step_row = rows[-1]

    def add(r: dict[str, Any]) -> None:
        nonlocal t
        t += 1000
        r["start_ts"] = t
        rows.append(r)
    x = [[tokens, hidden]]
    seq = tp_seq0
    pg_tp = "tp" + "_".join(map(str, tp_group[:1]))
    for _ in range(layers):
        for phase in ("fwd", "bwd"):
            mult = 1 if phase == "fwd" else 2
            for _ in range(mult):
                add(op("aten::mm", 0, 500, [[tokens, hidden], [hidden, 3 * hidden // tp]], [BF16, BF16]))
                add(op("aten::_softmax", 0, 500, [[tokens // 128, 128, 128], [], []], [BF16, "Scalar", "Scalar"]))
                add(op("aten::mm", 0, 500, [[tokens, hidden // tp], [hidden // tp, hidden]], [BF16, BF16]))
            add(comm("allreduce", 0, 500, msg_tokens * hidden, tp, "c10::BFloat16", seq=seq, pg=pg_tp)
                | {"args": json.dumps({"Collective name": "allreduce", "Process Group Name": pg_tp,
                                       "Process Group Ranks": tp_group, "Group size": tp, "Seq": seq,
                                       "In msg nelems": msg_tokens * hidden,
                                       "Out msg nelems": msg_tokens * hidden,
                                       "dtype": "c10::BFloat16"})})
            seq += 1
            add(op("aten::native_layer_norm", 0, 500, [x[0], [hidden], [hidden], [hidden], []],
                   [BF16] * 4 + ["Scalar"]))
            for _ in range(mult):
                add(op("aten::mm", 0, 500, [[tokens, hidden], [hidden, f]], [BF16, BF16]))
                add(op("aten::gelu", 0, 500, [[tokens, f]], [BF16]))
                add(op("aten::mm", 0, 500, [[tokens, f], [f, hidden]], [BF16, BF16]))
            add(op("aten::add", 0, 500, [x[0], x[0], []], [BF16, BF16, "Scalar"]))
    grads = layers * 4 * hidden * hidden // tp
    add(comm("allreduce", 0, 500, grads, ranks, "c10::BFloat16", seq=step, pg="dp"))
    add(op("Optimizer.step#AdamW.step", 0, 500, category="user_annotation"))
    opt = rows[-1]
    add(op("aten::_foreach_add_", 0, 500, [[[grads]], [[grads]]], ["TensorList", "TensorList"]))
    opt["duration_ns"] = 1000
    add(op("aten::_local_scalar_dense", 0, 10, [[]], ["float"]))
    step_row["duration_ns"] = t + 1000 - step_row["start_ts"]
    return rows


def _rank_rows(layers: int, hidden: int, tokens: int, tp: int, ranks: int, steps: int, rank: int,
               work: float = 1.0) -> list[dict]:
    group = list(range(rank - rank % tp, rank - rank % tp + tp))
    rows, t = [], 1_000_000
    per_step = 2 * layers
    for s in range(steps):
        r = step_ops(layers, hidden, tokens, tp, ranks, s, t, group, s * per_step, work)
        rows += r
        t = r[-1]["start_ts"] + 100_000
    return rows


def _emit_with_arrivals(rt: SimulatedRuntime, b: Any, ranks: int) -> None:
    """Emit the rank's device events, then start each collective row at the rank's arrival (see the module
    docstring): the end stays where the runtime put it, the duration grows by the wait."""
    prog, _, proj, _ = rt.simulate(b.table("host_ops"), ranks)
    c = prog.collectives.iloc[proj.c_index] if len(proj.c_index) else prog.collectives
    arrival = {(pg, int(seq)): int(a) for pg, seq, a in
               zip(c["process_group"].astype(str), c["sequence_number"], proj.c_arrival)}
    rt.emit(b, b.table("host_ops"))
    cc = b.table("collectives")
    if not len(cc):
        return
    start = cc["start_ts"].to_numpy(np.int64)
    end = start + cc["duration_ns"].to_numpy(np.int64)
    arr = np.array([arrival.get((pg, int(seq)), s) for pg, seq, s in
                    zip(cc["process_group"].astype(str), cc["sequence_number"], start)], dtype=np.int64)
    new_start = np.minimum(arr, start)
    b.set_columns("collectives", {"start_ts": new_start, "duration_ns": end - new_start})


def write_synthetic_run(out_dir: str | os.PathLike, ranks: int = 8, events_per_rank: int = 50_000, *,
                        target: Target | str = Target.TRN2, tp_size: int = 4, layers: int = 4, hidden: int = 2048,
                        tokens: int = 2048, stragglers: dict[int, float] | None = None,
                        slow_links: dict[int, float] | None = None, run_id: str = "synthetic_run",
                        passes: int = 3, progress: bool = False) -> dict[str, Any]:
    """Write the run (see the module docstring); returns the truth (stragglers, slow links, groups, paths)."""
    if ranks < 1 or tp_size < 1 or ranks % tp_size:
        raise ValueError(f"ranks ({ranks}) must be a positive multiple of tp_size ({tp_size})")
    target = Target.parse(target)
    stragglers, slow_links = dict(stragglers or {}), dict(slow_links or {})
    for r in list(stragglers) + list(slow_links):
        if not 0 <= r < ranks:
            raise ValueError(f"rank {r} is outside the run (0..{ranks - 1})")
    one = host_ops_builder(_rank_rows(layers, hidden, tokens, tp_size, ranks, 1, 0), world_size=ranks)
    SimulatedRuntime(target).emit(one, one.table("host_ops"))  # one step's events size the run
    per_step = one.rows("instructions") + one.rows("dma") + one.rows("collectives")
    steps = max(1, round(events_per_rank / max(per_step, 1)))
    host = {k: v[0] for k, v in host_model_params().items()}
    out = Path(out_dir) / run_id
    out.mkdir(parents=True, exist_ok=True)
    builders = [host_ops_builder(_rank_rows(layers, hidden, tokens, tp_size, ranks, steps, r,
                                            stragglers.get(r, 1.0)), rank=r,
                                 world_size=ranks) for r in range(ranks)]
    runtimes = []
    for r in range(ranks):
        slow = stragglers.get(r, 1.0)
        over = {k: host[k] * slow for k in ("eager_op_dispatch_ns", "kernel_launch_ns")} if slow != 1.0 else None
        runtimes.append(SimulatedRuntime(target, rank=r, host_model=over))
    groups = {f"tp{g}": list(range(g, g + tp_size)) for g in range(0, ranks, tp_size)}
    groups["dp"] = list(range(ranks))
    factors = {pg: max([slow_links.get(m, 1.0) for m in members if pg != "dp"] or [1.0])
               for pg, members in groups.items()}
    constraints: dict[tuple[str, int], tuple[float, float]] = {}
    for it in range(passes):
        arrivals: dict[tuple[str, int], float] = {}
        for r in range(ranks):
            rt = runtimes[r]
            rt.collective_constraints = constraints
            prog, _, proj, _ = rt.simulate(builders[r].table("host_ops"), ranks)
            c = prog.collectives.iloc[proj.c_index] if len(proj.c_index) else prog.collectives
            for pg, seq, arr in zip(c["process_group"].astype(str), c["sequence_number"].astype(int), proj.c_arrival):
                arrivals[(pg, seq)] = max(arrivals.get((pg, seq), -np.inf), float(arr))
        constraints = {k: (a, factors.get(k[0], 1.0)) for k, a in arrivals.items()}
        if progress:
            print(f"synthetic run: pass {it + 1}/{passes} done")
    paths = []
    for r in range(ranks):
        b = builders[r]
        b.header.run_id = run_id
        runtimes[r].collective_constraints = constraints
        _emit_with_arrivals(runtimes[r], b, ranks)
        paths.append(b.write(out / f"rank{r:05d}_window000.nprof"))
        builders[r] = None  # type: ignore[call-overload]  # free the events of a written rank
        if progress and (r + 1) % max(1, ranks // 10) == 0:
            print(f"synthetic run: {r + 1}/{ranks} ranks written")
    truth = {"ranks": ranks, "steps": steps, "target": target.value, "tp_size": tp_size, "groups": groups,
             "stragglers": {str(k): v for k, v in stragglers.items()},
             "slow_links": {str(k): v for k, v in slow_links.items()},
             "slow_groups": sorted(pg for pg, f in factors.items() if f > 1.0), "paths": [str(p) for p in paths]}
    (out / "truth.json").write_text(json.dumps(truth, indent=2))
    return truth


def _rank_factor(text: str) -> tuple[int, float]:
    rank, _, factor = text.partition(":")
    try:
        return int(rank), float(factor or "2")
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected RANK:FACTOR such as 17:1.5, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m neuron_profiler.synthetic_run OUT``: write a synthetic run (see the module docstring)."""
    p = argparse.ArgumentParser(prog="python -m neuron_profiler.synthetic_run", description=__doc__.splitlines()[0])
    p.add_argument("out", help="folder to write <run-id>/rankRRRRR_window000.nprof and truth.json into")
    p.add_argument("--ranks", type=int, default=8)
    p.add_argument("--events", type=int, default=50_000, help="device events per rank (about)")
    p.add_argument("--tp-size", type=int, default=4, help="ranks per tensor-parallel group")
    p.add_argument("--straggler", type=_rank_factor, action="append", default=[], metavar="RANK:FACTOR")
    p.add_argument("--slow-link", type=_rank_factor, action="append", default=[], metavar="RANK:FACTOR")
    p.add_argument("--run-id", default="synthetic_run")
    p.add_argument("--target", default="trn2")
    a = p.parse_args(argv)
    try:
        truth = write_synthetic_run(a.out, a.ranks, a.events, target=a.target, tp_size=a.tp_size,
                                    stragglers=dict(a.straggler), slow_links=dict(a.slow_link), run_id=a.run_id,
                                    progress=True)
    except (ValueError, OSError) as e:
        print(f"synthetic_run: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {truth['ranks']} ranks x {truth['steps']} steps to {Path(truth['paths'][0]).parent}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
