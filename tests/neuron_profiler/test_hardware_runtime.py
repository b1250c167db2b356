"""HardwareRuntime: clear failure without a Neuron device, the inspect environment it sets, and a fake Neuron
machine (stand-in neuron-explorer writing Parquet tables of the documented schema 7.4.0)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from neuron_profiler.runtime.base import RuntimeUnavailableError  # noqa: E402
from neuron_profiler.runtime.hardware import HardwareRuntime, inspect_env  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402

T0 = 1_796_000_000_123_456_789  # exact int64 ns; loses its last digits through float64


def _write(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_hardware_runtime_unavailable_here(tmp_path):
    assert HardwareRuntime.device_present() is False
    with pytest.raises(RuntimeUnavailableError, match="torch_neuronx.*|Neuron device"):
        HardwareRuntime.check_available()
    pytest.importorskip("torch")
    from neuron_profiler import NeuronConfig, NeuronProfiler
    cfg = NeuronConfig(runtime="hardware", profile_output_dir=tmp_path)  # a plain value: probes nothing
    with pytest.raises(RuntimeUnavailableError, match="runtime='simulated'"):
        NeuronProfiler(cfg)  # the wiring resolves the runtime, before anything is profiled


def test_inspect_env_mirrors_config():
    from neuron_profiler.modes import ProfileMode
    cfg = SimpleNamespace(max_events_per_nc=500, capture_enabled_for_nc=(0, 2, 3),
                          has=lambda m: m in (ProfileMode.DEVICE, ProfileMode.CPU_UTIL))
    env = inspect_env(cfg, "/tmp/x")
    assert env["NEURON_RT_INSPECT_ENABLE"] == "1" and env["NEURON_RT_INSPECT_OUTPUT_DIR"] == "/tmp/x"
    assert env["NEURON_RT_INSPECT_DEVICE_PROFILE"] == "session" and env["NEURON_RT_INSPECT_SYSTEM_PROFILE"] == "0"
    assert env["NEURON_RT_INSPECT_CPU_UTIL"] == "1" and env["NEURON_RT_INSPECT_HOST_MEMORY"] == "0"
    assert env["NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"] == "500"
    assert env["NEURON_RT_INSPECT_EVENT_FILTER_NC"] == "0,2,3"


# The Neuron Explorer converter's tests live with the importer: tests/neuron_profiler/test_import_neuron_explorer.py


# ------------------------------------------------------------------ a fake Neuron machine
FAKE_EXPLORER = '''#!{python}
"""Stands in for AWS's neuron-explorer: `view -d CAPTURE --data-path OUT --ingest-only` -> Parquet tables."""
import sys
from pathlib import Path
import pyarrow as pa, pyarrow.parquet as pq
args = sys.argv[1:]
cap, out = Path(args[args.index("-d") + 1]), Path(args[args.index("--data-path") + 1])
assert args[0] == "view" and "--ingest-only" in args
if {fail!r}:
    sys.stderr.write("neuron-explorer: NEFF for the NTFF not found\\n")
    sys.exit(3)
ntff = sorted(cap.glob("*.ntff"))
d = out / "profiles" / "global" / "win@latest"
d.mkdir(parents=True)
pq.write_table(pa.Table.from_pylist([{{"profile_schema_version": "7.4.0", "instance_type": "trn2.48xlarge",
                                       "neuroncore_idx": 0, "neuron_device_idx": 0, "is_simulation": False}}]),
               d / "Metadata.parquet")
t0 = int(ntff[0].read_text())
pq.write_table(pa.Table.from_pylist([{{"start_ts": t0 + 100 * i, "duration_ns": 50, "engine": "Tensor", "pcore_idx": 0,
                                       "opcode": "MATMUL", "hlo_name": f"dot.{{i}}",
                                       "neffs": len(list(cap.glob("*.neff")))}}
                                      for i in range(5)]), d / "Instruction.parquet")
