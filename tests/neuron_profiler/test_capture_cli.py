"""The no-code-change runner: ``neuron-profile capture -- python train.py`` and ``python -m neuron_profiler run``."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")

from neuron_profiler.launch import cli  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[2]

TRAIN = textwrap.dedent("""
    import sys, torch
    m = torch.nn.Linear(8, 4)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for step in range(int(sys.argv[1])):
        opt.zero_grad()
        m(torch.randn(2, 8)).sum().backward()
        opt.step()
    sys.exit(int(sys.argv[2]))
""")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURON_RT_INSPECT")}
    env.update(KINETO_LOG_LEVEL="6", PYTHONPATH=str(REPO), **extra)
    return env


@pytest.mark.slow
def test_capture_cli_profiles_optimizer_steps_and_keeps_exit_status(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.launch.cli", "capture", "--run-id", "cli",
                        "--warmup", "1", "--active", "2", "--repeat", "2", "--runtime", "simulated", "--",
                        "python", str(script), "9", "7"],
                       env=_env(NEURON_RT_INSPECT_OUTPUT_DIR=str(tmp_path / "out"),
                                NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC="40"),
                       capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 7, r.stderr
    files = sorted((tmp_path / "out" / "cli").glob("*.nprof"))
    assert [f.name for f in files] == ["rank00000_window000.nprof", "rank00000_window001.nprof"]
    for f in files:
        tf = read_trace(f)
        ops = tf.table("host_ops")
        assert (ops["name"] == "aten::addmm").sum() == 2  # active=2 optimizer steps per window
        assert (ops["name"] == "Optimizer.step#SGD.step").sum() == 2
        assert tf.header.simulated and sum(tf.dropped_events.values()) > 0  # the env's event cap applied


@pytest.mark.slow
def test_python_m_run_whole_program_one_window_and_env_disable(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    r = subprocess.run([sys.executable, "-m", "neuron_profiler", "run", "-o", str(tmp_path / "o"), "--run-id", "m",
                        "--modes", "RUNTIME,HOST_MEMORY", str(script), "3", "0"],
                       env=_env(), capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    files = sorted((tmp_path / "o" / "m").glob("*.nprof"))
    assert len(files) == 1
    tf = read_trace(files[0])
    assert (tf.table("host_ops")["name"] == "aten::addmm").sum() == 3 and len(tf.table("instructions")) == 0
    assert "Host Memory Used" in set(tf.table("tracks")["name"].astype(str))
    cmd = [sys.executable, "-m", "neuron_profiler", "run", "-o", str(tmp_path / "o2"), str(script), "1", "0"]
    r = subprocess.run(cmd, env=_env(NEURON_RT_INSPECT_ENABLE="0"), capture_output=True, text=True, timeout=180,
                       cwd=tmp_path)
    assert r.returncode == 0 and not (tmp_path / "o2").exists()


@pytest.mark.slow
def test_capture_without_active_reports_step_times_from_the_training_loop(tmp_path):
    """The no-code path without --active: one window, and the summary's steps are the intervals between
    optimizer.step() calls (4 iterations -> 3 steps, each holding exactly one forward addmm)."""
    import analysis
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.launch.cli", "capture", "-o", str(tmp_path / "o"),
                        "--run-id", "loop", "--runtime", "simulated", "--", "python", str(script), "4", "0"],
                       env=_env(), capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (f,) = sorted((tmp_path / "o" / "loop").glob("*.nprof"))
    t = analysis.load(f)
    ho = t.table("host_ops", ["name", "start_ts", "duration_ns"])
    opt = ho[ho["name"] == "Optimizer.step#SGD.step"]
    ends = sorted((opt["start_ts"] + opt["duration_ns"]).tolist())
    assert len(ends) == 4
    st = analysis.steps(t)
    assert st["step"].tolist() == [1, 2, 3]
    # host ranges from one optimizer.step() end to the next; a step starts no earlier than the previous one's
    # device work ended and ends when its own has (the device's step)
    assert st["host_end_ts"].tolist() == ends[1:]
    assert st["start_ts"].iloc[0] == ends[0] and (st["start_ts"].to_numpy()[1:] >= ends[1:-1]).all()
    assert (st["end_ts"].to_numpy() >= st["host_end_ts"].to_numpy()).all()
    fwd = ho[ho["name"] == "aten::addmm"]["start_ts"].to_numpy()
    for a, b in zip(st["start_ts"], st["end_ts"]):
        assert ((fwd >= a) & (fwd < b)).sum() == 1
    s = t.summary_dict()
    # steps are contiguous: their mean is the span from the first optimizer.step() end to the last step's end
    assert s["step_count"] == 3 and s["step_time_mean_ns"] == pytest.approx((st["end_ts"].iloc[-1] - ends[0]) / 3)


def _args(**kw):
    ns = dict(output_dir=None, modes=None, target="trn2", runtime="auto", max_events_per_nc=None,
              capture_enabled_for_nc=None, num_cores=None, run_id="x", wait=0, warmup=0, active=0, repeat=1,
              with_stack=False, no_modules=False, no_shapes=False)
    ns.update(kw)
    return argparse.Namespace(**ns)


def test_options_validation_and_env(tmp_path):
    env = {"NEURON_RT_INSPECT_OUTPUT_DIR": str(tmp_path / "envout"), "NEURON_RT_INSPECT_EVENT_FILTER_NC": "0-1",
           "NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC": "1000", "NEURON_RT_INSPECT_CPU_UTIL": "1"}
    o = cli.options_from_args(_args(), env)
    assert o["profile_output_dir"] == str((tmp_path / "envout").resolve()) and o["capture_enabled_for_nc"] == "0-1"
    assert o["max_events_per_nc"] == 1000 and o["modes"] == ["DEVICE", "RUNTIME", "CPU_UTIL"]
    o = cli.options_from_args(_args(output_dir=str(tmp_path / "a"), capture_enabled_for_nc="3", modes="device"), env)
    assert o["capture_enabled_for_nc"] == "3" and o["modes"] == ["DEVICE"]
    with pytest.raises(ValueError, match="0,1,2-5"):
        cli.options_from_args(_args(output_dir=str(tmp_path), capture_enabled_for_nc="1-x"), {})
    with pytest.raises(ValueError, match="DEVICE, RUNTIME, CPU_UTIL, HOST_MEMORY"):
        cli.options_from_args(_args(output_dir=str(tmp_path), modes="device,gpu"), {})
    with pytest.raises(ValueError, match="trn1, inf2, trn2, trn3"):
        cli.options_from_args(_args(output_dir=str(tmp_path), target="a100"), {})
    with pytest.raises(ValueError, match="positive integer"):
        cli.options_from_args(_args(output_dir=str(tmp_path)),
                              {"NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC": "lots"})
    with pytest.raises(ValueError, match="run-id"):
        cli.options_from_args(_args(output_dir=str(tmp_path), run_id="a/b"), {})
    with pytest.raises(SystemExit):
        cli.main(["capture", "--target", "a100", "--", "python", "-c", "pass"])
    with pytest.raises(SystemExit):
        cli.main(["capture"])


SPAWN = textwrap.dedent("""
    import os, sys, torch, torch.distributed as dist, torch.multiprocessing as mp
    def work(rank, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        dist.init_process_group("gloo", rank=rank, world_size=2)
        m = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad(); m(torch.randn(2, 8)).sum().backward(); opt.step()
        dist.destroy_process_group()
    if __name__ == "__main__":
        mp.spawn(work, args=(int(sys.argv[1]),), nprocs=2)
""")


@pytest.mark.slow
def test_capture_spawned_ranks_whole_run(tmp_path):
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "ddp.py"
    script.write_text(SPAWN)
    r = subprocess.run([sys.executable, "-m", "neuron_profiler", "run", "-o", str(tmp_path / "o"), "--run-id", "sp",
                        "--runtime", "simulated", str(script), str(port)],
                       env=_env(), capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    files = sorted((tmp_path / "o" / "sp").glob("*.nprof"))  # the launcher (no aten op) writes nothing
    assert [f.name for f in files] == ["rank00000_window000.nprof", "rank00001_window000.nprof"]
    traces = [read_trace(f) for f in files]
    assert [(t.header.rank, t.header.world_size) for t in traces] == [(0, 2), (1, 2)]
    keys = [sorted(zip(t.table("collectives")["sequence_number"], t.table("collectives")["operation"].astype(str)))
            for t in traces]
    assert keys[0] == keys[1] and sum("all_reduce" in o for _, o in keys[0]) == 3
    assert [s for s, _ in keys[0]] == list(range(len(keys[0])))  # the group was created inside the window


def test_capture_refuses_an_unavailable_runtime_before_starting_the_command(tmp_path):
    r = subprocess.run([sys.executable, "-m", "neuron_profiler.launch.cli", "capture", "-o", str(tmp_path / "o"),
                        "--runtime", "hardware", "--", "python", "-c", "print('ran')"],
                       env=_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 2 and "ran" not in r.stdout
    assert "hardware Neuron runtime unavailable" in r.stderr and "runtime='simulated'" in r.stderr
    # without DEVICE mode no device runtime is needed, so nothing is refused
    o = cli.options_from_args(_args(output_dir=str(tmp_path / "o"), runtime="hardware", modes="RUNTIME"), {})
    assert o["runtime"] == "hardware"


def test_runner_with_unusable_options_runs_the_program_unprofiled(tmp_path):
    import json
    opts = {"runtime": "hardware", "profile_output_dir": str(tmp_path / "o"), "run_id": "x"}
    env = _env(NEURON_PROFILE_CAPTURE=json.dumps(opts))
    env["PYTHONPATH"] = os.pathsep.join([str(cli.BOOTSTRAP_DIR), str(REPO)])
    r = subprocess.run([sys.executable, "-c", "print('ran')"], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ran"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("neuron-profile: not profiling this process (hardware Neuron")
