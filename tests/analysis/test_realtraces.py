"""Consistency of every analysis on real torch.profiler traces (tests/data/realtraces).

Traces are converted in memory (cache=False) so nothing is written next to the shared corpus.
"""
import numpy as np
import pandas as pd
import pytest
from realdata import real_trace

import analysis
from analysis.analyses.recommend import REC_COLUMNS
from analysis.core.intervals import union_ns

GPU_TRACES = [
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
    "TraceLens/torch_compile_triton/trace.json.gz",
    "HolisticTraceAnalysis/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz",
    "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",
    "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz",
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    "HolisticTraceAnalysis/triton_example/triton_example.json.gz",
    "kineto/docs_traces/before_fix_trace.json",
]
_loaded: dict = {}


def _load(rel):
    if rel not in _loaded:
        _loaded[rel] = analysis.load(real_trace(rel), cache=False)
    return _loaded[rel]


@pytest.mark.parametrize("rel", GPU_TRACES)
def test_analyses_are_consistent(rel):
    t = _load(rel)
    report = analysis.check(t)
    assert report.ok, str(report)
    s = t.summary_dict()
    ins = t.instructions
    assert 0 <= s["device_active_percent"] <= 100
    assert s["idle_percent"] == pytest.approx(100 - s["device_active_percent"])
    engines = [k for k in s if k.endswith("_active_percent") and k not in ("device_active_percent",
                                                                           "cc_op_active_time_percent")]
    assert sum(s[k] for k in engines) >= s["device_active_percent"] - 1e-9      # union <= sum of parts
    # summary's idle share equals the temporal breakdown of the same trace (same span, same activity)
    tb = t.temporal_breakdown().iloc[0]
    assert s["idle_percent"] == pytest.approx(tb["idle_time_pctg"], abs=0.01)
    # device time of an op: one union per launching host op (oracle), rows without one by their own label
    act = t.device_activity()
    linked = act[act["framework_op"] >= 0]
    per_call = {f: union_ns(g["start_ts"].to_numpy(), g["end_ts"].to_numpy())
                for f, g in linked.groupby("framework_op")}
    h = t.hot_ops()
    names = t.host_ops["name"].astype(str)
    if per_call:
        expect = pd.Series(per_call).groupby(names.reindex(list(per_call)).to_numpy()).sum()
        unlinked = set(analysis.instruction_work(t).loc[lambda w: w["framework_op"] < 0, "op"].astype(str))
        expect = expect[~expect.index.isin(unlinked)]
        assert h.loc[expect.index, "device_time_self_ns"].to_numpy() == pytest.approx(expect.to_numpy())
    # every engine's busy time lies between its union and the sum of its durations
    e = t.hot_ops(by="engine")
    for eng, g in ins.groupby("engine", observed=True):
        st = g["start_ts"].to_numpy()
        assert union_ns(st, st + g["duration_ns"].to_numpy()) - 1e-6 <= e.loc[eng, "device_time_self_ns"] \
            <= g["duration_ns"].sum() + 1e-6
    # roofline FLOPs = the work attributed to instructions
    w = analysis.instruction_work(t)
    r = t.roofline()
    assert r["flops"].sum() == pytest.approx(w["flops"].sum())
    assert set(r["bound"]) <= {"memory", "compute", "unknown"}
    # MFU: from the matmul FLOPs when they are known; NaN with the reason when some are unknown and none known
    if np.isfinite(s["model_flops"]):
        assert s["model_flops"] == pytest.approx(w.loc[w["is_matmul"], "flops"].sum())
        if np.isfinite(s["peak_flops_per_s"]) and s["model_flops"] > 0:
            assert s["mfu_estimated_percent"] == pytest.approx(
                100 * s["model_flops"] / (s["peak_flops_per_s"] * s["total_time"] * 1e-9))
            assert 0 < s["mfu_estimated_percent"] < 100
    else:
        assert w.loc[w["is_matmul"], "flops"].sum() == 0 and not w["flops_known"].all()
        desc = t.summary().set_index("metric").loc["mfu_estimated_percent", "description"]
        assert np.isnan(s["mfu_estimated_percent"]) and "unknown" in desc
    rec = t.recommendations()
    assert list(rec.columns) == REC_COLUMNS
    saved = rec["est_time_saved_ns"].to_numpy(float)
    assert (np.diff(saved[np.isfinite(saved)]) <= 0).all()
    assert np.nansum(saved) <= s["total_time"]


def test_bert_h100_flops_from_shapes():
    t = _load("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    h = t.hot_ops()
    ho = t.host_ops
    # every aten::addmm has bias [N], input [M,K], weight [K,N] -> 2·M·K·N
    ad = ho[ho["name"] == "aten::addmm"]
    import json
    expect = sum(2 * s[1][0] * s[1][1] * s[2][1] for s in map(json.loads, ad["input_shapes"].astype(str)))
    launched = set(analysis.instruction_work(t)["framework_op"])
    expect_launched = sum(2 * s[1][0] * s[1][1] * s[2][1] for i, s in zip(ad.index, map(json.loads,
                          ad["input_shapes"].astype(str))) if i in launched)
    assert h.loc["aten::addmm", "flops"] == pytest.approx(expect_launched)
    assert expect_launched <= expect
    assert t.summary_dict()["mfu_estimated_percent"] > 0
    assert t.hot_ops(by="module").index.str.startswith("BertLMHeadModel_0").any()
    # cudaLaunchKernel calls (launch flows) run inside their aten op: 0 < launch time <= op host time
    assert 0 < h.loc["aten::addmm", "host_launch_time_ns"] <= h.loc["aten::addmm", "host_time_ns"]
    assert (h["host_launch_time_ns"] <= h["host_time_ns"]).all()


def test_nccl_collective_bandwidth():
    t = _load("HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz")
    c = t.collective_stats()
    assert set(c["operation"]) >= {"all_reduce", "broadcast"}
    ar = c[c["operation"] == "all_reduce"]
    assert len(ar) and ar["group_size"].eq(2).all()
    assert ar["busbw_bytes_per_s"].to_numpy() == pytest.approx(ar["algbw_bytes_per_s"].to_numpy() * 2 * (2 - 1) / 2)
    assert c["algbw_bytes_per_s"].to_numpy() == pytest.approx((c["size_bytes"] / c["duration_ns"] * 1e9).to_numpy())


def test_two_rank_pair_matched_by_order():
    pair = [_load("HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz"),
            _load("HolisticTraceAnalysis/trace_filter/sampled_rank-1.json.gz")]
    m = analysis.collectives_across_ranks(pair)
    assert set(m["rank"]) == {0, 1} and (m["ranks_seen"] == 2).all()
    assert (m["arrival_skew_ns"] >= 0).all() and (m["wait_ns"] >= 0).all()
    done_after_all = m["end_ts"] >= m["start_ts"] + m["wait_ns"]
    assert (m.loc[done_after_all, "wait_ns"] + m.loc[done_after_all, "transfer_ns"]
            == m.loc[done_after_all, "duration_ns"]).all()
    mat = analysis.collective_skew_matrix(m)
    assert mat.shape == (m["collective"].nunique(), 2) and (mat.min(axis=1) == 0).all()


def test_host_only_trace():
    t = _load("HolisticTraceAnalysis/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")
    s = t.summary_dict()
    assert np.isnan(s["idle_percent"]) and np.isnan(s["mfu_estimated_percent"])
    assert t.roofline().empty and t.rank == 34
    assert (t.hot_ops()["device_time_self_ns"] == 0).all()
