"""The metric formulas, checked against values computed by hand."""
import math

import numpy as np
import pytest

from analysis import metrics as M


def test_utilisation_formulas():
    # 1e12 FLOPs in 1 ms on a 2e15 FLOP/s device -> 1e15 FLOP/s achieved -> 50 %
    assert M.mfu_pct(1e12, 1_000_000, 2e15) == pytest.approx(50.0)
    assert M.hfu_pct(1.5e12, 1_000_000, 2e15) == pytest.approx(75.0)
    # 1 GB in 1 ms = 1 TB/s on a 4 TB/s stack -> 25 %
    assert M.mbu_pct(1e9, 1_000_000, 4e12) == pytest.approx(25.0)
    assert math.isnan(M.mfu_pct(1e12, 1_000_000, float("nan")))
    assert math.isnan(M.mfu_pct(1e12, 0, 2e15))


def test_roofline_formulas():
    assert M.ridge_point(100e12, 1e12) == pytest.approx(100.0)
    assert M.roof_flops_per_s(10.0, 100e12, 1e12) == pytest.approx(10e12)    # memory side
    assert M.roof_flops_per_s(1000.0, 100e12, 1e12) == pytest.approx(100e12)  # compute side
    # 1e9 FLOPs (10 µs at 100 TFLOP/s) and 1e6 bytes (1 µs at 1 TB/s) -> 10 µs at the roof
    assert M.time_at_roof_ns(1e9, 1e6, 100e12, 1e12) == pytest.approx(10_000.0)
    assert M.time_at_roof_ns(0, 1e6, 100e12, 1e12) == pytest.approx(1_000.0)
    assert math.isnan(M.arithmetic_intensity(5.0, 0))


@pytest.mark.parametrize("op,n,factor", [("all_reduce", 8, 2 * 7 / 8), ("allreduce", 4, 1.5), ("AllGather", 8, 7 / 8),
                                         ("reduce_scatter", 2, 0.5), ("all_to_all", 4, 0.75), ("broadcast", 8, 1.0),
                                         ("ncclKernel_AllReduce_RING_LL_Sum_float", 2, 1.0)])
def test_busbw_factors(op, n, factor):
    assert M.busbw_factor(op, n) == pytest.approx(factor)
    # 1 MiB in 1 ms -> 1.048576 GB/s algbw
    alg = M.algbw_bytes_per_s(1 << 20, 1_000_000)
    assert alg == pytest.approx(1.048576e9)
    assert M.busbw_bytes_per_s(alg, op, n) == pytest.approx(alg * factor)


def test_busbw_vectorised_and_unknown():
    out = M.busbw_factor(np.array(["all_reduce", "mystery"]), np.array([2, 2]))
    assert out[0] == pytest.approx(1.0) and math.isnan(out[1])


def test_peak_lookup_and_dtypes():
    peaks = {"bfloat16": 80e12, "float32": 20e12, "fp8": 160e12}
    assert M.lookup_peak(peaks) == 80e12
    assert M.lookup_peak(peaks, "c10::BFloat16") == 80e12
    assert M.lookup_peak(peaks, "float") == 20e12
    assert M.lookup_peak(peaks, "half") == 80e12      # fp16 falls back to the 16-bit peak
    assert math.isnan(M.lookup_peak({}, "bfloat16"))
    assert M.dtype_bytes("c10::BFloat16") == 2 and M.dtype_bytes("float") == 4
    assert math.isnan(M.dtype_bytes("Scalar"))
    assert M.adjusted_flops_multiplier("float32", "trn2") == 4.0
    assert M.adjusted_flops_multiplier("float32", "cuda") == 1.0
