"""The simulated step is the step Trainium would run, on real captures: a TP=8 dry run's step grows by the exposed
time of its tensor-parallel all-reduces; a data-parallel step includes its gradient all-reduces; the ranks of a
2-rank run captured by ``neuron-profile capture`` from interpreter start-up share one origin."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

import analysis  # noqa: E402
from neuron_profiler.collectives import ASYNC_KEY  # noqa: E402
from neuron_profiler.runtime.simulated import SimulatedRuntime  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PROGRAM = Path(__file__).with_name("dist_train_program.py")


@pytest.fixture
def no_process_group():
    """The dry runs create a fake 8-rank default group: start without one, and leave none behind."""
    import torch.distributed as dist
    if dist.is_initialized():
        dist.destroy_process_group()
    yield
    if dist.is_initialized():
        dist.destroy_process_group()


def _simulate(host_ops, world: int, strip_collectives: bool = False):
    """(end of the last kernel or collective after the first host op, kernel intervals, collective intervals)
    of a window's host ops re-simulated on trn1 from their measured times, optionally without collectives."""
    h = host_ops.copy()
    h["start_ts"], h["duration_ns"] = h["measured_start_ts"], h["measured_duration_ns"]
    if strip_collectives:
        h["args"] = h["args"].astype(str).where(~h["args"].astype(str).str.contains("Collective name"), "")
    _, temps, proj, _ = SimulatedRuntime("trn1").simulate(h, world)
    k = np.stack([proj.k_start, proj.k_start + np.array([temps[s].duration for s in proj.k_sig])], axis=1)
    c = np.stack([proj.c_start, proj.c_start + proj.c_dur], axis=1)
    end = max(k[:, 1].max(), c[:, 1].max() if len(c) else 0)
    return float(end - proj.host_start.min()), k, c


def _exposed_ns(kernels: np.ndarray, colls: np.ndarray) -> float:
    """Time some collective runs while the compute core runs no kernel (an independent sweep over the
    intervals)."""
    ev = sorted([(s, 1, 0) for s, e in colls] + [(e, -1, 0) for s, e in colls]
                + [(s, 0, 1) for s, e in kernels] + [(e, 0, -1) for s, e in kernels])
    out, cc, kk, last = 0.0, 0, 0, None
    for t, dc, dk in ev:
        if last is not None and cc > 0 and kk == 0:
            out += t - last
        cc, kk, last = cc + dc, kk + dk, t
    return out


def test_tp8_dry_run_step_grows_by_its_tensor_parallel_all_reduces(tmp_path, no_process_group):
    from examples.llama_dryrun import LlamaConfig, dry_run_step
    c = LlamaConfig(layers=2)  # two layers of the Llama-7B TP=8 shard (seq 4096): device-bound
    path = dry_run_step(c, str(tmp_path), "trn1")
    h = read_trace(path).table("host_ops")
    coll = [json.loads(a) for a in h["args"].astype(str) if "Collective name" in a]
    assert len(coll) == 4 * c.layers and all(a[ASYNC_KEY] is False for a in coll)  # dist.all_reduce: blocking
    with_cc, kernels, colls = _simulate(h, c.tp)
    without, _, _ = _simulate(h, c.tp, strip_collectives=True)
    exposed = _exposed_ns(kernels, colls)
    # each all-reduce sits between the compute producing its input and the compute consuming its output
    assert exposed == pytest.approx(float((colls[:, 1] - colls[:, 0]).sum()), rel=0.02)
    assert with_cc - without == pytest.approx(exposed, rel=0.02)
    step = analysis.load(path).steps()["duration_ns"].iloc[0]
    assert step == pytest.approx(with_cc, rel=1e-3)  # the step ends when the device does


def _dp_program(out: str) -> Path:
    """A data-parallel step on a fake 8-rank group: each gradient all-reduced asynchronously as soon as it is
    accumulated (as DDP's buckets are), waited for before the optimizer step."""
    import torch
    import torch.distributed as dist
    import torch.nn as nn
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import neuron_profiler
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=8)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(2048, 2048) for _ in range(4)])   # 16 MiB gradients: all-reduces outlast the host
    works: list = []
    for prm in model.parameters():
        prm.register_post_accumulate_grad_hook(lambda q: works.append(dist.all_reduce(q.grad, async_op=True)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 2048)
    with neuron_profiler.profile(profile_output_dir=out, run_id="dp", target="trn1", runtime="simulated",
                                 with_modules=False,
                                 schedule=torch.profiler.schedule(wait=1, warmup=0, active=1)) as p:
        for _ in range(2):
            model(x).square().mean().backward()
            for w in works:
                w.wait()
            works.clear()
            opt.step()
            opt.zero_grad()
            p.step()
    return p.neuron_profiler.paths[0]


def test_dp_step_includes_its_gradient_all_reduces(tmp_path, no_process_group):
    path = _dp_program(str(tmp_path))
    t = analysis.load(path)
    st, c = t.steps(), t.table("collectives")
    assert len(st) == 1 and len(c) == 8
    h = t.table("host_ops")
    assert all(json.loads(a)[ASYNC_KEY] is True for a in h["args"].astype(str) if "Collective name" in a)
    c_end = int((c["start_ts"] + c["duration_ns"]).max())
    host_end = int(st["host_end_ts"].iloc[0])
    assert c_end > host_end  # the host left the step before its all-reduces finished
    assert st["end_ts"].iloc[0] > c_end  # the optimizer's update runs after them, inside the step
    assert st["duration_ns"].iloc[0] >= int(c["duration_ns"].sum())  # one group: they run back to back
    assert t.summary_dict()["step_time_mean_ns"] == st["duration_ns"].iloc[0]


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_INSPECT", "NEURON_PROFILE"))}
    env.update(KINETO_LOG_LEVEL="6", PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("launcher", ["torchrun", "spawn"])
def test_two_rank_capture_from_start_up_has_no_phantom_straggler(tmp_path, launcher):
    """``neuron-profile capture --active 2 -- torchrun ...`` (or mp.spawn): the first window opens at interpreter
    start-up, before the process group exists; both ranks still project from rank 0's window start, so an
    identical program arrives at its collectives together (skew < 1 % of a step; was 88 ms on a 0.8 ms step)."""
    cmd = ([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(PROGRAM)]
           if launcher == "torchrun" else [sys.executable, str(PROGRAM), "spawn", str(_port())])
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.launch.cli", "capture", "--target", "trn1", "-o",
                        str(tmp_path), "--run-id", "ddp", "--active", "2", "--"] + cmd,
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    files = sorted((tmp_path / "ddp").glob("rank*_window000.nprof"))
    assert [f.name[:9] for f in files] == ["rank00000", "rank00001"], r.stderr[-3000:]
    ts = analysis.load(tmp_path / "ddp")
    across = analysis.collectives_across_ranks(ts)
    step = float(np.mean([t.steps()["duration_ns"].mean() for t in ts if len(t.steps())]))
    assert len(across) >= 4 and step > 0
    assert across["arrival_skew_ns"].max() < 0.01 * step, (across["arrival_skew_ns"].max(), step)
    for t in ts:
        assert "rank 0's window start" in t.header.simulation.assumptions["cross_rank_origin"]
    assert not (analysis.run_recommendations(ts)["rule"] == "straggler").any()
