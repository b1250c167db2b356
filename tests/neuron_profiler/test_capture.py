"""Capture through the stock torch.profiler with NeuronConfig (device side replaced by a tiny fake runtime)."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from neuron_profiler import NeuronConfig, NeuronProfiler, ProfileMode  # noqa: E402
from neuron_profiler.runtime.base import DeviceRuntime  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class FakeRuntime(DeviceRuntime):
    """One Tensor-engine instruction per matmul host op, linked by a flow; counts start/stop calls."""

    def __init__(self) -> None:
        self.starts = self.stops = 0

    def start(self) -> None:
        self.starts += 1

    def stop(self) -> None:
        self.stops += 1

    def emit(self, b, host_ops):
        t = b.add_track("engine", "Tensor")
        mm = host_ops[host_ops["name"].isin(["aten::mm", "aten::addmm", "aten::bmm"])]
        first = b.add_rows("instructions", {"track": np.full(len(mm), t), "start_ts": mm["start_ts"].to_numpy(),
                                            "duration_ns": 10, "engine": "Tensor", "opcode": "MATMUL",
                                            "framework_op": mm.index.to_numpy(), "raw_flops": mm["flops"].to_numpy()})
        b.add_flows("host_ops", mm.index.to_numpy(), "instructions", np.arange(first, first + len(mm)), "launch")


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))


def _run(cfg, steps=8, rt=None, **kw):
    npf = NeuronProfiler(cfg, runtime=rt or FakeRuntime())
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     on_trace_ready=npf.export_trace, **kw) as prof:
            for _ in range(steps):
                opt.zero_grad()
                m(torch.randn(8, 16)).sum().backward()
                opt.step()
                prof.step()
    return npf


def test_schedule_windows_write_one_file_each(tmp_path):
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="runA", target="trn1")
    rt = FakeRuntime()
    npf = _run(cfg, steps=9, rt=rt, record_shapes=True, with_stack=True, with_modules=True,
               schedule=schedule(wait=1, warmup=1, active=2, repeat=2))
    names = [p.name for p in npf.paths]
    assert names == ["rank00000_window000.nprof", "rank00000_window001.nprof"]
    assert sorted(p.name for p in (tmp_path / "runA").iterdir()) == names
    assert rt.starts == 2 and rt.stops == 2
    for i, p in enumerate(npf.paths):
        tf = read_trace(p)
        h = tf.header
        assert h.producer == "neuron_profiler.capture" and h.window_index == i and h.run_id == "runA"
        assert h.rank == 0 and h.world_size == 1 and h.simulated is True  # FakeRuntime.simulated defaults True
        cc = json.loads(h.capture_config_json)
        assert cc["target"] == "trn1" and cc["profiler"]["record_shapes"] and cc["profiler"]["with_modules"]
        ops = tf.table("host_ops")
        steps = [n for n in ops["name"].astype(str) if n.startswith("ProfilerStep#")]
        assert len(steps) == 2  # active=2 steps per window
        assert (ops["duration_ns"] >= 0).all() and ops["start_ts"].is_monotonic_increasing
        assert ops["start_ts"].min() > 1_500_000_000 * 10**9  # Unix-epoch ns
        # matmul FLOPs from the shapes: addmm(bias, [M,K], [K,N]) -> 2*M*N*K
        addmm = ops[ops["name"] == "aten::addmm"]
        assert len(addmm) >= 4
        for _, r in addmm.iterrows():
            shapes = json.loads(r["input_shapes"])
            (m_, k_), (k2, n_) = shapes[1], shapes[2]
            assert k_ == k2 and r["flops"] == 2 * m_ * n_ * k_
        mm = ops[ops["name"] == "aten::mm"]  # backward matmuls
        assert len(mm) >= 4 and (mm["flops"] > 0).all()
        # module hierarchy: forward ops under Sequential.<i>, backward matmuls inherit via autograd seq numbers
        assert set(addmm["module"].astype(str)) == {"Sequential.0", "Sequential.2"}
        assert {"Sequential.0", "Sequential.2"} <= set(mm["module"].astype(str))
        assert (ops.loc[ops["name"] == "aten::gelu", "module"] == "Sequential.1").all()
        # python stacks, innermost last, the test function is on it
        st = addmm["stack"].astype(str).iloc[0].split("\n")
        assert any("test_capture.py" in f for f in st) and "linear" in st[-1]
        assert (ops["sequence_number"] >= 0).any() and (ops["correlation_id"] > 0).all()
        # thread tracks
        tracks = tf.table("tracks")
        th = tracks.loc[ops["track"].unique()]
        assert set(th["kind"].astype(str)) == {"thread"}
        # device side from the runtime, with host->device flows
        ins, fl = tf.table("instructions"), tf.table("flows")
        assert len(ins) == len(addmm) + len(mm) + (ops["name"] == "aten::bmm").sum()
        assert (fl["src_table"] == "host_ops").all() and (fl["dst_table"] == "instructions").all()
        src_flops = ops.loc[fl["src_row"].to_numpy(), "flops"].to_numpy()
        assert (src_flops == ins.loc[fl["dst_row"].to_numpy(), "raw_flops"].to_numpy()).all()


def test_without_shapes_modules_or_stack(tmp_path):
    cfg = NeuronConfig(modes=[ProfileMode.RUNTIME], profile_output_dir=tmp_path, run_id="plain")
    npf = _run(cfg, steps=3, schedule=schedule(wait=0, warmup=1, active=1, repeat=1))
    tf = read_trace(npf.paths[0])
    ops = tf.table("host_ops")
    assert (ops["input_shapes"] == "").all() and (ops["module"] == "").all() and (ops["stack"] == "").all()
    assert (ops["name"] == "aten::addmm").any()
    # without DEVICE mode nothing needs the shapes: the profiler's own choice stands
    assert json.loads(tf.header.capture_config_json)["profiler"]["record_shapes"] is False


def test_no_schedule_is_one_window(tmp_path):
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="nosched")
    npf = _run(cfg, steps=2, record_shapes=True)
    assert [p.name for p in npf.paths] == ["rank00000_window000.nprof"]
    assert (read_trace(npf.paths[0]).table("host_ops")["name"] == "aten::addmm").sum() == 4


def test_scalar_arguments_the_op_model_reads_are_kept(tmp_path):
    """Ops priced from their scalar arguments keep them as Kineto writes them (args "Concrete Inputs"): a 2x2
    max-pool's window and the loss reduction; other ops keep empty args. The op model then prices them:
    max_pool2d_with_indices over [2, 3, 8, 8] fp32 -> 96 outputs reads 1,536 B and writes 96 x 4 B of values
    plus 96 x 8 B of int64 indices = 1,152 B (one compare less than the window per output: 3 x 96 FLOPs);
    nll_loss (mean) over 2 targets reads the targets and the picked
    elements and writes 1 value."""
    from neuron_profiler.opmodel import lower_signature

    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="concrete")
    npf = NeuronProfiler(cfg, runtime=FakeRuntime())
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([1, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     on_trace_ready=npf.export_trace, record_shapes=True):
            pooled = torch.nn.functional.max_pool2d(x, 2)
            torch.nn.functional.nll_loss(torch.log_softmax(pooled.flatten(1)[:, :3], 1), y)
    ops = read_trace(npf.paths[0]).table("host_ops")
    ops = ops.assign(name=ops["name"].astype(str), args=ops["args"].astype(str))
    pool = ops[ops["name"] == "aten::max_pool2d_with_indices"].iloc[0]
    assert json.loads(pool["args"])["Concrete Inputs"][1:3] == ["[2, 2]", "[]"]  # kernel 2x2, stride default
    w = lower_signature(pool["name"], pool["input_shapes"], pool["input_dtypes"], 0,
                        json.loads(pool["args"])["Concrete Inputs"])
    assert (w.read_bytes, w.write_bytes, w.bytes_known, w.flops) == (1536, 96 * 4 + 96 * 8, True, 3 * 96)
    nll = ops[ops["name"] == "aten::nll_loss_forward"].iloc[0]
    assert json.loads(nll["args"])["Concrete Inputs"][3] == "1"  # reduction: mean
    assert (ops.loc[ops["name"] == "aten::log_softmax", "args"] == "").all()


def test_host_counters(tmp_path):
    cfg = NeuronConfig(modes=[ProfileMode.RUNTIME, ProfileMode.CPU_UTIL, ProfileMode.HOST_MEMORY],
                       profile_output_dir=tmp_path, run_id="ctr", cpu_sample_interval_s=0.005)
    rt = FakeRuntime()
    npf = _run(cfg, steps=6, rt=rt, schedule=schedule(wait=0, warmup=1, active=4, repeat=1))
    assert rt.starts == 0  # no DEVICE mode -> no device runtime
    tf = read_trace(npf.paths[0])
    tracks = tf.table("tracks")
    ctr = tracks[tracks["kind"] == "counter"]
    units = dict(zip(ctr["name"].astype(str), ctr["unit"].astype(str)))
    assert units["Host Memory Used"] == "bytes" and units["Process RSS"] == "bytes"
    assert units["Process CPU Utilization"] == "percent"
    c = tf.table("counters")
    rss = c[c["track"] == ctr.index[ctr["name"] == "Process RSS"][0]]
    assert len(rss) >= 2 and (rss["value"] > 1e6).all()
    cpu = c[c["track"].isin(ctr.index[ctr["unit"] == "percent"])]
    assert ((cpu["value"] >= 0) & (cpu["value"] <= 100)).all() and len(cpu) >= 1
    assert len(tf.table("instructions")) == 0


def test_export_trace_requires_matching_config(tmp_path):
    a = NeuronConfig(profile_output_dir=tmp_path)
    b = NeuronConfig(profile_output_dir=tmp_path)
    with pytest.raises(ValueError, match="experimental_config"):
        with profile(activities=[ProfilerActivity.CPU], experimental_config=a,
                     on_trace_ready=NeuronProfiler(b, runtime=FakeRuntime()).export_trace):
            torch.ones(2).sum()
    with pytest.raises(TypeError):
        NeuronProfiler(torch._C._profiler._ExperimentalConfig())


def test_plain_profiler_untouched_after_install(tmp_path):
    NeuronProfiler(NeuronConfig(profile_output_dir=tmp_path))  # installs the start/stop hooks
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.ones(4).add(1)
    assert any(e.name == "aten::add" for e in prof.events())
    assert list(tmp_path.iterdir()) == []


def test_crash_leaves_finished_windows_readable(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(REPO)!r})
        from torch.profiler import profile, ProfilerActivity, schedule
        from neuron_profiler import NeuronConfig, NeuronProfiler
        from neuron_profiler.runtime.base import DeviceRuntime
        class Rt(DeviceRuntime):
            def emit(self, b, host_ops): pass
        cfg = NeuronConfig(profile_output_dir={str(tmp_path / 'out')!r}, run_id="crash")
        m = torch.nn.Linear(8, 8)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                     schedule=schedule(wait=0, warmup=1, active=1, repeat=0),
                     on_trace_ready=NeuronProfiler(cfg, runtime=Rt()).export_trace) as prof:
            for step in range(100):
                m(torch.randn(2, 8)).sum().backward()
                if step == 6:
                    raise RuntimeError("boom in step 6")
                prof.step()
    """))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={"KINETO_LOG_LEVEL": "6", "PATH": "/usr/bin:/bin"})
    assert r.returncode != 0 and "boom in step 6" in r.stderr
    files = sorted((tmp_path / "out" / "crash").glob("*.nprof"))
    assert len(files) >= 3
    assert not list((tmp_path / "out" / "crash").glob("*.tmp"))
    for i, f in enumerate(files[:3]):
        tf = read_trace(f)
        assert tf.complete and tf.header.window_index == i
        assert (tf.table("host_ops")["name"] == "aten::addmm").sum() == 1


