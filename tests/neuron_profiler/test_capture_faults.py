"""Profiling never breaks the profiled program: a window that cannot be written or built is one console line and
a note in the next written window, the training loop goes on; record_shapes=False still gives device events;
what capture cannot read is recorded in the trace."""
from __future__ import annotations

import errno
import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from neuron_profiler import NeuronConfig, NeuronProfiler  # noqa: E402
from neuron_profiler.capture import assemble, comms  # noqa: E402
from neuron_profiler.capture.session import CaptureSession  # noqa: E402
from neuron_profiler.runtime.base import DeviceRuntime  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402
from neuron_profiler.trace.writer import TraceWriter  # noqa: E402


class OneInstructionPerMatmul(DeviceRuntime):
    def emit(self, b, host_ops):
        t = b.add_track("engine", "Tensor")
        mm = host_ops[host_ops["name"].isin(["aten::mm", "aten::addmm"])]
        b.add_rows("instructions", {"track": np.full(len(mm), t), "start_ts": mm["start_ts"].to_numpy(),
                                    "duration_ns": 10, "engine": "Tensor", "opcode": "MATMUL"})


def _windows(cfg, npf, n, before_step=None, **kw):
    """n one-step windows of a small MLP; ``before_step(i)`` runs before the prof.step() that exports window i.
    Returns how many training steps ran."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    steps = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     schedule=schedule(wait=0, warmup=0, active=1, repeat=n), on_trace_ready=npf.export_trace,
                     **kw) as prof:
            for i in range(n):
                opt.zero_grad()
                m(torch.randn(8, 16)).sum().backward()
                opt.step()
                steps += 1
                if before_step is not None:
                    before_step(i)
                prof.step()
    return steps


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "neuron_profiler"]


def _check_gap(tmp_path, npf, run_id, failed, error_text, caplog):
    """Window ``failed`` missing, every other written and whole, no temp file, one line, noted in the next."""
    run = tmp_path / run_id
    assert [p.name for p in npf.paths] == [f"rank00000_window{i:03d}.nprof" for i in range(4) if i != failed]
    assert sorted(p.name for p in run.iterdir()) == [p.name for p in npf.paths]  # no *.tmp, nothing partial
    for p in npf.paths:
        assert read_trace(p).complete
    assert [f["window"] for f in npf.failures] == [failed] and error_text in npf.failures[0]["error"]
    lines = _lines(caplog)
    assert len(lines) == 1 and f"window {failed} not written" in lines[0] and error_text in lines[0]
    assert "\n" not in lines[0]
    after = read_trace(run / f"rank00000_window{failed + 1:03d}.nprof").footer_metadata
    noted = json.loads(after["unwritten_windows"])
    assert [n["window"] for n in noted] == [failed] and error_text in noted[0]["error"]
    later = read_trace(run / f"rank00000_window{failed + 2:03d}.nprof").footer_metadata
    assert "unwritten_windows" not in later  # recorded once, in the next window written


def test_full_disk_skips_one_window_and_training_goes_on(tmp_path, caplog, monkeypatch):
    orig = TraceWriter._write_record

    def write_record(self, *args, **kwargs):
        n = self.__dict__.setdefault("_fault_records", 0)
        self._fault_records = n + 1
        if "window001" in str(self.path) and n >= 1:  # the header is on disk: a partial file exists
            self._f.write(b"\0" * 100)
            raise OSError(errno.ENOSPC, "No space left on device")
        return orig(self, *args, **kwargs)

    monkeypatch.setattr(TraceWriter, "_write_record", write_record)
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="full")
    npf = NeuronProfiler(cfg, runtime=OneInstructionPerMatmul())
    assert _windows(cfg, npf, 4) == 4
    _check_gap(tmp_path, npf, "full", 1, "No space left on device", caplog)


def test_unwritable_run_directory_skips_one_window(tmp_path, caplog):
    """The run directory is replaced by a file while window 1 ends (a real OSError, also for root, whom a
    read-only mode does not stop), then restored."""
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="ro")
    npf = NeuronProfiler(cfg, runtime=OneInstructionPerMatmul())
    run, aside = tmp_path / "ro", tmp_path / "ro.aside"

    def before_step(i):
        if i == 1:
            run.rename(aside)
            run.write_text("not a directory")
        elif i == 2:
            run.unlink()
            aside.rename(run)

    assert _windows(cfg, npf, 4, before_step) == 4
    _check_gap(tmp_path, npf, "ro", 1, "xists", caplog)  # "File exists" from mkdir over a file


def test_a_capture_bug_never_stops_training(tmp_path, caplog, monkeypatch):
    orig = assemble.extract_host_ops
    calls = []

    def extract(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyError("bug in capture")
        return orig(*a, **k)

    monkeypatch.setattr(assemble, "extract_host_ops", extract)
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="bug")
    npf = NeuronProfiler(cfg, runtime=OneInstructionPerMatmul())
    assert _windows(cfg, npf, 4) == 4
    _check_gap(tmp_path, npf, "bug", 1, "bug in capture", caplog)


def test_record_shapes_off_still_gives_device_events(tmp_path, caplog):
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="noshapes", runtime="simulated")
    npf = NeuronProfiler(cfg)
    m = torch.nn.Linear(64, 64)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                 on_trace_ready=npf.export_trace):  # record_shapes=False, torch.profiler's default
        m(torch.randn(32, 64)).sum().backward()
    tf = read_trace(npf.paths[0])
    assert len(tf.table("instructions")) > 0 and len(tf.table("dma")) > 0
    opts = json.loads(tf.header.capture_config_json)["profiler"]
    assert opts["record_shapes"] is True and opts["record_shapes_requested"] is False
    assert "device_events_unavailable" not in tf.footer_metadata
    assert _lines(caplog) == []


def test_window_without_shapes_says_so(tmp_path, caplog, monkeypatch):
    """Where shapes truly cannot be had (here: shape recording could not be switched on), the trace and the
    console say why there are no device events."""
    monkeypatch.setattr(CaptureSession, "on_prepare", lambda self, prof: None)
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="cannot", runtime="simulated")
    npf = NeuronProfiler(cfg)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                 on_trace_ready=npf.export_trace):
        torch.nn.Linear(8, 8)(torch.randn(2, 8)).sum()
    tf = read_trace(npf.paths[0])
    assert len(tf.table("instructions")) == 0
    assert tf.footer_metadata["device_events_unavailable"] == assemble.NO_SHAPES
    lines = _lines(caplog)
    assert len(lines) == 1 and "record_shapes=True" in lines[0]


def test_unreadable_rank_is_recorded_not_dropped(monkeypatch):
    import torch.distributed as dist

    from neuron_profiler.capture.session import rank_and_world

    def broken(*a, **k):
        raise RuntimeError("process group gone")

    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_rank", broken)
    problems = comms.Problems()
    assert rank_and_world((3, 4), problems) == (3, 4, "torch.distributed during the window")
    assert rank_and_world(None, problems) == (0, 1, "default (no process group, no RANK)")
    assert problems.take() == ["torch.distributed is initialised but rank/world size are unreadable "
                               "(RuntimeError('process group gone'))"]


def test_group_without_sequence_numbers_is_recorded_in_the_trace(tmp_path, monkeypatch):
    """A real 1-rank gloo group whose sequence numbers cannot be read: the window says so in its footer and the
    collectives still carry their group and sizes."""
    import socket

    import torch.distributed as dist

    def no_seq(self):
        raise RuntimeError("sequence numbers not supported")

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    try:
        monkeypatch.setattr(dist.ProcessGroup, "_get_sequence_number_for_group", no_seq)
        cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="noseq")
        npf = NeuronProfiler(cfg, runtime=OneInstructionPerMatmul())
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     on_trace_ready=npf.export_trace):
            dist.all_reduce(torch.ones(5))
    finally:
        dist.destroy_process_group()
    tf = read_trace(npf.paths[0])
    problems = json.loads(tf.footer_metadata["capture_problems"])
    assert any("no sequence number" in p and "not supported" in p for p in problems)
    assert tf.header.metadata["rank_source"] == "torch.distributed"
    args = [json.loads(a) for a in tf.table("host_ops")["args"].astype(str) if a]
    ar = [a for a in args if a.get("Collective name") == "allreduce"]
    assert len(ar) == 1 and ar[0]["In msg nelems"] == 5 and ar[0]["Seq"] == 0


def _c10d(name, shapes, dtypes, start=1000):
    return {"name": name, "start_ts": start, "duration_ns": 100, "shapes": shapes, "dtypes": dtypes, "args": ""}


GROUP = {"name": "0", "ranks": [0, 1], "seq": 5}


def test_list_form_all_gather_sizes_from_recorded_shapes():
    """Kineto records a list-form all_gather as shapes [[], [[1000]], [], [], []] with dtypes
    ['', 'TensorList', '', 'Scalar', 'Scalar'] (the Tensor[][] output is not recorded); a reduce_scatter's input
    list likewise."""
    ops = [_c10d("c10d::allgather_", [[], [[1000]], [], [], []], ["", "TensorList", "", "Scalar", "Scalar"]),
           _c10d("c10d::reduce_scatter_", [[[500]], [], [], [], [], []],
                 ["TensorList", "", "", "", "Scalar", "Scalar"], start=2000),
           _c10d("c10d::_allgather_base_", [[2000], [1000], [], [], []], ["float", "float", "", "Scalar", "Scalar"],
                 start=3000)]
    assert comms.annotate_collectives(ops, [], GROUP, [(1010, "float"), (2010, "float")]) == 3
    args = [json.loads(o["args"]) for o in ops]
    assert [(a["In msg nelems"], a["Out msg nelems"]) for a in args] == [(1000, 2000), (1000, 500), (1000, 2000)]
    assert [a["Seq"] for a in args] == [5, 6, 7] and args[0]["dtype"] == "float"


def test_list_form_all_gather_sizes_from_the_python_call():
    """The wrapper's tensors win over the shapes (e.g. record_shapes off and nothing recorded at all)."""
    call = {**GROUP, "t0": 900, "t1": 1200, "fn": "all_gather", "in_nelems": 3, "out_nelems": 6, "dtype": "double"}
    ops = [_c10d("c10d::allgather_", [], [])]
    comms.annotate_collectives(ops, [call], GROUP, [])
    a = json.loads(ops[0]["args"])
    assert (a["In msg nelems"], a["Out msg nelems"], a["dtype"], a["Seq"]) == (3, 6, "double", 5)
