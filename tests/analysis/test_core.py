"""analysis.core: intervals against brute-force oracles, device peaks by header position, hand-out copies, runs."""
from __future__ import annotations

import numpy as np
import pytest
from _traces import gpu_builder, gpu_mm_trace, neuron_builder, two_matmul_trace

import analysis
from analysis.core.devices import device_peaks, peaks_at
from analysis.core.intervals import (
    coarsen,
    exclusive_ns,
    intersection_ns,
    merge,
    stable_key_order,
    union_by_key,
    union_ns,
)
from analysis.core.runs import group_runs
from neuron_profiler.hardware import gpu_spec
from schemas import pb


def _covered(s: np.ndarray, e: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Brute force: a 0/1 coverage array of [lo, hi) at 1 ns resolution."""
    cov = np.zeros(hi - lo, dtype=np.int64)
    for a, b in zip(s, e):
        if b > a:
            cov[max(a, lo) - lo:max(min(b, hi), lo) - lo] += 1
    return cov


@pytest.mark.parametrize("seed", range(4))
def test_union_merge_intersection_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    s = rng.integers(0, 2000, 300)
    e = s + rng.integers(0, 60, 300)
    cov = _covered(s, e, 0, 2100)
    assert union_ns(s, e) == int((cov > 0).sum())
    assert union_ns(s, e, 500, 900) == int((cov[500:900] > 0).sum())
    ms, me = merge(s, e)
    assert (ms[1:] > me[:-1]).all() and int((me - ms).sum()) == union_ns(s, e)
    s2 = rng.integers(0, 2000, 200)
    e2 = s2 + rng.integers(0, 40, 200)
    both = (cov > 0) & (_covered(s2, e2, 0, 2100) > 0)
    assert intersection_ns(*merge(s, e), *merge(s2, e2)) == int(both.sum())


@pytest.mark.parametrize("seed", range(4))
def test_exclusive_time_splits_concurrency_and_adds_up_to_the_union(seed):
    rng = np.random.default_rng(seed)
    n = 150
    s = rng.integers(0, 1000, n)
    e = s + rng.integers(0, 80, n)
    cov = _covered(s, e, 0, 1100).astype(float)
    expect = np.array([(1.0 / cov[a:b]).sum() if b > a else 0.0 for a, b in zip(s, e)])  # 1/k per ns
    got = exclusive_ns(s, e)
    assert got == pytest.approx(expect)
    assert got.sum() == pytest.approx(union_ns(s, e))
    win = (np.array([100, 600]), np.array([300, 900]))
    inside = exclusive_ns(s, e, win)
    mask = np.zeros(1100, bool)
    mask[100:300] = mask[600:900] = True
    expect_in = np.array([(mask[a:b] / np.where(cov[a:b] > 0, cov[a:b], 1)).sum() for a, b in zip(s, e)])
    assert inside == pytest.approx(expect_in)


def test_union_by_key_and_stable_key_order():
    rng = np.random.default_rng(7)
    k = rng.integers(0, 70_000, 5000)  # above 16 bits: two radix passes
    o = stable_key_order(k)
    assert (np.diff(k[o]) >= 0).all() and (o == np.argsort(k, kind="stable")).all()
    s = rng.integers(0, 10**6, 5000)
    e = s + rng.integers(0, 1000, 5000)
    got = union_by_key(k % 13, s, e)
    for key in range(13):
        assert got[key] == union_ns(s[k % 13 == key], e[k % 13 == key])
    cs, ce, busy = coarsen(np.array([0, 10, 100]), np.array([5, 20, 110]), 50)
    assert cs.tolist() == [0, 100] and ce.tolist() == [20, 110] and busy.tolist() == [15, 10]


def _gpu_trace_with_kineto_id(index: int, name: str = "NVIDIA A100-PG509-200"):
    """A GPU trace whose only device has Kineto id ``index``: its tracks say device 0 (the header position)."""
    b, t = gpu_builder(name)
    b.header.devices[0].index = index
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::mm"], "category": "cpu_op",
                                "start_ts": [0], "duration_ns": [100], "input_shapes": ["[[1024,1024],[1024,1024]]"],
                                "input_dtypes": ['["c10::BFloat16","c10::BFloat16"]']})
    b.add_rows("instructions", {"track": t["stream"], "start_ts": [1000], "duration_ns": [20_000], "engine": "Kernel",
                                "opcode": "kernel", "name": "sm80_gemm", "framework_op": [h]})
    return analysis.Trace.from_builder(b)


@pytest.mark.parametrize("kineto_id", [0, 1, 3, 9])
def test_device_spec_is_looked_up_by_header_position(kineto_id):
    """An A100 whose Kineto device id is 3 (or a V100 with 1, an MI300X with 9): tracks store position 0."""
    t = _gpu_trace_with_kineto_id(kineto_id)
    s = t.summary_dict()
    peak = gpu_spec("NVIDIA A100-PG509-200").peak_flops_per_s["bfloat16"]
    assert s["peak_flops_per_s"] == peak
    assert s["mfu_estimated_percent"] == pytest.approx(100 * 2 * 1024 ** 3 / (peak * 20e-6))
    assert np.isfinite(s["mbu_estimated_percent"])
    assert t.roofline()["peak_flops_per_s"].iloc[0] == peak      # the same lookup in every analysis
    assert t.devices.loc[0, "index"] == kineto_id and t.devices.loc[0, "position"] == 0
    assert t.device_spec(0).peak_flops_per_s["bfloat16"] == peak


def test_device_peaks_named_ceilings():
    t = analysis.Trace.from_builder(two_matmul_trace())
    p = device_peaks(t, 0)
    s = t.header.devices[0].spec
    assert p.hbm_per_core == s.hbm_bandwidth_per_core_bytes_per_s
    assert p.memory_roof == min(s.hbm_bandwidth_per_core_bytes_per_s, s.dma_bandwidth_per_core_bytes_per_s)
    assert p.matrix_peak() == s.peak_flops_per_s["bfloat16"]
    assert p.matrix_peak("float32") == s.peak_flops_per_s["float32"]      # Neuron: FP32 is not TF32
    gpu = peaks_at(analysis.Trace.from_builder(gpu_mm_trace()).header, 0)
    assert gpu.matrix_peak("float32") == gpu_spec("NVIDIA H100 80GB HBM3").peak_flops_per_s["tf32"]
    assert gpu.memory_roof == gpu.hbm_per_core                           # no DMA figure on GPUs
    assert peaks_at(pb.Header(), None) is None and peaks_at(t.header, 5) is None
    s_rows = t.summary().set_index("metric")
    assert s_rows.loc["memory_roof_bytes_per_s", "value"] == p.memory_roof
    assert s_rows.loc["hbm_bandwidth_bytes_per_s", "value"] == p.hbm_per_core


def test_results_are_the_callers_to_change():
    t = analysis.Trace.from_builder(two_matmul_trace())
    h = t.hot_ops()
    before = h["device_time_self_ns"].sum()
    h["device_time_self_ns"] = 0                       # a notebook edits "its" result
    h.loc["aten::mm", "flops"] = -1
    assert t.hot_ops()["device_time_self_ns"].sum() == before > 0
    assert t.hot_ops().loc["aten::mm", "flops"] > 0
    assert t.summary() is not t.summary()
    s = t.summary()
    s.loc[0, "value"] = -5.0
    assert t.summary().loc[0, "value"] != -5.0
    ins = t.instructions
    ins["duration_ns"] = 0
    assert t.instructions["duration_ns"].sum() > 0 and t.summary_dict()["device_active_percent"] > 0
    arr = t.hot_ops()["device_time_self_ns"].to_numpy()
    with pytest.raises(ValueError):
        arr[0] = 1.0                                   # numpy views of memoised frames are read-only
    d = t.summary_dict()
    d["total_time"] = 0
    assert t.summary_dict()["total_time"] == 3000
    bt, bn = t.kernel_breakdown()
    bt["sum_ns"] = 0
    assert t.kernel_breakdown()[0]["sum_ns"].sum() > 0


def test_memo_is_per_window_and_clearable():
    t = analysis.Trace.from_builder(two_matmul_trace())
    calls = []
    assert t.memo("k", lambda: calls.append(1) or 5) == 5 and t.memo("k", lambda: calls.append(1) or 6) == 5
    w = t.window(0, 2000)
    assert w.memo("k", lambda: 7) == 7           # windows have their own
    assert w.memo("s", lambda: 8, shared=True) == 8 and t.memo("s", lambda: 9, shared=True) == 8
    t.clear_memo()
    assert t.memo("k", lambda: 10) == 10 and len(calls) == 1


def _run(rank: int, run_id: str = "", dist: str = "", t0: int = 0):
    b, tr = neuron_builder(rank=rank, world_size=2, run_id=run_id)
    if dist:
        b.header.metadata["kineto.distributedInfo"] = dist
    b.add_rows("instructions", {"track": tr["Vector"], "start_ts": [t0], "duration_ns": [100], "engine": "Vector"})
    return analysis.Trace.from_builder(b, name=f"r{rank}-{run_id or dist[:8]}-{t0}")


def test_runs_by_run_id_distributed_job_and_time_overlap():
    a0, a1 = _run(0, "A"), _run(1, "A")
    lone0, lone1 = _run(0), _run(1)                 # no run id, no distributed info: each stands alone
    job = '{"backend":"nccl","rank":%d,"world_size":2}'
    d0, d1 = _run(0, dist=job % 0), _run(1, dist=job % 1)
    later = _run(1, dist=job % 1, t0=10**9)          # same job description, profiled at another time
    groups = group_runs([a0, lone0, d0, a1, lone1, d1, later])
    assert [[t.name for t in g] for g in groups] == [[a0.name, a1.name], [lone0.name], [d0.name, d1.name],
                                                     [lone1.name], [later.name]]
    ts = analysis.TraceSet([a0, a1, lone0, lone1])
    assert len(ts.groups()) == 3 and "A" in ts.runs and ts.by_run("A").ranks == [0, 1]
    rb = analysis.rank_balance(ts)
    assert rb.groupby("run")["rank"].apply(list).to_dict()["A"] == [0, 1]


def test_group_sum_leaves_out_rows_of_group_minus_one_and_sums_each_group_in_row_order():
    """Oracle: the sum of each group's values added one by one in row order (float sums in that order)."""
    from analysis.core.devicetime import group_sum

    rng = np.random.default_rng(3)
    g = rng.integers(-1, 5, 2000)
    v = rng.random(2000) * 10.0 ** rng.integers(-8, 8, 2000)
    want = np.zeros(6)
    for gi, vi in zip(g.tolist(), v.tolist()):
        if gi >= 0:
            want[gi] += vi
    assert np.array_equal(group_sum(g, v, 6), want)
    assert np.array_equal(group_sum(np.maximum(g, 0), v, 6)[1:], np.bincount(np.maximum(g, 0), v, 6)[1:])
