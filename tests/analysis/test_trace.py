"""Trace / TraceSet / load(): files, windows, steps, devices, Kineto import and caching."""
import shutil

import pytest
from _traces import neuron_builder, two_matmul_trace

import analysis
from conftest import real_trace
from neuron_profiler.trace import TraceFormatError


def test_load_nprof_roundtrip(tmp_path):
    p = two_matmul_trace().write(tmp_path / "rank00000_window000.nprof")
    t = analysis.load(p)
    assert isinstance(t, analysis.Trace) and t.name == "rank00000_window000" and t.path == p
    assert t.rank == 0 and t.simulated
    ins = t.instructions
    assert list(ins.index) == [0, 1, 2] and str(ins["engine"].dtype) == "category"
    assert ins["start_ts"].dtype == "int64"
    assert t.time_range == (500, 4500)
    dev = t.devices
    assert dev.loc[0, "kind"] == "trn2" and dev.loc[0, "num_cores"] == 8
    assert dev.loc[0, "peak_flops_per_s_bfloat16"] == pytest.approx(78.64e12)
    # analyses on a file trace equal those on the in-memory builder
    mem = analysis.Trace.from_builder(two_matmul_trace())
    assert t.summary_dict()["mfu_estimated_percent"] == pytest.approx(mem.summary_dict()["mfu_estimated_percent"])


def test_window_overlap_keeps_row_ids():
    t = analysis.Trace.from_builder(two_matmul_trace())
    w = t.window(1500, 2100)                      # overlaps mm1 [1000,2000) and vec [2000,2500)
    assert list(w.instructions.index) == [0, 1]
    assert w.time_range == (1500, 2100)
    # nested windows intersect
    assert t.window(1000, 3000).window(2500, 5000).time_range == (2500, 3000)
    with pytest.raises(ValueError, match="after its start"):
        t.window(10, 10)
    # flows keep the links with at least one end in the window
    assert set(w.flows["dst_row"]) == {0, 1}


def test_steps_and_bad_step_selection():
    t = analysis.Trace.from_builder(two_matmul_trace())
    st = t.steps()
    assert list(st.columns) == ["step", "start_ts", "end_ts", "duration_ns"]
    assert st["step"].tolist() == [1, 2] and st["duration_ns"].tolist() == [2100, 1900]
    with pytest.raises(ValueError, match="available steps: \\[1, 2\\]"):
        t.select_steps(7)


def test_own_step_markers_and_gpu_annotation_preference():
    b, tr = neuron_builder()
    b.add_rows("host_ops", {"track": tr["thread"], "name": ["NeuronStep#4", "ProfilerStep#5", "ProfilerStep#5"],
                            "category": ["user_annotation", "user_annotation", "gpu_user_annotation"],
                            "start_ts": [0, 100, 90], "duration_ns": [100, 50, 70]})
    st = analysis.steps(analysis.Trace.from_builder(b))
    assert st["step"].tolist() == [4, 5]
    assert st.loc[1, "start_ts"] == 100 and st.loc[1, "duration_ns"] == 50   # host copy wins


def test_directory_is_a_traceset(tmp_path):
    for r in (1, 0):
        b, t = neuron_builder(rank=r, world_size=2)
        b.add_rows("instructions", {"track": t["Vector"], "start_ts": [0], "duration_ns": [5], "engine": "Vector"})
        b.write(tmp_path / "run" / f"rank{r:05d}_window000.nprof")
    ts = analysis.load(tmp_path / "run")
    assert isinstance(ts, analysis.TraceSet) and ts.ranks == [0, 1] and len(ts) == 2
    assert [t.rank for t in ts] == [0, 1]


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        analysis.load(tmp_path / "missing.nprof")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(ValueError, match="expected .nprof"):
        analysis.load(tmp_path / "x.txt")
    (tmp_path / "bad.nprof").write_bytes(b"not a trace at all")
    with pytest.raises(TraceFormatError):
        analysis.load(tmp_path / "bad.nprof")
    with pytest.raises(ValueError, match="valid:"):
        analysis.Trace.from_builder(two_matmul_trace()).table("kernels")


def test_load_kineto_caches_nprof_next_to_source(tmp_path):
    src = real_trace("kineto/docs_traces/after_fix_trace.json")
    local = tmp_path / "after_fix_trace.json"
    shutil.copy(src, local)
    t = analysis.load(local)
    assert (tmp_path / "after_fix_trace.nprof").is_file()
    assert len(t.instructions) >= 1 and t.header.source_format == "kineto-json"
    again = analysis.load(local)                  # served from the cache
    assert again.path == tmp_path / "after_fix_trace.nprof"
    assert len(again.instructions) == len(t.instructions)


def test_load_kineto_read_only_dir_stays_in_memory(tmp_path, monkeypatch):
    src = real_trace("kineto/docs_traces/before_fix_trace.json")
    shutil.copy(src, tmp_path / "before_fix_trace.json")
    monkeypatch.setattr(analysis.trace.os, "access", lambda *a, **k: False)   # folder not writable
    t = analysis.load(tmp_path / "before_fix_trace.json")
    assert not (tmp_path / "before_fix_trace.nprof").exists()
    assert t.path == tmp_path / "before_fix_trace.json" and len(t.instructions) >= 1
