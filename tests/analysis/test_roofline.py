"""roofline() and roofline_ceilings() against hand-computed positions."""
import numpy as np
import pytest
from _traces import (
    MM_FLOPS,
    TRN2_DMA_CORE,
    TRN2_HBM_CORE,
    TRN2_MEM_ROOF,
    TRN2_PEAK_BF16,
    gpu_mm_trace,
    neuron_builder,
    two_matmul_trace,
)

import analysis


def test_ceilings_trn2():
    c = analysis.roofline_ceilings(analysis.Trace.from_builder(two_matmul_trace()))
    bf = c[(c["engine"] == "matrix") & (c["dtype"] == "bfloat16")].iloc[0]
    # on trn2 a core's share of chip HBM (2.9 TB/s / 8 cores) is just below its DMA engines' 368 GB/s
    assert TRN2_HBM_CORE < TRN2_DMA_CORE and TRN2_MEM_ROOF == TRN2_HBM_CORE
    assert bf["peak_flops_per_s"] == TRN2_PEAK_BF16 and bf["bandwidth_bytes_per_s"] == TRN2_MEM_ROOF
    assert bf["ridge_point"] == pytest.approx(TRN2_PEAK_BF16 / TRN2_MEM_ROOF)
    assert {"Vector", "Scalar", "GpSimd", "HBM", "DMA"} <= set(c["engine"])
    assert c.loc[c["engine"] == "HBM", "bandwidth_bytes_per_s"].iloc[0] == TRN2_HBM_CORE
    assert set(c["kind"]) == {"compute", "memory"}


def test_compute_bound_op_at_roof():
    r = analysis.roofline(analysis.Trace.from_builder(two_matmul_trace()))
    mm = r[r["op"] == "aten::mm"].iloc[0]
    assert mm["arithmetic_intensity"] == pytest.approx(2 * MM_FLOPS / 300_000)
    assert mm["bound"] == "compute" and mm["engine"] == "TensorMatrix" and mm["dtype"] == "bfloat16"
    assert mm["achieved_flops_per_s"] == pytest.approx(TRN2_PEAK_BF16, rel=1e-6)
    assert mm["efficiency_percent"] == pytest.approx(100.0, rel=1e-6)
    assert mm["time_saved_at_roof_ns"] == pytest.approx(0.0, abs=1e-3)
    assert "aten::relu" not in set(r["op"])          # no FLOPs, no bytes


def test_memory_bound_op_time_saved():
    b, t = neuron_builder()
    # 1e6 bytes at the 362.5 GB/s memory roof take 2759 ns; the op took 10 000 ns
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [0], "duration_ns": [10_000],
                                "engine": "TensorMatrix", "name": "dot", "raw_flops": [1_000_000],
                                "hbm_read_bytes": [1_000_000], "dtype": "bfloat16"})
    r = analysis.roofline(analysis.Trace.from_builder(b)).iloc[0]
    assert r["bound"] == "memory" and r["op"] == "dot"
    t_roof = 1e6 / TRN2_MEM_ROOF * 1e9
    assert r["time_at_roof_ns"] == pytest.approx(t_roof)
    assert r["time_saved_at_roof_ns"] == pytest.approx(10_000 - t_roof)
    assert r["roof_flops_per_s"] == pytest.approx(1.0 * TRN2_MEM_ROOF)
    assert r["distance_to_roof"] == pytest.approx(1 - (1e6 / 1e-5) / TRN2_MEM_ROOF)


