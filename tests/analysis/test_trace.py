"""Trace / TraceSet / load(): files, windows, steps, devices, Kineto import and caching."""
import shutil

import pandas as pd
import pytest
from _traces import neuron_builder, two_matmul_trace
from realdata import real_trace

import analysis
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
    assert list(st.columns) == ["step", "start_ts", "end_ts", "duration_ns", "host_end_ts", "device_end_ts",
                                "optimizer_steps"]
    assert st["step"].tolist() == [1, 2] and st["duration_ns"].tolist() == [2100, 1900]
    assert st["device_end_ts"].tolist() == [2500, 4000]  # the device finished inside each host range
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


def test_load_kineto_caches_in_the_cache_dir_not_next_to_source(tmp_path, capsys):
    from neuron_profiler.importers import cache

    src = real_trace("kineto/docs_traces/after_fix_trace.json")
    local = tmp_path / "after_fix_trace.json"
    shutil.copy(src, local)
    t = analysis.load(local)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["after_fix_trace.json"]  # nothing beside the source
    entry = cache.lookup(local)
    assert entry is not None and entry.parent == cache.cache_dir()
    assert t.path == local and t.name == "after_fix_trace"
    assert len(t.instructions) >= 1 and t.header.source_format == "kineto-json"
    again = analysis.load(local)                  # served from the cache entry
    assert again._source.path == entry and len(again.instructions) == len(t.instructions)


def test_load_kineto_read_only_dir_stays_untouched(tmp_path):
    """A folder without write bits (like the shared real-traces corpus) gets nothing written into it, even for
    root, for whom os.access(W_OK) is always true; cache=False writes nothing at all."""
    src = real_trace("kineto/docs_traces/before_fix_trace.json")
    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(src, ro / "before_fix_trace.json")
    ro.chmod(0o555)
    try:
        t = analysis.load(ro / "before_fix_trace.json")
        assert sorted(p.name for p in ro.iterdir()) == ["before_fix_trace.json"]
        assert t.path == ro / "before_fix_trace.json" and len(t.instructions) >= 1
        mem = analysis.load(ro / "before_fix_trace.json", cache=False)
        assert mem._source.__class__.__name__ == "TraceBuilder" and len(mem.instructions) == len(t.instructions)
    finally:
        ro.chmod(0o755)


def test_breakdowns_of_a_neuron_trace_include_dma_and_collectives():
    b, t = neuron_builder()
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": [0], "duration_ns": [100], "engine": "Vector"})
    b.add_rows("dma", {"track": t["qSyncIO0"], "start_ts": [100], "duration_ns": [100], "transfer_bytes": [64]})
    b.add_rows("collectives", {"track": t["cc"], "start_ts": [300], "duration_ns": [100], "operation": "all_reduce"})
    tr = analysis.Trace.from_builder(b)
    tb = tr.temporal_breakdown().iloc[0]
    # compute [0,100), memory [100,200), communication [300,400): span 400, idle 100
    assert (tb["kernel_time_ns"], tb["compute_time_ns"], tb["idle_time_ns"], tb["non_compute_time_ns"]) == \
        (400, 100, 100, 200)
    by_type, _ = tr.kernel_breakdown()
    assert dict(zip(by_type["kernel_type"], by_type["sum_ns"])) == {"COMPUTATION": 100, "MEMORY": 100,
                                                                     "COMMUNICATION": 100}
    assert tr.comm_comp_overlap()["comm_time_ns"].iloc[0] == 100
    assert tr.device_activity() is not tr.device_activity()   # computed once, handed out as copies
    pd.testing.assert_frame_equal(tr.device_activity(), tr.device_activity())
    # explicit tables still override the defaults
    assert tr.temporal_breakdown(dma=None, collectives=None)["kernel_time_ns"].iloc[0] == 100


def test_breakdowns_of_a_kineto_import_leave_host_side_collectives_out():
    from _traces import gpu_builder

    b, t = gpu_builder()
    b.add_rows("instructions", {"track": t["stream"], "start_ts": [0], "duration_ns": [100], "engine": "Kernel",
                                "opcode": "kernel", "name": "gemm"})
    # record_param_comms rows of a gloo all_reduce: CPU-side, not device time
    b.add_rows("collectives", {"track": t["thread"], "start_ts": [150], "duration_ns": [100],
                               "operation": "all_reduce"})
    tr = analysis.Trace.from_builder(b)
    assert tr.is_kineto_import
    assert tr.temporal_breakdown()["kernel_time_ns"].iloc[0] == 100
    assert tr.comm_comp_overlap()["comm_time_ns"].iloc[0] == 0
    assert set(tr.kernel_breakdown()[0]["kernel_type"]) == {"COMPUTATION"}


def test_sample_ddp_trace_breakdowns_count_dma_and_collectives():
    from pathlib import Path

    from analysis.core.intervals import union_ns

    p = Path(__file__).resolve().parents[2] / "sample_traces" / "ddp_train_rank0.nprof"
    if not p.is_file():
        pytest.fail(f"captured sample trace {p} is missing (python sample_traces/regenerate.py)")
    tr = analysis.load(p)
    assert not tr.is_kineto_import
    cc = tr.collectives[tr.collectives["instruction"] < 0]
    assert len(cc) and len(tr.dma)
    ov = tr.comm_comp_overlap().iloc[0]
    assert ov["comm_time_ns"] == union_ns(
        cc["start_ts"].to_numpy(), (cc["start_ts"] + cc["duration_ns"]).to_numpy())
    types = set(tr.kernel_breakdown()[0]["kernel_type"])
    assert {"MEMORY", "COMMUNICATION", "COMPUTATION"} <= types
    tb = tr.temporal_breakdown().iloc[0]
    dma_end = int((tr.dma["start_ts"] + tr.dma["duration_ns"]).max())
    act = tr.device_activity()
    assert tb["kernel_time_ns"] == int(act["end_ts"].max() - act["start_ts"].min())
    assert int(act["end_ts"].max()) >= dma_end


def test_analysis_table_loads_only_the_columns_analyses_read(tmp_path):
    from analysis.trace import ANALYSIS_COLUMNS

    p = two_matmul_trace().write(tmp_path / "t.nprof")
    t = analysis.load(p)
    a = t.analysis_table("instructions")
    assert list(a.columns) == list(ANALYSIS_COLUMNS["instructions"])
    assert "sbuf_read_bytes" not in t._shared["tables"]["instructions"].columns  # not decoded yet
    s = t.summary_dict()
    assert s["model_flops"] > 0
    full = t.instructions                                   # the other columns are added on demand
    assert {"sbuf_read_bytes", "psum_write_bytes", "args"} <= set(full.columns)
    assert full.index.equals(a.index) and (full["raw_flops"] == a["raw_flops"]).all()
    w = t.select_steps(2)                                   # a window: same rows either way
    assert w.analysis_table("instructions").index.equals(w.instructions.index)
    assert list(w.instructions.index) == [2]
