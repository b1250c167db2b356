"""analysis.check on every real trace and bundled sample; numbers that would break a physical bound are NaN
with the reason; unknown work is NaN, not 0; the package imports neither torch nor the simulator, has no import
cycle, and its registry drives the public API."""
from __future__ import annotations

import ast
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _traces import TRN2_HBM_CORE, TRN2_MEM_ROOF, gpu_builder, neuron_builder, two_matmul_trace
from realdata import REAL_TRACE_PARAMS, SAMPLE_TRACES, real_trace

import analysis
from analysis import registry
from neuron_profiler.cli import main as neuron_trace

REPO = Path(__file__).resolve().parents[2]
SAMPLES = sorted(p.name for p in SAMPLE_TRACES.glob("*.nprof"))
_loaded: dict = {}


def _load(rel: str):
    if rel not in _loaded:
        _loaded[rel] = analysis.load(real_trace(rel), cache=False)
    return _loaded[rel]


@pytest.mark.parametrize("rel", REAL_TRACE_PARAMS)
def test_check_passes_on_every_real_trace(rel):
    rep = analysis.check(_load(rel))
    assert rep.ok, str(rep)
    assert len(rep.frame) >= 15 and set(rep.frame["status"]) <= {"pass", "explained"}
    assert (rep.explained["reason"].str.len() > 0).all()  # an exception always says why


@pytest.mark.parametrize("name", SAMPLES)
def test_check_passes_on_every_bundled_sample(name):
    rep = analysis.check(analysis.load(SAMPLE_TRACES / name))
    assert rep.ok, str(rep)


def test_check_of_a_run_folder_and_the_cli(tmp_path, capsys):
    assert analysis.check(analysis.load(SAMPLE_TRACES)).ok
    assert neuron_trace(["validate", "--analysis", str(SAMPLE_TRACES / "gpt_train_step.nprof")]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")


def test_check_catches_an_impossible_number():
    """The checker itself: a share above 100 % in a summary frame is reported as a failure."""
    t = analysis.Trace.from_builder(two_matmul_trace())
    good = analysis.check(t)
    assert good.ok
    from analysis import invariants as C

    rows = C._Rows()
    rows.within("summary shares within 0-100 %", "x", [50.0, 119.9], 0.0, 100.0)
    rows.add("steps do not overlap", "y", 10, 0, False, explained="overlapping steps: ...")
    rep = C.CheckReport("t", __import__("pandas").DataFrame(rows.rows, columns=C.CHECK_COLUMNS))
    assert not rep.ok and rep.failures["value"].tolist() == [119.9] and len(rep.explained) == 1


def test_overlapping_steps_and_clock_skew_are_explained():
    b, t = neuron_builder()
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["ProfilerStep#1", "ProfilerStep#2", "aten::relu"],
                                "category": ["user_annotation", "user_annotation", "cpu_op"],
                                "start_ts": [0, 500, 700], "duration_ns": [1000, 1000, 50]})
    i = b.add_rows("instructions", {"track": t["Vector"], "start_ts": [600], "duration_ns": [100], "engine": "Vector",
                                    "framework_op": [h + 2]})
    b.add_flows("host_ops", [h + 2], "instructions", [i], kind="launch")  # the kernel starts 100 ns before its launch
    rep = analysis.check(analysis.Trace.from_builder(b))
    assert rep.ok, str(rep)
    reasons = " ".join(rep.explained["reason"])
    assert "overlapping steps" in reasons and "clock skew" in reasons