def test_op_time_is_union_of_its_instructions_and_dma():
    """One invocation: DMA in [0, 4000), Vector [4000, 5000) and a Sync trigger [4500, 4600) overlapping it,
    DMA out [5000, 6000) -> elapsed 6000 ns (not the 1100 ns of engine busy time)."""
    b, t = neuron_builder()
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::add"], "start_ts": [0], "duration_ns": [100]})
    b.add_rows("instructions", {"track": [t["Vector"], t["Scalar"]], "start_ts": [4000, 4500],
                                "duration_ns": [1000, 100], "engine": ["Vector", "Sync"], "name": "aten::add",
                                "framework_op": h, "raw_flops": [1000, 0], "hbm_read_bytes": [0, 8000],
                                "dtype": "float32"})
    q = t["qSyncIO0"]
    b.add_rows("dma", {"track": q, "start_ts": [0, 5000], "duration_ns": [4000, 1000], "framework_op": h,
                       "transfer_bytes": [8000, 4000]})
    r = analysis.roofline(analysis.Trace.from_builder(b)).set_index("op")
    assert r.loc["aten::add", "device_time_ns"] == 6000
    assert r.loc["aten::add", "achieved_flops_per_s"] == pytest.approx(1000 / 6e-6)
    assert (r["achieved_flops_per_s"] <= r["roof_flops_per_s"] * (1 + 1e-9)).all()


def test_fp32_uses_fp32_peak_and_gpu_shapes():
    g = analysis.Trace.from_builder(gpu_mm_trace(m=512, k=512, n=512))
    r = g.roofline().set_index("op")
    spec = g.header.devices[0].spec
    assert r.loc["aten::mm", "peak_flops_per_s"] == spec.peak_flops_per_s["bfloat16"]
    assert r.loc["aten::mm", "flops"] == 2 * 512 ** 3
    assert r.loc["aten::mm", "arithmetic_intensity"] == pytest.approx(2 * 512 ** 3 / (3 * 2 * 512 ** 2))
    # the fp32 add is judged against the CUDA-core (vector) peak and is memory bound
    assert r.loc["aten::add", "peak_flops_per_s"] == spec.vector_flops_per_s["CUDA cores"]
    assert r.loc["aten::add", "bound"] == "memory"
    assert np.isfinite(r["time_saved_at_roof_ns"]).all()
    assert g.roofline(by="module").columns[0] == "module"


def _union_oracle(s: np.ndarray, e: np.ndarray) -> int:
    total, reach = 0, None
    for a, b in sorted(zip(s.tolist(), e.tolist())):
        if reach is None or a >= reach:
            total, reach = total + (b - a), b
        elif b > reach:
            total, reach = total + (b - reach), b
    return total


@pytest.mark.parametrize("keys,far", [
    (lambda k: k, False),                    # row ids: their own dense codes
    (lambda k: k * 10**9 + 5, False),        # sparse keys: factorized
    (lambda k: k - 20, False),               # negative keys
    (lambda k: k, True),                     # a time span too wide to pack (key, time) in one int64
])
def test_union_by_key_matches_brute_force(keys, far):
    from analysis.core.intervals import union_by_key

    rng = np.random.default_rng(3)
    n = 3000
    k = keys(rng.integers(0, 40, n))
    s = rng.integers(0, 10**6, n) + (np.where(k % 2 == 0, 2 * 10**17, 0) if far else 0)
    e = s + rng.integers(0, 10**4, n)
    got = union_by_key(k, s, e)
    assert got.index.is_monotonic_increasing and got.dtype == np.int64
    assert list(got.index) == sorted(set(k.tolist()))
    for key in np.unique(k):
        assert got[key] == _union_oracle(s[k == key], e[k == key])


def test_group_codes_by_first_row_equal_pandas_factorize():
    """roofline numbers its (op, dtype, device) groups by first appearance without a hash table where the keys
    are small; oracle: pd.factorize (same codes, same distinct keys in the same order), also on keys it hands
    over to pandas (negative, or far beyond the row count)."""
    import pandas as pd

    from analysis.analyses.roofline import _factorize

    rng = np.random.default_rng(11)
    for key in (rng.integers(0, 50, 5000), rng.integers(0, 10**9, 300), rng.integers(-3, 4, 100),
                np.array([7, 7, 0, 3, 0], np.int64), np.zeros(0, np.int64)):
        g, u = _factorize(key.astype(np.int64))
        want_g, want_u = pd.factorize(key.astype(np.int64))
        assert g.dtype == np.int64 and np.array_equal(g, want_g) and np.array_equal(u, np.asarray(want_u))
