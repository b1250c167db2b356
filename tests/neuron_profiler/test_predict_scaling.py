"""The stage extrapolation T(k) = T(1) + (k - 1) (T(2) - T(1)) against dry runs of every layer, and the
reduced-size end-to-end calibration case of bench/bench_calibration_e2e.py."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from neuron_profiler.predict import PredictConfig, predict

pytestmark = pytest.mark.slow
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _pair(tmp_path, **kw):
    a = predict(PredictConfig(output_dir=str(tmp_path), run_id="extrapolated", **kw))
    b = predict(PredictConfig(output_dir=str(tmp_path), run_id="every_layer", simulate_layers=1, **kw))
    return a, b


def test_extrapolation_matches_a_dry_run_of_every_layer(tmp_path):
    """A Llama-3.1-8B TP=32 rank, 6 layers at seq 2048: each layer is the same program, so 1 and 2 layers
    predict 6 (measured: within 0.05 %; the few ns of difference come from where kernels of neighbouring
    layers meet on the in-order core)."""
    a, b = _pair(tmp_path, model="llama3.1-8b", instances=1, tp=32, layers=6, seq=2048, global_batch=32)
    sa, sb = a.stages[0], b.stages[0]
    assert [len(sa.traces), len(sb.traces)] == [2, 1]
    for f in ("tp_comm_ns", "saved_bytes", "params"):
        assert getattr(sa, f) == getattr(sb, f), f          # counts and sizes: exact
    for f in ("micro_ns", "mm_ns", "opt_ns"):
        assert getattr(sa, f) == pytest.approx(getattr(sb, f), rel=2e-3), f
    assert sa.mm_extra_ns(0.38) == pytest.approx(sb.mm_extra_ns(0.38), rel=2e-3)
    assert a.step.step_ns == pytest.approx(b.step.step_ns, rel=2e-3)


def test_reduced_calibration_case(tmp_path):
    """C5's layout (TP=32, PP=4, DP=8 over 32 trn1.32xlarge) with 8 layers at seq 512, through the bench: the
    bench's own re-implementation of the composition (used by --fit) gives predict's step time."""
    import bench.bench_calibration_e2e as b
    from neuron_profiler.predict.compose import fitted, framework
    r = b.run_row("C5", str(tmp_path), reduced=True)
    assert r["m"] == 128 and r["pp"] == 4 and r["wall_s"] < 120 and r["rss_gib"] < 8
    i = b.GRID_PF.index(fitted("matmul_peak_fraction"))
    assert b.step_at(r, i, framework("tp_overlap")) == pytest.approx(r["step_ns"], rel=1e-9)
    assert sum(r["breakdown_ns"].values()) == pytest.approx(r["step_ns"], rel=1e-12)
    assert r["breakdown_ns"]["pipeline bubble"] > 0   # C5 trains with ZeRO-1 (NxD 2.16 --use_zero1_optimizer 1)
    assert r["breakdown_ns"]["dp reduce_scatter"] > 0 and r["breakdown_ns"]["dp all_gather"] > 0
    assert "dp all_reduce" not in r["breakdown_ns"]
    f = b.fit([r, dict(r, row="C5b")])   # two identical rows: the fit lands where both are right or equal
    assert f["errors"]["C5"] == pytest.approx(f["errors"]["C5b"])
