"""diff(): alignment and the three-way split of each op's delta."""
import pytest
from _traces import MM_FLOPS, gpu_mm_trace, neuron_builder, two_matmul_trace

import analysis


def _mm_trace(calls: int, dur: int, hbm: int, extra_op: bool = False):
    b, t = neuron_builder()
    names = ["aten::mm"] * calls + (["aten::gelu"] if extra_op else [])
    h = b.add_rows("host_ops", {"track": t["thread"], "name": names, "category": "cpu_op",
                                "start_ts": [i * 10_000 for i in range(len(names))], "duration_ns": 100,
                                "module": "Net.fc", "input_shapes": "[[128,512],[512,128]]"})
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [i * 10_000 + 500 for i in range(calls)],
                                "duration_ns": dur, "engine": "TensorMatrix", "raw_flops": MM_FLOPS,
                                "hbm_read_bytes": hbm, "dtype": "bfloat16",
                                "framework_op": [h + i for i in range(calls)]})
    if extra_op:
        b.add_rows("instructions", {"track": t["Vector"], "start_ts": [calls * 10_000 + 500], "duration_ns": 700,
                                    "engine": "Vector", "framework_op": [h + calls], "hbm_read_bytes": 10})
    return analysis.Trace.from_builder(b)


def test_more_calls_and_slower_per_call():
    a, b = _mm_trace(2, 1000, 100_000), _mm_trace(3, 1500, 100_000, extra_op=True)
    d = analysis.diff(a, b)
    mm = d.loc[("aten::mm", "Net.fc", "[[128,512],[512,128]]")]
    assert mm["calls_a"] == 2 and mm["calls_b"] == 3 and mm["delta_ns"] == 2500
    assert mm["more_calls_ns"] == pytest.approx(1000) and mm["slower_per_call_ns"] == pytest.approx(1500)
    assert mm["moved_across_roofline_ns"] == 0 and mm["bound_a"] == mm["bound_b"] == "compute"
    new = d.loc[("aten::gelu", "Net.fc", "[[128,512],[512,128]]")]
    assert new["calls_a"] == 0 and new["more_calls_ns"] == 700 and new["delta_ns"] == 700
    parts = d["more_calls_ns"] + d["slower_per_call_ns"] + d["moved_across_roofline_ns"]
    assert parts.to_numpy() == pytest.approx(d["delta_ns"].to_numpy())
    assert d.index[0][0] == "aten::mm"                                   # largest |delta| first


def test_moved_across_the_roofline():
    a = _mm_trace(2, 1000, 100_000)              # AI ~ 786 FLOP/B > ridge 108 -> compute
    b = _mm_trace(2, 3000, 10_000_000)           # AI ~ 7.9 -> memory
    mm = analysis.diff(a, b).iloc[0]
    assert (mm["bound_a"], mm["bound_b"]) == ("compute", "memory")
    assert mm["moved_across_roofline_ns"] == pytest.approx(4000) and mm["slower_per_call_ns"] == 0


def test_cross_device_diff_by_op_and_shape():
    gpu = analysis.Trace.from_builder(gpu_mm_trace(m=128, k=512, n=128))
    trn = analysis.Trace.from_builder(two_matmul_trace())
    d = analysis.diff(gpu, trn, keys=("op", "shape"))
    mm = d.loc[("aten::mm", "[[128,512],[512,128]]")]
    assert mm["calls_a"] == 1 and mm["calls_b"] == 2
    assert mm["device_time_a_ns"] == 5000 and mm["device_time_b_ns"] == 2000
    with pytest.raises(ValueError, match="valid: op, module, shape"):
        analysis.diff(gpu, trn, keys=("op", "kernel"))