def test_shares_stay_within_100_percent_with_concurrent_streams_and_time_outside_steps():
    """Two kernels on concurrent streams and device time after the step: each share and their sum <= 100 %."""
    b, t = gpu_builder()
    s2 = b.add_track(kind="stream", name="stream 8", parent=t["gpu"], device=0, tid=8)
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["ProfilerStep#1", "aten::add", "aten::mul"],
                                "category": ["user_annotation", "cpu_op", "cpu_op"], "start_ts": [0, 10, 20],
                                "duration_ns": [1000, 5, 5]})
    b.add_rows("instructions", {"track": [t["stream"], s2], "start_ts": [100, 100], "duration_ns": [1500, 1500],
                                "engine": "Kernel", "opcode": "kernel", "name": ["add_k", "mul_k"],
                                "framework_op": [h + 1, h + 2]})
    tr = analysis.Trace.from_builder(b)
    hot = tr.hot_ops()
    # the step is the device's step: it lasts until its kernels end (1600 ns); [100, 1600) shared by two
    # kernels: 750 ns each of the 1600 ns step
    assert tr.steps()["duration_ns"].tolist() == [1600]
    assert hot.loc["aten::add", "share_of_step_time_percent"] == pytest.approx(750 / 1600 * 100)
    assert hot["share_of_step_time_percent"].sum() == pytest.approx(1500 / 1600 * 100)
    assert hot.loc["aten::add", "device_time_self_ns"] == 1500        # the op's own device time is whole
    assert analysis.check(tr).ok


def _gpu_op(name, shapes, dtypes, kernel_ns, gpu="NVIDIA A100-PG509-200"):
    b, t = gpu_builder(gpu)
    h = b.add_rows("host_ops", {"track": t["thread"], "name": [name], "category": "cpu_op", "start_ts": [0],
                                "duration_ns": [10], "input_shapes": [json.dumps(shapes)],
                                "input_dtypes": [json.dumps(dtypes)]})
    b.add_rows("instructions", {"track": t["stream"], "start_ts": [100], "duration_ns": [kernel_ns], "engine": "Kernel",
                                "opcode": "kernel", "name": "k", "framework_op": [h]})
    return analysis.Trace.from_builder(b)


def test_fp32_matmul_on_a100_is_judged_against_tf32():
    """2·4096³ FLOPs in 1 ms = 137 TFLOP/s: impossible at the FP32 peak (19.5), fine at TF32 (156)."""
    t = _gpu_op("aten::mm", [[4096, 4096], [4096, 4096]], ["float", "float"], 1_000_000)
    r = t.roofline().iloc[0]
    assert r["peak_flops_per_s"] == 156e12 and r["efficiency_percent"] <= 100
    assert r["achieved_flops_per_s"] == pytest.approx(2 * 4096 ** 3 / 1e-3)


def test_impossible_rates_are_nan_with_the_reason():
    """A matmul whose kernel is too short for its FLOPs (overstated work): NaN rate, efficiency and saving."""
    t = _gpu_op("aten::mm", [[8192, 8192], [8192, 8192]], ["c10::BFloat16"] * 2, 1000)
    r = t.roofline().iloc[0]
    assert np.isnan(r["achieved_flops_per_s"]) and np.isnan(r["efficiency_percent"])
    assert np.isnan(r["time_saved_at_roof_ns"]) and "above the device peak" in r["note"]
    h = t.hot_ops().loc["aten::mm"]
    assert np.isnan(h["achieved_flops_per_s"]) and "peak" in h["note"]
    # the view shows NaN, but check holds the op model to account: its FLOPs are impossible in that time
    fails = analysis.check(t).failures
    assert set(fails["invariant"]) == {"hot_ops FLOP/s within the peak of their dtype and engine"}


def test_kv_cache_update_moves_the_slice_not_the_cache():
    """index_put_ of one token into a [8, 32, 4096, 128] bf16 cache (256 MiB) in 10 µs: 64 KiB written."""
    cache, tok = [8, 32, 4096, 128], [8, 32, 1, 128]
    t = _gpu_op("aten::index_put_", [cache, [[1]], tok, []], ["c10::BFloat16", "TensorList", "c10::BFloat16", "Scalar"],
                10_000)
    h = t.hot_ops().loc["aten::index_put_"]
    moved = 2 * 8 * 32 * 128 * 2 + 4          # read the values (+ index), write the slice
    assert h["hbm_bytes"] == moved
    assert h["achieved_bandwidth_bytes_per_s"] == pytest.approx(moved / 10e-6)
    assert h["achieved_bandwidth_bytes_per_s"] < 1.555e12


