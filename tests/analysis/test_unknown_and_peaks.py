"""Unknown is never 0, and each op is held against the peak of its own dtype and engine (hand-computed
oracles on built traces: a V100's FP32 peak is 15.7 TFLOP/s, its FP16 tensor-core peak 125)."""
import math

import numpy as np
import pytest
from _traces import gpu_builder

import analysis


def _v100_conv_trace(flops: int, kernel_ns: int = 1_000_000, shapes: str | None = None):
    """A V100 trace: one FP32 cudnn_convolution (Kineto ``flops`` given) with one kernel, one memset launched
    by a convolution_backward recorded without shapes, and that backward's kernel."""
    b, t = gpu_builder("Tesla V100-SXM2-32GB")
    host = b.add_rows("host_ops", {
        "track": t["thread"], "name": ["ProfilerStep#1", "aten::cudnn_convolution", "aten::convolution_backward"],
        "category": ["user_annotation", "cpu_op", "cpu_op"], "start_ts": [0, 100, 300],
        "duration_ns": [10_000_000, 100, 100], "module": "",
        "input_shapes": ["[]", shapes or "[[8,64,56,56],[64,64,3,3]]", ""],
        "input_dtypes": ["[]", '["float","float"]', ""], "flops": [0, flops, 0]})
    b.add_rows("instructions", {
        "track": t["stream"], "start_ts": [1000, 2_000_000, 2_100_000],
        "duration_ns": [kernel_ns, 1000, 2_000_000], "engine": ["Kernel", "Memset", "Kernel"],
        "opcode": ["kernel", "memset", "kernel"], "name": ["cudnn_conv_fp32", "memset", "cudnn_wgrad"],
        "hbm_write_bytes": [0, 4096, 0], "framework_op": [host + 1, host + 2, host + 2]})
    return analysis.Trace.from_builder(b)


def test_check_fails_above_the_fp32_peak_of_a_v100():
    # 19.4 TFLOP/s of FP32 work: above the V100's FP32 peak (15.7), below its FP16 tensor peak (125)
    t = _v100_conv_trace(flops=19_400_000_000)          # 1 ms kernel
    rep = analysis.check(t)
    bad = rep.failures[rep.failures["invariant"] == "hot_ops FLOP/s within the peak of their dtype and engine"]
    assert len(bad) and bad["value"].max() == pytest.approx(19.4 / 15.7, rel=1e-6)
    h = t.hot_ops()
    assert math.isnan(h.loc["aten::cudnn_convolution", "achieved_flops_per_s"])  # never shown above its peak
    ok = analysis.check(_v100_conv_trace(flops=15_000_000_000))
    assert not len(ok.failures[ok.failures["invariant"].str.startswith("hot_ops FLOP/s")])
    h = _v100_conv_trace(flops=15_000_000_000).hot_ops()
    assert h.loc["aten::cudnn_convolution", "achieved_flops_per_s"] == pytest.approx(15e12)


def test_unpriced_device_time_is_nan_with_its_reason_never_0():
    t = _v100_conv_trace(flops=1_000_000_000)
    h = t.hot_ops()
    row = h.loc["aten::convolution_backward"]
    # the memset's 0 FLOPs are known, the 2 ms kernel's are not: NaN, not 0, and why
    assert math.isnan(row["flops"]) and math.isnan(row["achieved_flops_per_s"])
    assert "FLOPs unknown for 100 % of its device time" in row["note"] and "no input shapes" in row["note"]
    r = t.roofline()
    b = r[r["op"] == "aten::convolution_backward"].iloc[0]
    assert math.isnan(b["flops"]) and b["bound"] == "unknown" and "no input shapes" in b["note"]
    rep = analysis.check(t)
    assert rep.frame[rep.frame["invariant"] == "device time has FLOPs or a reason"]["status"].eq("pass").all()


