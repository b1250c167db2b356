"""Profiling never breaks the program's own torch.distributed, autograd and device API calls: two real gloo ranks
(torch.multiprocessing.spawn, torchrun, and torchrun under ``neuron-profile capture``) make the common calls
before, inside and after a NeuronConfig window and get exactly what a CPU-only 2-rank program gets."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from neuron_profiler.trace import read_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PROGRAM = Path(__file__).with_name("dist_program.py")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_RT_INSPECT", "NEURON_PROFILE"))}
    env.update(KINETO_LOG_LEVEL="6", PYTHONPATH=str(REPO))
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_calls(out: Path, phases: tuple[str, ...]) -> None:
    for rank in (0, 1):
        res = json.loads((out / f"calls_rank{rank}.json").read_text())
        for phase in phases:
            got = res[phase]
            wrong = {k: (got.get(k), v) for k, v in res["expected"].items() if got.get(k) != v}
            assert not wrong, f"rank {rank}, {phase} the window: (got, expected) {wrong}"


def _check_traces(run_dir: Path) -> None:
    files = sorted(run_dir.glob("*.nprof"))
    assert [f.name for f in files] == ["rank00000_window000.nprof", "rank00001_window000.nprof"]
    for rank, f in enumerate(files):
        tf = read_trace(f)
        assert (tf.header.rank, tf.header.world_size) == (rank, 2)
        cc = tf.table("collectives")
        ag = cc[cc["operation"].astype(str) == "all_gather"]
        # every all_gather (list form, tensor form, inside all_gather_object) outputs both ranks' inputs
        assert len(ag) >= 4 and (ag["input_size"] > 0).all()
        assert (ag["output_size"] == 2 * ag["input_size"]).all(), ag[["input_size", "output_size"]]
        ops = tf.table("host_ops")
        lists = [json.loads(a) for n, a in zip(ops["name"].astype(str), ops["args"].astype(str))
                 if n == "c10d::allgather_" and a]
        floats = [a for a in lists if a["dtype"] == "float" and a["In msg nelems"] == 2]
        assert len(floats) == 1 and floats[0]["Out msg nelems"] == 4  # the list-form call of 2 floats per rank
        sync = tf.table("host_ops")["name"].astype(str) == "neuron::sync torch.neuron.synchronize"
        assert sync.sum() == 2  # the program's call and the profiler's own at window end


@pytest.mark.slow
def test_spawned_ranks_calls_unchanged(tmp_path):
    r = subprocess.run([sys.executable, str(PROGRAM), "spawn", str(tmp_path), str(_port())], env=_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    _check_calls(tmp_path, ("before", "inside", "after"))
    _check_traces(tmp_path / "calls")


@pytest.mark.slow
def test_torchrun_ranks_calls_unchanged(tmp_path):
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                        str(PROGRAM), "torchrun", str(tmp_path)], env=_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    _check_calls(tmp_path, ("before", "inside", "after"))
    _check_traces(tmp_path / "calls")


@pytest.mark.slow
def test_torchrun_under_neuron_profile_capture_calls_unchanged(tmp_path):
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.launch.cli", "capture", "-o", str(tmp_path / "o"),
                        "--run-id", "cap", "--runtime", "simulated", "--", "python", "-m", "torch.distributed.run",
                        "--standalone", "--nproc-per-node", "2", str(PROGRAM), "runner", str(tmp_path)],
                       env=_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    _check_calls(tmp_path, ("inside",))
    _check_traces(tmp_path / "o" / "cap")