def test_convenience_profile_and_stock_exports_keep_working(tmp_path):
    import neuron_profiler
    m = _mlp()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with neuron_profiler.profile(profile_output_dir=tmp_path, run_id="conv", runtime="simulated",
                                     schedule=schedule(wait=0, warmup=1, active=2, repeat=1)) as p:
            for _ in range(3):
                m(torch.randn(4, 16)).sum().backward()
                p.step()
    assert [x.name for x in p.neuron_profiler.paths] == ["rank00000_window000.nprof"]
    # torch's own views of the same window are unaffected
    assert any(e.key == "aten::addmm" for e in p.key_averages())
    chrome = tmp_path / "chrome.json"
    p.export_chrome_trace(str(chrome))
    names = {e.get("name") for e in json.loads(chrome.read_text())["traceEvents"]}
    assert "aten::addmm" in names
    tf = read_trace(p.neuron_profiler.paths[0])
    assert json.loads(tf.header.capture_config_json)["profiler"]["with_modules"] is True
    assert (tf.table("host_ops")["module"] == "Sequential.0").any()
    with pytest.raises(ValueError, match="either config or NeuronConfig keyword"):
        neuron_profiler.profile(NeuronConfig(profile_output_dir=tmp_path), target="trn1")


class BrokenRuntime(DeviceRuntime):
    def emit(self, b, host_ops):
        b.add_track("engine", "Tensor")
        raise RuntimeError("model exploded")


def test_device_runtime_failure_keeps_host_ops(tmp_path, caplog):
    cfg = NeuronConfig(profile_output_dir=tmp_path, run_id="broken")
    npf = _run(cfg, steps=2, rt=BrokenRuntime(), record_shapes=True)
    lines = [r.getMessage() for r in caplog.records if r.name == "neuron_profiler"]
    assert len(lines) == 1 and "model exploded" in lines[0] and "host ops only" in lines[0]
    tf = read_trace(npf.paths[0])
    assert (tf.table("host_ops")["name"] == "aten::addmm").sum() == 4
    assert "model exploded" in tf.footer_metadata["device_runtime_error"]
    assert set(tf.table("tracks")["kind"].astype(str)) == {"instance", "process", "thread"}
