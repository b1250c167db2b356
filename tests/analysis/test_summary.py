"""summary(): exact values on hand-built traces."""
import math

import pytest
from _traces import MM_FLOPS, TRN2_HBM_CORE, TRN2_PEAK_BF16, gpu_mm_trace, neuron_builder, two_matmul_trace

import analysis
from neuron_profiler.trace import TraceBuilder, make_header


@pytest.fixture
def trn():
    return analysis.Trace.from_builder(two_matmul_trace())


def test_summary_neuron_exact(trn):
    s = trn.summary_dict()
    assert s["total_time"] == 3000
    assert s["step_count"] == 2 and s["step_time_mean_ns"] == 2000 and s["step_time_max_ns"] == 2100
    assert s["device_active_percent"] == pytest.approx(2500 / 3000 * 100)
    assert s["TensorMatrix_active_percent"] == pytest.approx(2000 / 3000 * 100)
    assert s["Vector_active_percent"] == pytest.approx(500 / 3000 * 100)
    assert s["idle_percent"] == pytest.approx(500 / 3000 * 100)
    peak = TRN2_PEAK_BF16
    assert s["peak_flops_per_s"] == peak
    assert s["mfu_estimated_percent"] == pytest.approx(100 * 2 * MM_FLOPS / (peak * 3e-6))
    assert s["hfu_estimated_percent"] == pytest.approx(s["mfu_estimated_percent"])
    assert s["hbm_read_bytes"] == 200_000 and s["hbm_write_bytes"] == 100_000
    assert s["mbu_estimated_percent"] == pytest.approx(100 * 300_000 / 3e-6 / TRN2_HBM_CORE)
    assert s["mm_arithmetic_intensity"] == pytest.approx(2 * MM_FLOPS / 300_000)
    assert s["peak_flops_bandwidth_ratio"] == pytest.approx(peak / TRN2_HBM_CORE)
    df = trn.summary()
    assert list(df.columns) == ["metric", "value", "unit", "description", "label"]
    assert df.set_index("metric").loc["mfu_estimated_percent", "unit"] == "percent"


def test_summary_window_and_steps(trn):
    w = trn.select_steps(2)                      # [2600, 4500): only the second matmul
    s = w.summary_dict()
    assert s["total_time"] == 1900
    assert s["mfu_estimated_percent"] == pytest.approx(100 * MM_FLOPS / (TRN2_PEAK_BF16 * 1.9e-6))
    assert list(w.instructions.index) == [2]      # row ids are kept
    both = trn.select_steps(1, 2)
    assert both.time_range == (500, 4500)


def test_summary_transposes_split_mfu_and_hfu():
    b, t = neuron_builder()
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [0, 1000], "duration_ns": [1000, 1000],
                                "engine": "TensorMatrix", "opcode": "MATMUL", "raw_flops": [MM_FLOPS, MM_FLOPS],
                                "tensor_instruction_type": ["", "TRANSPOSE"], "dtype": "bfloat16"})
    s = analysis.summary_dict(analysis.Trace.from_builder(b))
    assert s["mfu_estimated_percent"] == pytest.approx(50.0, rel=1e-3)
    assert s["hfu_estimated_percent"] == pytest.approx(100.0, rel=1e-3)
    assert s["transpose_flops"] == MM_FLOPS


def test_summary_gpu_flops_from_shapes():
    g = analysis.Trace.from_builder(gpu_mm_trace(m=1024, k=1024, n=1024, kernel_ns=(4000, 1000)))
    s = g.summary_dict()
    # kernels [1000,5000), [5000,6000), [9000,11000) -> span 10 000 ns, active 7 000 ns
    assert s["total_time"] == 10_000 and s["device_active_percent"] == pytest.approx(70.0)
    peak = g.header.devices[0].spec.peak_flops_per_s["bfloat16"]
    assert s["model_flops"] == 2 * 1024 ** 3
    assert s["mfu_estimated_percent"] == pytest.approx(100 * 2 * 1024 ** 3 / (peak * 1e-5))
    # bytes: mm 3 bf16 [1024,1024] tensors; add reads 2 fp32 and writes 1 fp32 [1024,1024]
    assert s["hbm_total_bytes"] == 3 * 2 * 1024 ** 2 + 3 * 4 * 1024 ** 2
    assert math.isnan(s["hbm_read_bytes"])


def test_summary_unknown_peaks_are_nan_with_reason():
    b = TraceBuilder(make_header("tests", source_format="synthetic"))
    tr = b.add_track(kind="stream", name="stream 1")
    b.add_rows("instructions", {"track": tr, "start_ts": [0], "duration_ns": [10], "engine": "Kernel",
                                "raw_flops": [100]})
    df = analysis.summary(analysis.Trace.from_builder(b)).set_index("metric")
    assert math.isnan(df.loc["mfu_estimated_percent", "value"])
    assert "no matrix peak" in df.loc["mfu_estimated_percent", "description"]
    assert "no HBM bandwidth" in df.loc["mbu_estimated_percent", "description"]


BALANCE_CASES = [("sample", "gpt_train_step.nprof"), ("sample", "ddp_train_rank0.nprof"),
                 ("real", "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"),
                 ("real", "HolisticTraceAnalysis/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")]


@pytest.mark.parametrize("kind,name", BALANCE_CASES)
@pytest.mark.parametrize("lean", [False, True])
def test_balance_metrics_are_the_summary_values(kind, name, lean):
    """The cross-rank reduction's slim path gives exactly the summary's values (Neuron, GPU with shape-derived
    FLOPs, host-only), on the whole trace and on a window, memoised or lean."""
    from realdata import real_trace, sample_trace

    from analysis.analyses.summary import BALANCE_METRICS, balance_metrics, summary_dict

    path = sample_trace(name) if kind == "sample" else real_trace(name)
    t = analysis.load(path)
    lo, hi = t.time_range
    for tr in (t, t.window(lo + (hi - lo) // 3, hi - (hi - lo) // 4)):
        got = balance_metrics(tr, lean=lean)
        want = {m: summary_dict(tr)[m] for m in BALANCE_METRICS}
        assert list(got) == list(BALANCE_METRICS)
        for m in BALANCE_METRICS:
            assert got[m] == want[m] or (math.isnan(got[m]) and math.isnan(want[m])), (name, m)
    assert math.isfinite(balance_metrics(t)["total_time"]) and balance_metrics(t)["total_time"] > 0