def test_no_recorded_shapes_gives_nan_flops_with_the_reason():
    t = _gpu_op("aten::mm", [], [], 5000)
    s = t.summary().set_index("metric")
    assert math.isnan(s.loc["model_flops", "value"]) and math.isnan(s.loc["mfu_estimated_percent", "value"])
    assert "unknown" in s.loc["mfu_estimated_percent", "description"]
    known = _gpu_op("aten::relu", [[64]], ["float"], 5000).summary_dict()
    assert known["model_flops"] == 0 and known["mfu_estimated_percent"] == 0   # known: no matrix work


def test_memory_bound_sync_bytes_count_their_dma_time():
    """Neuron: the Sync instruction carries the HBM bytes its DMA moved; the op's time includes the DMA, so
    the achieved bandwidth stays under the memory roof; 3 MB in 50 ns of Sync time is beyond any ceiling."""
    b, t = neuron_builder()
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::gelu"], "start_ts": [0], "duration_ns": [10]})
    b.add_rows("instructions", {"track": [t["Scalar"], t["Vector"]], "start_ts": [10_000, 11_000],
                                "duration_ns": [1000, 50], "engine": ["Scalar", "Sync"], "framework_op": h,
                                "hbm_read_bytes": [0, 3_000_000], "raw_flops": [1000, 0], "dtype": "float32"})
    b.add_rows("dma", {"track": t["qSyncIO0"], "start_ts": [0], "duration_ns": [10_000], "framework_op": h,
                       "transfer_bytes": [3_000_000]})
    tr = analysis.Trace.from_builder(b)
    op = tr.hot_ops().loc["aten::gelu"]
    assert op["device_time_self_ns"] == 11_050
    assert op["achieved_bandwidth_bytes_per_s"] == pytest.approx(3e6 / 11.05e-6)
    assert op["achieved_bandwidth_bytes_per_s"] < TRN2_MEM_ROOF
    eng = tr.hot_ops(by="engine").loc["Sync"]         # 3 MB in 50 ns of Sync time: impossible, said so
    assert np.isnan(eng["achieved_bandwidth_bytes_per_s"]) and "HBM and DMA can move" in eng["note"]


def test_registry_generates_the_api():
    names = set(registry.REGISTRY)
    assert {"summary", "hot_ops", "roofline", "recommendations", "temporal_breakdown", "run_recommendations"} <= names
    assert names <= set(analysis.__all__)
    for n in analysis.__all__:
        assert getattr(analysis, n) is not None
    for spec in registry.REGISTRY.values():
        assert spec.doc, spec.name
        if spec.method and spec.subject == "trace":
            assert callable(getattr(analysis.Trace, spec.method)), spec.name
        for c in spec.columns:
            assert c.label and c.label != c.name or c.name in ("rank",), (spec.name, c.name)
    t = analysis.Trace.from_builder(two_matmul_trace())
    assert t.diff(t)["delta_ns"].abs().sum() == 0                     # pair analyses are Trace methods too
    ts = analysis.load(SAMPLE_TRACES)
    assert ts.rank_balance().equals(analysis.rank_balance(ts))        # analyses of several traces: TraceSet methods
    import analysis.analyses.summary as m  # a module, not the function (no rebinding of submodule names)
    assert m.__name__ == "analysis.analyses.summary" and callable(analysis.summary)
    labels = analysis.Trace.from_builder(two_matmul_trace()).summary()
    assert "MFU (estimated)" in set(labels["label"]) and "Step time (mean)" in set(labels["label"])
    assert (labels["label"] != labels["metric"]).all()
    assert registry.column_label("device_time_self_ns", "hot_ops") == "Device time (self)"
    assert registry.column_unit("device_time_self_ns", "hot_ops") == "ns"


