"""recommendations(): each rule fires on a trace built to trigger it, with its evidence and estimate."""
import numpy as np
import pytest
from _traces import MM_FLOPS, collective_rank, neuron_builder, two_matmul_trace

import analysis
from analysis.recommend import REC_COLUMNS


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
    assert r.loc["transpose_overhead", "est_time_saved_ns"] == 2000
    assert r.loc["transpose_overhead", "event_rows"] == [1, 2]
    assert r.loc["transpose_overhead", "event_table"] == "instructions"
    low = r.loc["low_model_flop_share"]
    assert low["est_time_saved_ns"] == pytest.approx(3000 * (1 - 1 / 3))
    assert "33.3%" in low["evidence"]


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
    assert out["est_time_saved_ns"] == 4000 and out["event_rows"] == [3]
    assert (out["start_ts"], out["end_ts"]) == (30_000, 35_000)
    assert r.loc["exposed_collectives", "est_time_saved_ns"] == 8000


def test_fp32_matmuls_host_gaps_and_low_utilisation():
    b, t = neuron_builder()
    b.add_rows("instructions", {"track": t["TensorMatrix"], "start_ts": [0, 100_000], "duration_ns": 4000,
                                "engine": "TensorMatrix", "raw_flops": MM_FLOPS // 8, "dtype": "float32"})
    r = _rules(analysis.Trace.from_builder(b))
    fp = r.loc["fp32_matmuls"]
    assert fp["est_time_saved_ns"] == pytest.approx(8000 * (1 - 19.66 / 78.64))
    gap = r.loc["host_bound_gaps"]
    assert gap["est_time_saved_ns"] == 96_000 and (gap["start_ts"], gap["end_ts"]) == (4000, 100_000)
    assert "low_tensor_utilization" in r.index
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
