"""hot_ops(): grouping by op, module, stack and engine on hand-built traces."""
import pytest
from _traces import MM_FLOPS, neuron_builder, two_matmul_trace

import analysis


@pytest.fixture
def trn():
    return analysis.Trace.from_builder(two_matmul_trace())


def test_by_op(trn):
    h = trn.hot_ops()
    assert h.index.name == "op" and h.index[0] == "aten::mm"
    mm = h.loc["aten::mm"]
    assert mm["calls"] == 2 and mm["instructions"] == 2
    assert mm["device_time_self_ns"] == 2000 and mm["device_time_mean_ns"] == 1000
    assert mm["flops"] == 2 * MM_FLOPS and mm["hbm_bytes"] == 300_000
    assert mm["achieved_flops_per_s"] == pytest.approx(2 * MM_FLOPS / 2e-6)
    assert mm["share_of_step_time_percent"] == pytest.approx(100 * 2000 / 4000)   # steps last 2100 + 1900
    assert mm["host_time_ns"] == 400
    assert mm["host_launch_time_ns"] == 400        # both aten::mm rows launched their matmul (launch flows)
    assert h.loc["aten::relu", "host_launch_time_ns"] == 100
    # ProfilerStep#1 encloses mm1 and relu on the host: total = their device time
    st1 = h.loc["ProfilerStep#1"]
    assert st1["device_time_self_ns"] == 0 and st1["device_time_total_ns"] == 1500
    assert list(trn.hot_ops(top=1).index) == ["aten::mm"]


def test_by_module_engine_stack(trn):
    m = trn.hot_ops(by="module")
    assert set(m.index) == {"Net.fc1", "Net.fc2", "Net.act"}
    assert m.loc["Net.fc1", "device_time_self_ns"] == 1000
    e = trn.hot_ops(by="engine")
    assert e.loc["TensorMatrix", "device_time_self_ns"] == 2000 and e.loc["TensorMatrix", "calls"] == 2
    assert e.loc["Vector", "device_time_self_ns"] == 500
    with pytest.raises(ValueError, match="valid: op, module, stack, engine"):
        trn.hot_ops(by="kernel")


def test_module_and_stack_totals_include_children():
    b, t = neuron_builder()
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::mm", "aten::add"], "category": "cpu_op",
                                "start_ts": [0, 10], "duration_ns": [5, 5], "module": ["Net.blk", "Net.blk.fc"],
                                "stack": ["a.py(1): f", "a.py(1): f\nb.py(2): g"]})
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": [100, 300], "duration_ns": [100, 40],
                                "engine": "Vector", "framework_op": [h, h + 1]})
    tr = analysis.Trace.from_builder(b)
    m = tr.hot_ops(by="module")
    assert m.loc["Net.blk", "device_time_self_ns"] == 100 and m.loc["Net.blk", "device_time_total_ns"] == 140
    assert m.loc["Net.blk.fc", "device_time_total_ns"] == 40
    s = tr.hot_ops(by="stack")
    assert s.loc["a.py(1): f", "device_time_total_ns"] == 140


def test_nested_host_ops_total():
    b, t = neuron_builder()
    names = ["aten::linear", "aten::addmm", "aten::linear", "aten::t"]
    h = b.add_rows("host_ops", {"track": t["thread"], "name": names,
                                "category": "cpu_op", "start_ts": [0, 10, 100, 101], "duration_ns": [50, 20, 50, 2]})
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [200, 400], "duration_ns": [70, 30],
                                "engine": "TensorMatrix", "framework_op": [h + 1, h + 2]})
    hot = analysis.hot_ops(analysis.Trace.from_builder(b))
    assert hot.loc["aten::linear", "device_time_self_ns"] == 30
    assert hot.loc["aten::linear", "device_time_total_ns"] == 100   # its own kernel + addmm's
    assert hot.loc["aten::linear", "calls"] == 2
    assert hot.loc["aten::addmm", "device_time_total_ns"] == 70


@pytest.mark.parametrize("name", ["gpt_train_step.nprof", "ddp_train_rank0.nprof"])
def test_kinds_of_work_from_codes_equal_the_string_rows(name):
    """hot_ops' distinct (group, matmul, dtype, engine) per group, from one count per (group, row kind) over the
    memoised kind of each row, equals the distinct rows of the same columns as strings (the way it was computed
    before); its rows per (group, device) and distinct cores per group equal counts over the rows."""
    from pathlib import Path

    import numpy as np
    import pandas as pd

    from analysis.analyses.ceilings import _group_kinds, row_kinds
    from analysis.analyses.work import instruction_work

    t = analysis.load(Path(__file__).resolve().parents[2] / "sample_traces" / name)
    w = instruction_work(t)
    for by in ("op", "module", "engine"):
        codes = pd.factorize(w[by].astype(str))[0].astype(np.int64)
        k = int(codes.max()) + 1
        want = pd.DataFrame({"g": codes, "mm": w["is_matmul"].to_numpy(), "dt": w["dtype"].astype(str).to_numpy(),
                             "eng": w["engine"].astype(str).to_numpy()}).drop_duplicates()
        by_dev, cores, got = _group_kinds(w, codes, k, row_kinds(t))
        key = lambda df: sorted(set(map(str, df.itertuples(index=False))))  # noqa: E731
        assert len(got) >= len(want) > 0 and key(got) == key(want)
        dev, core = w["device"].to_numpy() + 1, w["nc_idx"].to_numpy() + 1
        want_dev = np.bincount(codes * (dev.max() + 1) + dev, minlength=k * (dev.max() + 1)).reshape(k, -1)
        assert np.array_equal(by_dev, want_dev)
        want_cores = [len(set(core[codes == g])) for g in range(k)]
        assert cores.tolist() == want_cores
        again = _group_kinds(w, codes, k)  # the kinds of w's rows computed, not memoised
        assert np.array_equal(again[0], by_dev) and np.array_equal(again[1], cores) and again[2].equals(got)