def test_figure_index_covers_the_registered_figures():
    import analysis.figures as F

    assert {"summary", "hot_ops", "roofline", "dma_throughput", "rank_balance"} <= set(F.FIGURES)
    assert F.FIGURES["roofline"] is F.roofline_figure
    assert {s.figure for s in registry.REGISTRY.values() if s.figure} <= set(F.__all__)


def test_import_analysis_loads_neither_torch_nor_the_simulator():
    code = ("import sys, analysis; t = analysis.Trace; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith(('torch.', 'dash', 'plotly', "
            "'neuron_profiler.runtime', 'neuron_profiler.capture'))]; print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "[]"


def _module_imports(path: Path, package: str) -> set[str]:
    """``analysis.*`` imports of one file (relative ones resolved), deferred ones inside functions included: a
    cycle through a lazy import is still two modules that need each other."""
    tree = ast.parse(path.read_text())
    mod = package
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".")[: len(mod.split(".")) - node.level + (1 if path.name == "__init__.py" else 0)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("analysis"):
                out.add(target)
                out.update(f"{target}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("analysis"))
    return out


def test_the_analysis_package_has_no_import_cycle():
    root = REPO / "analysis"
    mods = {}
    for p in root.rglob("*.py"):
        rel = p.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts[:-1] if p.name == "__init__.py" else rel.parts)
        mods[name] = p
    graph = {m: {t for t in _module_imports(p, m) if t in mods and t != m} for m, p in mods.items()}
    # a package's __init__ importing its submodules is not a cycle with them; submodules may not import upward
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in graph[m]:
            if n == "analysis" or (m.startswith(n + ".") and mods[n].name == "__init__.py"):
                continue
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join(path + [m, n]))
            if not state.get(n):
                visit(n, path + [m])
        state[m] = 2

    for m in graph:
        if not state.get(m):
            visit(m, [])
    # layering: core imports no analysis, analyses import no view
    for m, deps in graph.items():
        if m.startswith("analysis.core"):
            assert not {d for d in deps if d.startswith(("analysis.analyses", "analysis.figures"))}, m
        if m.startswith("analysis.analyses"):
            assert not {d for d in deps if d.startswith(("analysis.figures", "analysis.report"))}, m


def test_a_copy_faster_than_a_cores_hbm_share_has_its_bandwidth():
    """The eager GPT sample's aten::copy_ moves 1.71 GB of HBM reads and writes (its DMA within HBM reads and
    writes each byte) in 4.37 ms: 390 GB/s, above one core's 362.5 GB/s share of the chip's HBM but within what
    the chip's HBM (2.9 TB/s) and the core's DMA (2 x 368 GB/s for copies within HBM) can move. It is shown
    (it read n/a), = HBM bytes / self time; a rate above that ceiling still reads NaN with its reason."""
    t = analysis.load(SAMPLE_TRACES / "gpt_train_step.nprof")
    h = t.hot_ops()
    for op in ("aten::copy_", "aten::cat"):
        r = h.loc[op]
        assert r["achieved_bandwidth_bytes_per_s"] == pytest.approx(r["hbm_bytes"] / (r["device_time_self_ns"] / 1e9))
        assert r["note"] == "", (op, r["note"])
    assert h.loc["aten::copy_", "achieved_bandwidth_bytes_per_s"] > TRN2_HBM_CORE
    from analysis.analyses.ceilings import hbm_ceiling
    from analysis.core.devices import device_peaks
    p = device_peaks(t, 0)
    assert hbm_ceiling(p, np.array([1, 8]), np.array([1, 1])).tolist() == [2 * 368e9, 2.9e12]
    for by in ("op", "module", "engine"):  # every NaN rate says why (host-only ops: no device time)
        g = t.hot_ops(by=by)
        silent = (g["achieved_bandwidth_bytes_per_s"].isna() | g["achieved_flops_per_s"].isna()) & (g["note"] == "")
        assert not silent.any(), (by, g.index[silent][:3].tolist())
    assert "no device time" in h.loc["aten::view", "note"]