'''


class FakeNrt:
    """libnrt's inspect API: writes one NTFF (holding the start time) into the configured directory at stop."""

    def __init__(self):
        self.calls = []
        self.dir = None

    def __getattr__(self, name):
        if not name.startswith("nrt_inspect"):
            raise AttributeError(name)

        def call(*args):
            self.calls.append(name)
            if name == "nrt_inspect_config_set_output_dir":
                from pathlib import Path
                self.dir = Path(args[1].decode())
            if name == "nrt_inspect_stop":
                import time
                (self.dir / "profile_nc_0_session_0.ntff").write_text(str(time.time_ns()))
            return 0
        return call


@pytest.fixture()
def neuron_machine(tmp_path, monkeypatch):
    """torch_neuronx importable, /dev/neuron0, libnrt with the inspect API, AWS's neuron-explorer: all fakes."""
    import sys

    from neuron_profiler.runtime import hardware as hw
    pkg = tmp_path / "site" / "torch_neuronx"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "neuron0").write_text("")
    monkeypatch.setattr(hw, "DEVICE_GLOB", str(tmp_path / "dev" / "neuron[0-9]*"))
    monkeypatch.setattr(hw, "NEURON_TOOLS_BIN", str(tmp_path / "no_tools"))
    nrt = FakeNrt()
    monkeypatch.setattr(hw, "load_libnrt", lambda: nrt)

    def explorer(fail=False):
        exe = tmp_path / "bin" / "neuron-explorer"
        exe.parent.mkdir(exist_ok=True)
        exe.write_text(FAKE_EXPLORER.format(python=sys.executable, fail=fail))
        exe.chmod(0o755)
        monkeypatch.setenv("NEURON_EXPLORER", str(exe))
    monkeypatch.delenv("NEURON_EXPLORER", raising=False)
    return SimpleNamespace(nrt=nrt, explorer=explorer, root=tmp_path)


def _one_window(cfg, **kw):
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from neuron_profiler import NeuronProfiler
    npf = NeuronProfiler(cfg, **kw)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                 on_trace_ready=npf.export_trace):
        torch.ones(4, 4).mm(torch.ones(4, 4))
    return npf


def test_auto_on_a_neuron_machine_gives_measured_device_events(neuron_machine, tmp_path):
    pytest.importorskip("torch")
    from neuron_profiler import NeuronConfig
    neuron_machine.explorer()
    cache = tmp_path / "neff_cache" / "MODULE_1"
    cache.mkdir(parents=True)
    (cache / "model.neff").write_bytes(b"NEFF")
    cfg = NeuronConfig(profile_output_dir=tmp_path / "out", run_id="hw", neff_cache_dir=tmp_path / "neff_cache")
    npf = _one_window(cfg)
    tf = read_trace(npf.paths[0])
    assert tf.header.simulated is False and tf.header.metadata["device_runtime"] == "HardwareRuntime"
    ins = tf.table("instructions")
    assert len(ins) == 5 and (ins["duration_ns"] == 50).all() and ins["name"].astype(str).tolist()[0] == "dot.0"
    assert "device_runtime_error" not in tf.footer_metadata
    n = neuron_machine.nrt.calls
    assert n.index("nrt_inspect_begin_with_options") < n.index("nrt_inspect_stop") and "nrt_inspect_config_free" in n
    cap = neuron_machine.nrt.dir
    assert cap.name == "window000" and cap.parent.parent.name == "hw" and (cap / "model.neff").read_bytes() == b"NEFF"


def test_auto_on_a_neuron_machine_without_the_tools_says_what_is_missing(neuron_machine, tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from neuron_profiler import NeuronConfig, NeuronProfiler
    from neuron_profiler.runtime import hardware as hw
    cfg = NeuronConfig(profile_output_dir=tmp_path / "out")  # runtime="auto"
    with pytest.raises(RuntimeUnavailableError, match="found a Neuron device.*neuron-explorer.*aws-neuronx-tools"
                                                      ".*runtime='simulated'"):
        NeuronProfiler(cfg)
    neuron_machine.explorer()
    monkeypatch.setattr(hw, "load_libnrt", lambda: None)
    with pytest.raises(RuntimeUnavailableError,
                       match="libnrt.so.1 with the runtime inspect API.*aws-neuronx-runtime-lib"):
        NeuronProfiler(NeuronConfig(profile_output_dir=tmp_path / "out", runtime="hardware"))
    assert _one_window(NeuronConfig(profile_output_dir=tmp_path / "out", run_id="s", runtime="simulated")).paths


def test_hardware_window_whose_processing_fails_keeps_host_ops_and_says_why(neuron_machine, tmp_path, caplog):
    pytest.importorskip("torch")
    from neuron_profiler import NeuronConfig
    neuron_machine.explorer(fail=True)
    npf = _one_window(NeuronConfig(profile_output_dir=tmp_path / "out", run_id="hwfail", runtime="hardware"))
    tf = read_trace(npf.paths[0])
    err = tf.footer_metadata["device_runtime_error"]
    assert "exited 3" in err and "NEFF for the NTFF not found" in err and "raw device profile stays in" in err
    assert len(tf.table("instructions")) == 0 and (tf.table("host_ops")["name"] == "aten::mm").sum() == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "neuron_profiler"]
    assert len(lines) == 1 and "exited 3" in lines[0]
