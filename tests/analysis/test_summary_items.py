"""Neuron Explorer's Summary items (analysis.time_split, flops_breakdown, summary_items, dma_bytes_by) on a
hand-built trace with hand-computed answers, and their invariants on the bundled captures."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from _traces import MM_FLOPS, TRN2_PEAK_BF16, gpu_mm_trace, two_matmul_trace

import analysis
from analysis.analyses.summary_items import DMA_GROUPINGS

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def _items_trace():
    """two_matmul_trace (device span [1000, 4000): mm1 [1000,2000), vec [2000,2500), mm2 [3000,4000)) plus
    DMA: input [2400,2800) 1000 B of a weight, a spill save [2500,2600) 2000 B, a hardware-dynamic spill
    reload [3500,3700) 4000 B; counters: Throttling 50 % at 1000, 0 at 2000, 20 % at 3000; State Buffer
    Usage 10 % at 1000, 40 % at 2500."""
    b = two_matmul_trace()
    core = 3  # two_matmul_trace's "nc0" track (neuron_builder: proc, thread, dev, core)
    assert b.rows("tracks") > core
    q = {n: b.add_track(kind="dma_queue", name=n, parent=core, device=0, nc_idx=0)
         for n in ("qSyncIO1", "qSyncSpillSave0", "qSyncSpillReload0")}
    b.add_rows("dma", {"track": [q["qSyncIO1"], q["qSyncSpillSave0"], q["qSyncSpillReload0"]],
                       "start_ts": [2400, 2500, 3500], "duration_ns": [400, 100, 200],
                       "transfer_bytes": [1000, 2000, 4000], "source": ["HBM", "SBUF", "HBM"],
                       "dest": ["SBUF", "HBM", "SBUF"], "queue_type": ["input", "output", "hardware_dynamic"],
                       "variable": ["weight.1", "act.2", "act.2"]})
    th = b.add_track(kind="counter", name="Throttling", parent=core, device=0, nc_idx=0, unit="percent")
    sb = b.add_track(kind="counter", name="State Buffer Usage", parent=core, device=0, nc_idx=0, unit="percent")
    b.add_rows("counters", {"track": [th, th, th, sb, sb], "ts": [1000, 2000, 3000, 1000, 2500],
                            "value": [50.0, 0.0, 20.0, 10.0, 40.0]})
    return analysis.Trace.from_builder(b)


@pytest.fixture(scope="module")
def t():
    return _items_trace()


def test_time_split_by_hand(t):
    # compute [1000,2500) ∪ [3000,4000) = 2500; DMA not under compute: [2500,2800) = 300; idle 200
    df = t.time_split().set_index("part")
    assert df["time_ns"].to_dict() == {"compute": 2500, "collectives": 0, "dma": 300, "other": 0, "idle": 200}
    assert df["percent"].sum() == pytest.approx(100.0)
    assert df.at["dma", "percent"] == pytest.approx(10.0)


def test_flops_breakdown_by_hand(t):
    df = t.flops_breakdown().set_index("component")
    cap = TRN2_PEAK_BF16 * 3000e-9
    throttled = TRN2_PEAK_BF16 * (1000 * 0.5 + 1000 * 0.0 + 1000 * 0.2) * 1e-9  # each sample held to the next
    assert df.at["model", "flops"] == 2 * MM_FLOPS and df.at["transpose", "flops"] == 0
    assert df.at["throttled", "flops"] == pytest.approx(throttled)
    assert df.at["unused", "flops"] == pytest.approx(cap - 2 * MM_FLOPS - throttled)
    assert df["percent"].sum() == pytest.approx(100.0)
    assert df.at["model", "percent"] == pytest.approx(t.summary_dict()["mfu_estimated_percent"])


def test_summary_items_by_hand(t):
    d = t.summary_items().set_index("metric")["value"]
    s = t.summary_dict()
    assert d["throttling_percent"] == pytest.approx(100 * 700 / 3000)
    assert d["throttle_active_time_percent"] == pytest.approx(100 * 2000 / 3000)
    raw = 100 * (2 * MM_FLOPS / 300_000) / s["peak_flops_bandwidth_ratio"]
    assert d["mfu_max_achievable_estimated_percent"] == pytest.approx(min(100.0, raw))
    assert d["spill_save_bytes"] == 2000 and d["spill_reload_bytes"] == 4000
    assert d["spill_reload_share_percent"] == pytest.approx(100 * 4000 / s["hbm_read_bytes"])
    assert d["sbuf_usage_mean_percent"] == pytest.approx((1500 * 10 + 1500 * 40) / 3000)
    assert d["sbuf_usage_max_percent"] == 40.0
    assert math.isnan(d["psum_usage_mean_percent"])  # no PSUM counter: unknown, and the note says why
    note = t.summary_items().set_index("metric").at["psum_usage_mean_percent", "note"]
    assert note.startswith("unknown") and "PSUM" in note


def test_dma_bytes_by_hand(t):
    src = t.dma_bytes_by("source").set_index("group")
    assert src["bytes"].to_dict() == {"Hardware dynamic (DGE)": 4000, "Static": 3000}
    assert src["transfers"].to_dict() == {"Hardware dynamic (DGE)": 1, "Static": 2}
    typ = t.dma_bytes_by("data_type").set_index("group")["bytes"].to_dict()
    assert typ == {"Dynamic": 4000, "IO": 2000, "Weights": 1000}
    with pytest.raises(ValueError, match="unknown grouping"):
        t.dma_bytes_by("queue")


def test_gpu_trace_says_unknown_rather_than_zero():
    t = analysis.Trace.from_builder(gpu_mm_trace())
    items = t.summary_items().set_index("metric")
    for m in ("throttling_percent", "spill_reload_bytes", "sbuf_usage_mean_percent"):
        assert math.isnan(items.at[m, "value"]) and items.at[m, "note"].startswith("unknown"), m
    fb = t.flops_breakdown().set_index("component")
    assert math.isnan(fb.at["throttled", "flops"]) and "Throttling" in fb.at["throttled", "note"]
    assert "includes any throttled" in fb.at["unused", "note"]
    assert t.dma_bytes_by().empty


@pytest.mark.parametrize("name", ["gpt_train_step.nprof", "ddp_train_rank0.nprof"])
def test_invariants_on_samples(name):
    t = analysis.load(SAMPLES / name)
    ts = t.time_split()
    assert ts["time_ns"].sum() == t.summary_dict()["total_time"] and (ts["time_ns"] >= 0).all()
    # compute share: the union of the compute intervals, by an independent sweep
    act = t.device_activity()
    comp = act[act["kernel_type"].astype(str) == "COMPUTATION"].sort_values("start_ts")
    busy, end = 0, -(2**62)
    for s, e in zip(comp["start_ts"].to_numpy(), comp["end_ts"].to_numpy()):
        if e > end:
            busy += e - max(s, end)
            end = e
    assert ts.set_index("part").at["compute", "time_ns"] == busy
    for by in DMA_GROUPINGS:
        g = t.dma_bytes_by(by)
        assert g["bytes"].sum() == int(t.dma["transfer_bytes"].sum())
        assert g["transfers"].sum() == len(t.dma)
    fb = t.flops_breakdown()
    assert np.isclose(fb["percent"].sum(), 100.0)


def test_no_device_work_gives_unknown_items_not_zeros():
    from neuron_profiler.trace import TraceBuilder, make_header

    t = analysis.Trace.from_builder(TraceBuilder(make_header("tests.analysis")))
    fb = t.flops_breakdown()
    assert fb["flops"].isna().all() and all(n.startswith("unknown") for n in fb["note"])
    items = t.summary_items()
    assert items["value"].isna().all() and all(n.startswith("unknown") for n in items["note"])
    assert t.time_split().empty and t.dma_bytes_by().empty


def _row_level_split(t) -> dict:
    """The exclusive split computed from the activity's rows (each part's mask grown over the rows, the union
    of the masked rows clipped to the analysed span): the independent way of what time_split computes from
    the per-kernel-type merged intervals."""
    from analysis.analyses.activity import analysis_span
    from analysis.analyses.summary_items import TIME_PARTS
    from analysis.core.intervals import union_ns

    lo, hi = analysis_span(t)
    act = t.device_activity()
    kt = act["kernel_type"].astype(str).to_numpy()
    s, e = act["start_ts"].to_numpy(), act["end_ts"].to_numpy()
    out, covered, mask = {}, 0, np.zeros(len(act), bool)
    for part, kind in TIME_PARTS:
        mask |= kt == kind
        cum = union_ns(s[mask], e[mask], lo, hi)
        out[part], covered = cum - covered, cum
    out["idle"] = (hi - lo) - covered
    return out


@pytest.mark.parametrize("name", ["gpt_train_step.nprof", "ddp_train_rank0.nprof"])
def test_time_split_equals_the_row_level_split(name):
    t = analysis.load(SAMPLES / name)
    lo, hi = t.time_range
    for tr in (t, t.window(lo + (hi - lo) // 3, lo + 2 * (hi - lo) // 3)):  # whole, and clipped to a window
        got = tr.time_split().set_index("part")["time_ns"].to_dict()
        assert got == _row_level_split(tr)


@pytest.mark.parametrize("name", ["gpt_train_step.nprof", "ddp_train_rank0.nprof"])
def test_hta_temporal_breakdown_from_unions_equals_the_activity_frame(name):
    """The HTA-compatible temporal breakdown keeps only the HTA activity's unions (hta_unions), not its rows:
    the same row as the breakdown computed from the HTA activity frame itself."""
    from analysis.analyses.hta import hta_activity

    t = analysis.load(SAMPLES / name)
    got = analysis.temporal_breakdown(t, hta_compatible=True)
    assert "hta_activity" not in t._memo  # not kept
    want = analysis.temporal_breakdown(t, activity=hta_activity(analysis.load(SAMPLES / name)))
    import pandas as pd

    pd.testing.assert_frame_equal(got, want)
