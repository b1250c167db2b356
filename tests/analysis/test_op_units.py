"""Compare's fast paths agree with the per-row ones they replace: ``op_profile`` from one reduction per unit
(``analysis.analyses.opunits``) against ``op_profile`` on ``instruction_work``, and ``invocation_time`` read
from the tables against ``invocation_time`` from the activity frame; on the bundled samples, a synthetic trace
as the explorer bench writes it, and a real (Kineto) trace."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from _traces import neuron_builder
from realdata import real_trace, sample_trace

import analysis
from analysis.analyses import diff as diff_mod
from analysis.analyses.activity import invocation_time, trace_activity
from analysis.analyses.opunits import unit_profile

SAMPLES = ("cnn_inference.nprof", "gpt_train_step.nprof", "gpt_train_step_compiled.nprof", "ddp_train_rank0.nprof")
KEY_SETS = (("op", "module", "shape"), ("op",), ("op", "shape"), ("module",), ("shape", "op"))


def _both(path_or_trace, keys, monkeypatch):
    """(unit path, per-row path) of op_profile on two fresh copies of the trace (nothing memoised shared)."""
    load = (lambda: analysis.Trace.from_file(path_or_trace)) if not callable(path_or_trace) else path_or_trace
    fast_trace = load()
    assert unit_profile(fast_trace, keys, diff_mod._key_codes, diff_mod._group_ids) is not None  # the path applies
    fast = diff_mod.op_profile(fast_trace, keys)
    with monkeypatch.context() as m:
        m.setattr(diff_mod, "unit_profile", lambda *a: None)
        slow = diff_mod.op_profile(load(), keys)
    return fast, slow


@pytest.mark.parametrize("name", SAMPLES)
def test_unit_profile_equals_per_row_profile_on_samples(name, monkeypatch):
    for keys in KEY_SETS:
        fast, slow = _both(sample_trace(name), keys, monkeypatch)
        assert len(fast) > 0
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)   # same groups, order, values and dtypes


def test_unit_profile_on_the_bench_synthetic_trace(tmp_path, monkeypatch):
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    p = tmp_path / "syn.nprof"
    write_synthetic_trace(p, 30_000, cores=2, steps=4, seed=1)
    for keys in KEY_SETS[:3]:
        fast, slow = _both(p, keys, monkeypatch)
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    d = analysis.diff(analysis.Trace.from_file(p), analysis.Trace.from_file(p))
    assert (d["delta_ns"] == 0).all() and (d["calls_a"] == d["calls_b"]).all()


def _edge_trace():
    """Host ops with modules and shapes, rows without a launching op labelled by name or (empty name) opcode,
    one row whose op key is missing (no name, no opcode), and a wait instruction (not device time)."""
    b, t = neuron_builder()
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::mm", "aten::mm", "aten::gelu"],
                                "category": "cpu_op", "start_ts": [0, 10_000, 20_000], "duration_ns": 100,
                                "module": ["Net.fc", "Net.fc2", "Net.act"], "input_shapes": "[[8,8]]"})
    b.add_rows("instructions", {
        "track": [t["TensorMatrix"], t["TensorMatrix"], t["Vector"], t["TensorMatrix"], t["Vector"], t["Vector"],
                  t["Vector"], t["Vector"]],
        "start_ts": [500, 900, 10_500, 10_600, 20_500, 30_000, 30_100, 31_000],
        "duration_ns": [1000, 1000, 300, 400, 700, 50, 60, 70],
        "engine": ["TensorMatrix", "TensorMatrix", "Vector", "TensorMatrix", "Vector", "Vector", "Vector", "Vector"],
        "name": ["", "", "", "", "", "copy", "", "copy"],
        "opcode": ["MatMult", "MatMult", "TensorTensor", "MatMult", "Act", "Copy", "Copy", "SemaphoreWait"],
        "raw_flops": [1024, 1024, 64, 1024, 64, 0, 0, 0], "hbm_read_bytes": [512, 512, 128, 512, 256, 64, 64, 0],
        "dtype": ["bfloat16", "bfloat16", "", "bfloat16", "float32", "float32", "", ""],
        "framework_op": [h, h, h + 1, h + 1, h + 2, -1, -1, -1]})
    return b


def test_unit_profile_edge_cases_and_hand_values(monkeypatch):
    b = _edge_trace()
    fast, slow = _both(lambda: analysis.Trace.from_builder(b), ("op", "module"), monkeypatch)
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    mm = fast.loc[("aten::mm", "Net.fc")]
    assert mm["calls"] == 1 and mm["device_time_ns"] == 1400          # union of [500,1500) and [900,1900)
    assert mm["flops"] == 2048 and mm["hbm_bytes"] == 1024
    assert fast.loc[("aten::mm", "Net.fc2"), "device_time_ns"] == 500   # [10500,10800) u [10600,11000)
    copy = fast.loc[("copy", "")]                                       # no launching op: labelled by name
    assert copy["calls"] == 2 and copy["device_time_ns"] == 50 + 70     # rows, the union of its own rows
    assert fast.loc[("Copy", ""), "device_time_ns"] == 60               # empty name: the opcode
    by_op = _both(lambda: analysis.Trace.from_builder(b), ("op",), monkeypatch)[0]
    assert by_op.loc["aten::mm", "calls"] == 2 and list(by_op.index[:2]) == ["aten::mm", "aten::gelu"]


def test_per_row_path_where_the_unit_path_does_not_apply():
    gpu = analysis.load(real_trace("kineto/docs_traces/after_fix_trace.json"), cache=False)
    assert unit_profile(gpu, ("op",), diff_mod._key_codes, diff_mod._group_ids) is None  # shape-level work
    t = analysis.Trace.from_file(sample_trace("cnn_inference.nprof"))
    w = t.window(*t.time_range)
    assert unit_profile(w, ("op",), diff_mod._key_codes, diff_mod._group_ids) is None    # a window
    b, tr = neuron_builder()
    h = b.add_rows("host_ops", {"track": tr["thread"], "name": [""], "category": "cpu_op", "start_ts": [0],
                                "duration_ns": 100})
    b.add_rows("instructions", {"track": tr["Vector"], "start_ts": [10, 20], "duration_ns": 5, "engine": "Vector",
                                "name": ["a", "b"], "opcode": "Act", "raw_flops": 8, "framework_op": [h, h]})
    nameless = analysis.Trace.from_builder(b)
    assert unit_profile(nameless, ("op",), diff_mod._key_codes, diff_mod._group_ids) is None
    assert sorted(diff_mod.op_profile(nameless, ("op",)).index) == ["a", "b"]   # each row's own label


@pytest.mark.parametrize("path", [sample_trace(n) for n in SAMPLES[:2]]
                         + [real_trace("kineto/docs_traces/after_fix_trace.json"),
                            real_trace("TraceLens/torch_compile_triton/trace.json.gz")], ids=lambda p: p.name)
def test_invocation_time_from_tables_equals_activity_frame(path):
    direct = analysis.load(path, cache=False)
    assert not direct.has_memo("activity")
    a = invocation_time(direct)
    assert not direct.has_memo("activity")                  # read from the tables
    via = analysis.load(path, cache=False)
    trace_activity(via)
    b = invocation_time(via)
    assert len(a) > 0
    pd.testing.assert_series_equal(a, b, check_exact=True, check_index_type=False)
    assert np.array_equal(a.index.to_numpy(np.int64), b.index.to_numpy(np.int64))