@pytest.mark.parametrize("by", ["op", "module", "engine", "dtype"])
def test_roofline_groupings(by):
    r = _v100_conv_trace(flops=1_000_000_000).roofline(by=by)
    assert r.columns[0] == by and len(r)
    assert np.isfinite(r["flops"]).any()
    with pytest.raises(ValueError):
        _v100_conv_trace(flops=1).roofline(by="stack")


def test_device_identified_by_properties_when_its_name_is_unknown():
    from analysis.core.devices import peaks_at
    from neuron_profiler.trace.header import make_header
    from schemas import pb

    def dev(name, kind, props):
        d = pb.Device(index=0, kind=kind, name=name, simulated=False)
        for k, v in props.items():
            d.properties[k] = str(v)
        return d
    mi250 = {"numSms": 104, "totalGlobalMem": 68702699520, "computeMajor": 9, "computeMinor": 0}
    hdr = make_header("x", source_format="kineto-json", devices=[dev("AMD Radeon Graphics", "rocm", mi250)])
    p = peaks_at(hdr, 0)
    assert p.matrix_peak("bfloat16") == 181.05e12 and p.hbm_per_core == 1.6384e12   # an MI250 GCD / MI210
    assert "identified by its properties" in p.name
    # the same properties on a CUDA device, or another core count: not identified
    assert not peaks_at(make_header("x", source_format="kineto-json", devices=[dev("GPU", "cuda", mi250)]), 0).matrix
    odd = dict(mi250, numSms=96)
    assert not peaks_at(make_header("x", source_format="kineto-json", devices=[dev("AMD Radeon", "rocm", odd)]),
                        0).matrix


def test_compiled_ops_carry_their_dtype_and_compiled_runs_are_not_told_to_compile():
    from realdata import sample_trace

    t = analysis.load(sample_trace("gpt_train_step_compiled.nprof"), cache=False)
    w = analysis.instruction_work(t)
    mm = w[w["op"].astype(str).isin(["aten::bmm", "aten::mm", "aten::addmm"])]
    assert len(mm) and (mm["dtype"].astype(str) == "bfloat16").all()    # blank on the instructions themselves
    rec = t.recommendations()
    gaps = rec[rec["rule"] == "host_bound_gaps"]
    assert len(gaps) and "already uses torch.compile" in gaps["action"].iloc[0]
    assert "capture larger graphs (torch.compile" not in gaps["action"].iloc[0]


def test_mi250_gcds_and_mi210_by_name_and_memory():
    from neuron_profiler.hardware import gpu_variant_name

    assert gpu_variant_name("AMD Instinct MI250", 68702699520) == "AMD Instinct MI250 (one GCD)"
    assert gpu_variant_name("AMD Instinct MI250", 137438953472) == "AMD Instinct MI250"
    assert gpu_variant_name("AMD Instinct MI250X", 68702699520) == "AMD Instinct MI250X (one GCD)"
    assert gpu_variant_name("AMD Instinct MI210", 68702699520) == "AMD Instinct MI210"


def test_unpriced_reasons_by_sort_equal_those_by_count(monkeypatch):
    """unpriced_reason finds its distinct (note, op) keys by a count over their range, or by a sort where the
    range is large (many distinct notes x ops): both give the same Categorical (forced here by the threshold)."""
    import pandas as pd
    from realdata import real_trace, sample_trace

    from analysis.analyses import unpriced

    reasons = set()
    for path in (real_trace("HolisticTraceAnalysis/df_index_resolver/df_index_resolver.json.gz"),
                 real_trace("TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"),
                 sample_trace("gpt_train_step.nprof")):
        by_count = unpriced._unpriced_reason(analysis.load(path))
        monkeypatch.setattr(unpriced, "_COUNT_RANGE", 0)
        by_sort = unpriced._unpriced_reason(analysis.load(path))
        monkeypatch.setattr(unpriced, "_COUNT_RANGE", 4)
        pd.testing.assert_series_equal(by_count, by_sort)
        reasons |= set(by_count.cat.categories)
    assert len(reasons - {""}) >= 2, reasons  # the traces have rows with reasons, not only priced rows
