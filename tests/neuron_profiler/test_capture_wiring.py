"""NeuronConfig is a plain validated value; NeuronProfiler wires capture once; no import cycle hides in the
capture code; the options the lead and TorchNeuron users need."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from neuron_profiler import NeuronConfig, NeuronProfiler  # noqa: E402
from neuron_profiler.hardware import host_model_params  # noqa: E402
from neuron_profiler.runtime.factory import make_runtime  # noqa: E402
from neuron_profiler.trace import read_trace  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "neuron_profiler"


def test_config_is_a_plain_value_and_the_profiler_wires_capture(tmp_path):
    code = f"""
import torch
from torch.profiler import profiler as tp
from neuron_profiler import NeuronConfig, NeuronProfiler
from neuron_profiler.capture import hooks
orig = tp._KinetoProfile.start_trace
cfg = NeuronConfig(profile_output_dir={str(tmp_path)!r}, runtime="hardware")  # no device here: nothing probed
assert torch._C._get_privateuse1_backend_name() == "privateuseone"
assert tp._KinetoProfile.start_trace is orig and getattr(torch, "neuron", None) is None
assert not hasattr(cfg, "_neuron_session") and len(hooks._sessions) == 0
cfg = NeuronConfig(profile_output_dir={str(tmp_path)!r}, runtime="simulated")
a, b = NeuronProfiler(cfg), NeuronProfiler(cfg)
assert torch._C._get_privateuse1_backend_name() == "neuron"
assert tp._KinetoProfile.start_trace is not orig and tp._KinetoProfile.start_trace.__wrapped__ is orig
assert a.session is b.session and len(hooks._sessions) == 1  # one session per config
print("ok")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={"KINETO_LOG_LEVEL": "6", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def _runtime_imports(path: Path, modules: set[str] | None = None) -> set[str]:
    """Every ``neuron_profiler`` module ``path`` imports at run time (function-local imports included,
    ``if TYPE_CHECKING:`` blocks excluded): ``from P import m`` names module ``P.m`` when that is a module of
    ``modules``, else ``P`` (parent packages, imported implicitly, are not counted)."""
    modules = modules or set()
    tree = ast.parse(path.read_text())
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for b in node.body for n in ast.walk(b))
    pkg = ".".join(path.relative_to(REPO).with_suffix("").parts)
    if path.name == "__init__.py":
        pkg = pkg.rsplit(".", 1)[0] + "." + "__init__"
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(pkg.split(".")[:-node.level] + ([base] if base else []))
            subs = {f"{base}.{a.name}" for a in node.names} & modules
            out.update(subs)
            if len(subs) < len(node.names):
                out.add(base)
    return {m for m in out if m.startswith("neuron_profiler")}


def _module_files() -> dict[str, Path]:
    mods = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(REPO).with_suffix("").parts
        mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return mods


def test_no_import_cycle_in_the_package():
    mods = _module_files()
    graph = {m: {i for i in _runtime_imports(f, set(mods)) if i in mods and i != m} for m, f in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for m in sorted(graph):
            if m not in index:
                visit(m)
    finally:
        sys.setrecursionlimit(limit)  # the process-wide limit is other tests' too
    assert "neuron_profiler.capture.session" in graph["neuron_profiler.profiler"]  # the graph sees the imports
    assert cycles == []


def test_modes_module_is_a_torch_free_leaf():
    assert _runtime_imports(PACKAGE / "modes.py") == set()
    code = ("import sys; sys.modules['torch'] = None\n"
            "from neuron_profiler.modes import ProfileMode, parse_nc_ranges\n"
            "from neuron_profiler.runtime.hardware import inspect_env\n"
            "from neuron_profiler.runtime.factory import resolve_runtime\n"
            "assert resolve_runtime('auto') == 'simulated'\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr[-2000:]


def test_host_model_overrides_validated_kept_and_passed_to_the_simulator(tmp_path):
    name = next(iter(host_model_params()))
    with pytest.raises(ValueError, match=f"host_model: unknown parameter 'no_such'; valid: .*{name}"):
        NeuronConfig(profile_output_dir=tmp_path, host_model={"no_such": 1.0})
    with pytest.raises(ValueError, match=f"host_model: {name} must be a finite number >= 0"):
        NeuronConfig(profile_output_dir=tmp_path, host_model={name: -1})
    cfg = NeuronConfig(profile_output_dir=tmp_path, runtime="simulated", host_model={name: 7})
    assert cfg.to_dict()["host_model"] == {name: 7.0}
    assert make_runtime(cfg, rank=3).host_model == {name: 7.0}
    assert NeuronConfig(profile_output_dir=tmp_path).to_dict()["host_model"] is None


def test_precache_node_info_is_a_clear_error_and_neff_cache_dir_is_kept(tmp_path, monkeypatch):
    with pytest.raises(TypeError, match="precache_node_info is not supported.*warm up"):
        NeuronConfig(profile_output_dir=tmp_path, precache_node_info=True)
    with pytest.raises(TypeError, match="unexpected option.*max_event_per_nc"):
        NeuronConfig(profile_output_dir=tmp_path, max_event_per_nc=3)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", "/var/cache/neff")
    assert NeuronConfig(profile_output_dir=tmp_path).to_dict()["neff_cache_dir"] == "/var/cache/neff"
    assert NeuronConfig(profile_output_dir=tmp_path, neff_cache_dir=tmp_path).neff_cache_dir == str(tmp_path)


def test_neuron_synchronize_marks_a_sync_point(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    cfg = NeuronConfig(profile_output_dir=tmp_path, runtime="simulated")
    npf = NeuronProfiler(cfg)
    assert torch.neuron._is_neuron_profiler_stub
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], experimental_config=cfg,
                 on_trace_ready=npf.export_trace):
        x = torch.ones(4).mul(2)
        torch.neuron.synchronize()
        x.add(1)
    ops = read_trace(npf.paths[0]).table("host_ops")
    names = ops["name"].astype(str).tolist()
    syncs = [i for i, n in enumerate(names) if n == "neuron::sync torch.neuron.synchronize"]
    # the program's call, and the profiler's own at window end (torch.autograd.profiler synchronises the device)
    assert len(syncs) == 2 and (ops["category"].astype(str).iloc[syncs] == "user_annotation").all()
    assert names.index("aten::mul") < syncs[0] < names.index("aten::add") < syncs[1]


def test_a_window_pairs_with_its_own_profiler(tmp_path):
    """Two profilers of one config, only the second exporting: its trace gets its own window's capture."""
    import time

    from torch.profiler import ProfilerActivity, profile

    from neuron_profiler import ProfileMode
    cfg = NeuronConfig(modes=[ProfileMode.RUNTIME], profile_output_dir=tmp_path, run_id="pair")
    npf = NeuronProfiler(cfg)
    with profile(activities=[ProfilerActivity.CPU], experimental_config=cfg, on_trace_ready=lambda p: None):
        torch.ones(2).add(1)
    t = time.time_ns()
    with profile(activities=[ProfilerActivity.CPU], experimental_config=cfg, on_trace_ready=npf.export_trace):
        torch.ones(3).mul(2)
    tf = read_trace(npf.paths[0])
    assert tf.header.window_index == 0 and int(tf.footer_metadata["window_start_ns"]) >= t
    assert set(tf.table("host_ops")["name"].astype(str)) >= {"aten::mul"}
