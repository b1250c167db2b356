"""recommendations(): each rule fires on a trace built to trigger it, with its evidence and estimate."""
import numpy as np
import pytest
from _traces import MM_FLOPS, collective_rank, neuron_builder, two_matmul_trace

import analysis
from analysis.analyses.recommend import REC_COLUMNS


def _rules(trace):
    r = analysis.recommendations(trace)
    assert list(r.columns) == REC_COLUMNS
    return r.set_index("rule")


def test_transposes_and_model_flop_share():
    b, t = neuron_builder()
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [0, 1000, 2000], "duration_ns": 1000,
                                "engine": "TensorMatrix", "raw_flops": MM_FLOPS, "dtype": "bfloat16",
                                "tensor_instruction_type": ["", "TRANSPOSE", "TRANSPOSE"]})
    r = _rules(analysis.Trace.from_builder(b))
    low = r.loc["low_model_flop_share"]
    assert low["est_time_saved_ns"] == pytest.approx(3000 * (1 - 1 / 3))
    assert "33.3%" in low["evidence"]
    # the transposes alone would save their 2000 ns, but that is the same compute time the model-FLOP finding
    # claims: of the 3000 ns of compute only 1000 ns are left for it
    tr = r.loc["transpose_overhead"]
    assert tr["est_time_saved_ns"] == pytest.approx(1000) and "estimate 2.0 µs capped" in tr["evidence"]
    assert tr["event_rows"] == [1, 2] and tr["event_table"] == "instructions"
    assert r["time_pool"].tolist() == ["compute", "compute"]


def test_small_dma_and_spilling():
    b, t = neuron_builder()
    spill = b.add_track(kind="dma_queue", name="qScalarSpillReload0", parent=t["core"], device=0, nc_idx=0)
    b.add_rows("dma", {"track": [t["qSyncIO0"]] * 3 + [spill], "start_ts": [0, 100, 200, 300],
                       "duration_ns": [50, 50, 50, 1000], "transfer_bytes": [1024, 1024, 65536, 40000],
                       "source": "HBM", "dest": "SBUF"})
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": [0], "duration_ns": [2000], "engine": "Vector"})
    r = _rules(analysis.Trace.from_builder(b))
    small = r.loc["small_dma"]                   # average 26 896 B < 32 KiB
    # the two 1 KiB transfers took 100 ns; at the large transfers' 105 536 B / 1050 ns they would take 20.4 ns
    assert small["est_time_saved_ns"] == pytest.approx(100 - 2048 / (105_536 / 1050))
    assert small["event_table"] == "dma" and small["event_rows"] == [0, 1]
    sp = r.loc["spilling"]                       # 40 000 of 107 584 HBM-read bytes = 37% > 25%
    assert sp["est_time_saved_ns"] == 1000 and "37.2%" in sp["evidence"] and sp["event_rows"] == [3]


def test_collective_outliers_and_exposed_comm():
    b = collective_rank(0, [0, 10_000, 20_000, 30_000], [1000, 1000, 1000, 5000], seqs=[0, 1, 2, 3])
    r = _rules(analysis.Trace.from_builder(b))
    out = r.loc["collective_outliers"]
    assert r.loc["exposed_collectives", "est_time_saved_ns"] == 8000   # all 8000 ns of communication
    # the outlier's 4000 ns excess is part of that exposed communication time: nothing is left to claim
    assert out["est_time_saved_ns"] == 0 and "excess 4.0 µs" in out["evidence"] and "capped" in out["evidence"]
    assert out["event_rows"] == [3] and (out["start_ts"], out["end_ts"]) == (30_000, 35_000)


def test_fp32_matmuls_host_gaps_and_low_utilisation():
    b, t = neuron_builder()
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [0, 100_000], "duration_ns": 4000,
                                "engine": "TensorMatrix", "raw_flops": MM_FLOPS // 8, "dtype": "float32"})
    r = _rules(analysis.Trace.from_builder(b))
    # 8000 ns of compute: each row does MM_FLOPS / 8 = 0.5 µs of work at the FP32 peak -> 7000 ns at the roof;
    # BF16 would save 8000 * (1 - 19.66 / 78.64) = 6000 ns of the same time, so only 1000 ns remain for it
    low = r.loc["low_tensor_utilization"]
    assert low["est_time_saved_ns"] == pytest.approx(8000 - 2 * (MM_FLOPS // 8) / 19.66e12 * 1e9)
    fp = r.loc["fp32_matmuls"]
    assert fp["est_time_saved_ns"] == pytest.approx(8000 - low["est_time_saved_ns"])
    assert "estimate 6.0 µs capped" in fp["evidence"]
    gap = r.loc["host_bound_gaps"]
    assert gap["est_time_saved_ns"] == 96_000 and (gap["start_ts"], gap["end_ts"]) == (4000, 100_000)
    ranked = analysis.recommendations(analysis.Trace.from_builder(b))
    assert ranked["rule"].iloc[0] == "host_bound_gaps" and ranked["severity"].iloc[0] == "high"
    saved = ranked["est_time_saved_ns"].to_numpy()
    finite = saved[np.isfinite(saved)]
    assert (np.diff(finite) <= 0).all()


def test_throttling_counter():
    b, t = neuron_builder()
    c = b.add_track(kind="counter", name="Throttling", parent=t["core"], device=0, nc_idx=0, unit="percent")
    b.add_rows("counters", {"track": c, "ts": [0, 1000, 3000], "value": [0.0, 25.0, 0.0]})
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": [0], "duration_ns": [4000], "engine": "Vector"})
    r = _rules(analysis.Trace.from_builder(b))
    assert "2.0 µs" in r.loc["throttling", "evidence"] and r.loc["throttling", "severity"] == "medium"


def test_clean_trace_has_no_findings():
    assert analysis.recommendations(analysis.Trace.from_builder(two_matmul_trace())).empty
