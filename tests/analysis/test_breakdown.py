"""Breakdown definitions on small hand-built tables (expected values derived by hand from the definitions)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from realdata import real_trace

from analysis.analyses.breakdown import (
    classify_kernels,
    comm_comp_overlap,
    device_activity,
    hta_kernel_selection,
    kernel_breakdown,
    merge_intervals,
    temporal_breakdown,
)
from analysis.analyses.idle import idle_time_breakdown


def _ins(rows):
    """rows: (name, start_ns, dur_ns[, opcode, engine, track, correlation])"""
    cols = {"name": [], "start_ts": [], "duration_ns": [], "opcode": [], "engine": [], "track": [],
            "correlation_id": []}
    for r in rows:
        name, s, d = r[:3]
        opcode = r[3] if len(r) > 3 else ("gpu_memcpy" if name.startswith("Memcpy") else "kernel")
        cols["name"].append(name)
        cols["start_ts"].append(s)
        cols["duration_ns"].append(d)
        cols["opcode"].append(opcode)
        cols["engine"].append(r[4] if len(r) > 4 else "Kernel")
        cols["track"].append(r[5] if len(r) > 5 else 0)
        cols["correlation_id"].append(r[6] if len(r) > 6 else -1)
    df = pd.DataFrame(cols)
    for c in ("name", "opcode", "engine"):
        df[c] = df[c].astype("category")
    return df


def test_classify_kernels_follows_hta_get_kernel_type():
    names = pd.Series(["ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)", "ncclDevKernel_Broadcast_RING_LL",
                       "Memcpy HtoD (Pageable -> Device)", "Memset (Device)", "dma_request", "Stream Sync",
                       "Context Sync", "Stream Wait Event", "void gemm<float>()", "my_Memcpy_helper",
                       "nccl_util_no_kernel", "triton_poi_fused_add_0"])
    expect = ["COMMUNICATION", "COMMUNICATION", "MEMORY", "MEMORY", "MEMORY", "OTHER", "OTHER", "COMPUTATION",
              "COMPUTATION", "OTHER", "COMPUTATION", "COMPUTATION"]
    assert classify_kernels(names).tolist() == expect
    assert classify_kernels(names.astype("category")).tolist() == expect


def test_merge_intervals_union():
    s, e = merge_intervals(np.array([10, 0, 5, 30, 30]), np.array([20, 6, 7, 30, 40]))
    assert s.tolist() == [0, 10, 30] and e.tolist() == [7, 20, 40]


def test_temporal_breakdown_by_hand():
    ins = _ins([("gemm", 0, 10), ("relu", 5, 10),             # compute union [0, 15]
                ("ncclKernel_AllReduce", 12, 8),               # comm [12, 20]
                ("Memcpy DtoD", 30, 10),                       # memory [30, 40]
                ("Stream Sync", 50, 10, "cuda_sync", "Sync")])  # OTHER [50, 60]
    t = temporal_breakdown(ins, rank=3).iloc[0]
    # span 0..60 = 60; busy = 20 + 10 + 10 = 40 -> idle 20; compute 15; non-compute = 60 - 15 - 20 = 25
    assert (t["rank"], t["kernel_time_ns"], t["idle_time_ns"], t["compute_time_ns"], t["non_compute_time_ns"]) == \
        (3, 60, 20, 15, 25)
    assert t["idle_time_pctg"] == round(100 * 20 / 60, 2)
    assert t["idle_time_pctg"] + t["compute_time_pctg"] + t["non_compute_time_pctg"] == pytest.approx(100, abs=0.02)


def test_temporal_breakdown_empty():
    t = temporal_breakdown(_ins([])).iloc[0]
    # no device activity: no span to divide, so the shares are unknown, not "0 % of 0 ns"
    assert t["kernel_time_ns"] == 0 and math.isnan(t["idle_time_pctg"]) and math.isnan(t["compute_time_pctg"])


def test_kernel_breakdown_overlap_labels_and_stats():
    ins = _ins([("gemm", 0, 10), ("gemm", 20, 30), ("ncclKernel_AllReduce", 5, 10), ("Memcpy DtoD", 40, 20),
                ("Stream Sync", 100, 5, "cuda_sync", "Sync")])
    by_type, by_name = kernel_breakdown(ins)
    got = dict(zip(by_type["kernel_type"], by_type["sum_ns"]))
    # comp [0,10] [20,50]; comm [5,15]; mem [40,60]
    assert got == {"COMPUTATION": 5 + 20, "COMPUTATION overlapping COMMUNICATION": 5, "COMMUNICATION": 5,
                   "COMPUTATION overlapping MEMORY": 10, "MEMORY": 10}
    assert by_type["sum_ns"].is_monotonic_decreasing
    assert by_type["percentage"].sum() == pytest.approx(100, abs=0.3)
    g = by_name.set_index("name").loc["gemm"]
    assert (g["sum_ns"], g["count"], g["max_ns"], g["min_ns"], g["mean_ns"]) == (40, 2, 30, 10, 20)
    assert g["std_ns"] == pytest.approx(np.std([10, 30], ddof=1))
    assert by_name.set_index("name").loc["Stream Sync", "kernel_type"] == "OTHER"
    no_mem, _ = kernel_breakdown(ins, include_memory_kernels=False)
    assert "MEMORY" not in set(no_mem["kernel_type"])


def test_hta_rounding_rounds_inward_to_microseconds():
    ins = _ins([("a", 1_500, 200), ("b", 2_000, 3_700)])
    act = device_activity(ins, hta_rounding=True)
    assert act["start_ts"].tolist() == [2_000, 2_000] and act["end_ts"].tolist() == [1_000, 5_000]
    t = temporal_breakdown(ins, hta_rounding=True).iloc[0]
    assert t["kernel_time_ns"] == 3_000


def test_comm_comp_overlap():
    ins = _ins([("gemm", 0, 10), ("ncclKernel_AllReduce", 5, 10), ("ncclKernel_AllReduce", 30, 10)])
    r = comm_comp_overlap(ins, rank=1).iloc[0]
    assert (r["comm_time_ns"], r["overlap_time_ns"], r["comp_comm_overlap_pctg"]) == (20, 5, 25.0)
    assert math.isnan(comm_comp_overlap(_ins([("gemm", 0, 1)]))["comp_comm_overlap_pctg"].iloc[0])


def test_idle_time_breakdown_categories():
    # stream 0: k0 [0,10]; k1 launched at 20 (after k0 end) -> host_wait gap 15 (starts 25);
    # k2 launched at 21 (before k1 end 35) starts 40 -> gap 5 < 30 us -> kernel_wait;
    # k3 launched at 22, starts 100_000 -> gap 99_955 ns >= 30_000 -> other
    ins = _ins([("k0", 0, 10), ("k1", 25, 10), ("k2", 40, 5), ("k3", 100_000, 5),
                ("Stream Sync", 60, 5, "cuda_sync", "Sync")])
    host = pd.DataFrame({"start_ts": [-5, 20, 21, 22], "name": ["l0", "l1", "l2", "l3"]})
    flows = pd.DataFrame({"src_table": "host_ops", "src_row": [0, 1, 2, 3], "dst_table": "instructions",
                          "dst_row": [0, 1, 2, 3], "kind": "launch"})
    tracks = pd.DataFrame({"tid": [7]})
    r = idle_time_breakdown(ins, host, flows, rank=2, tracks=tracks).set_index("idle_category")
    assert r.loc["host_wait", "idle_time_ns"] == 15 and r.loc["kernel_wait", "idle_time_ns"] == 5
    assert r.loc["other", "idle_time_ns"] == 100_000 - 45
    assert set(r["stream"]) == {7} and set(r["rank"]) == {2}
    assert r["idle_time_ratio"].sum() == pytest.approx(1.0, abs=1e-3)


def test_idle_time_of_overlapping_rows_is_never_negative():
    """Rows overlapping on one track (a simulated engine): k1 [10, 50] µs lies inside k0 [0, 100] µs, k2 starts
    at 120 µs. The idle time before k2 is 120 - 100 = 20 µs (kernel_wait, < 30 µs), none before k1. HTA's
    plain previous row gives k1 10 - 100 = -90 µs (kernel_wait) and k2 120 - 50 = 70 µs (other, >= 30 µs),
    which hta_rounding keeps for parity."""
    us = 1000
    ins = _ins([("k0", 0, 100 * us), ("k1", 10 * us, 40 * us), ("k2", 120 * us, 10 * us)])
    r = idle_time_breakdown(ins).set_index("idle_category")
    assert r.loc["kernel_wait", "idle_time_ns"] == 20 * us and r.loc["kernel_wait", "idle_time_ratio"] == 1.0
    assert (r["idle_time_ns"] >= 0).all()
    hta = idle_time_breakdown(ins, hta_rounding=True).set_index("idle_category")
    assert (hta.loc["kernel_wait", "idle_time_ns"], hta.loc["other", "idle_time_ns"]) == (-90 * us, 70 * us)


def test_hta_kernel_selection_drops_last_step_and_stream_minus_one():
    us = 1000
    host = pd.DataFrame({"name": ["ProfilerStep#1", "cudaLaunchKernel", "ProfilerStep#2", "cudaLaunchKernel"],
                         "start_ts": [0, 100 * us, 1_000 * us, 1_100 * us],
                         "duration_ns": [1_000 * us, 10 * us, 1_000 * us, 10 * us], "correlation_id": [-1, 5, -1, 6]})
    ins = _ins([("k_step1", 200 * us, 50 * us, "kernel", "Kernel", 0, 5),
                ("k_step2", 1_200 * us, 50 * us, "kernel", "Kernel", 0, 6),
                ("Event Sync", 300 * us, 5 * us, "cuda_sync", "Sync", 1, 7)])
    tracks = pd.DataFrame({"tid": [7, -1]})
    sel = hta_kernel_selection(ins, host, tracks=tracks)
    assert sel["name"].astype(str).tolist() == ["k_step1"]
    one_step = host.iloc[:2]
    assert len(hta_kernel_selection(ins, one_step, tracks=tracks)) == 2  # only stream -1 dropped


def test_neuron_instructions_classified_by_engine_with_dma_and_collectives():
    ins = _ins([("matmul", 0, 100, "MATMUL", "Tensor"), ("act", 50, 100, "ACTIVATE", "Scalar"),
                ("sem", 300, 10, "SEM_WAIT", "Sync")])
    dma = pd.DataFrame({"start_ts": [150], "duration_ns": [100], "track": [9]}, index=[0])
    coll = pd.DataFrame({"start_ts": [400, 0], "duration_ns": [100, 5], "track": [8, 8],
                         "operation": ["all_reduce", "x"], "instruction": [-1, 0]})
    t = temporal_breakdown(ins, dma=dma, collectives=coll).iloc[0]
    # compute [0,150]; memory [150,250]; sync [300,310]; comm [400,500] (the 2nd collective is instruction 0)
    assert (t["kernel_time_ns"], t["compute_time_ns"], t["idle_time_ns"]) == (500, 150, 500 - 150 - 100 - 10 - 100)
    bt, _ = kernel_breakdown(ins, dma=dma, collectives=coll)
    assert dict(zip(bt["kernel_type"], bt["sum_ns"])) == {"COMPUTATION": 150, "MEMORY": 100, "COMMUNICATION": 100}


def test_real_trace_exact_vs_hta_rounding_are_close():
    from neuron_profiler.importers.kineto import load_kineto_builder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(real_trace("HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"))
    ins = b.table("instructions")
    exact = temporal_breakdown(ins).iloc[0]
    rounded = temporal_breakdown(ins, hta_rounding=True).iloc[0]
    assert exact["kernel_time_ns"] > 0
    assert exact["compute_time_ns"] >= rounded["compute_time_ns"]  # inward rounding only shortens
    assert rounded["compute_time_ns"] / exact["compute_time_ns"] > 0.9
    by_type, by_name = kernel_breakdown(ins)
    assert by_name["count"].sum() == len(ins)


def test_figures_from_an_imported_trace():
    from analysis.figures.breakdown import (
        comm_comp_overlap_figure,
        idle_time_figure,
        kernel_breakdown_figure,
        temporal_breakdown_figure,
    )
    from analysis.trace import Trace
    from neuron_profiler.importers.kineto import load_kineto_builder

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(real_trace("HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz"))
    t = Trace.from_builder(b)
    kb = kernel_breakdown_figure(t)
    assert {tr.type for tr in kb.data} == {"pie", "bar"}
    assert set(kb.data[0].labels) >= {"COMPUTATION", "COMMUNICATION"}
    tb = temporal_breakdown_figure(t)
    assert len(tb.data) == 3 and sum(tr.y[0] for tr in tb.data) == pytest.approx(100, abs=0.05)
    idle = idle_time_figure(t)
    assert sum(len(tr.x) for tr in idle.data) > 0
    ov = comm_comp_overlap_figure(t)
    assert 0 < ov.data[0].y[0] < 100
    empty = kernel_breakdown_figure(kernel_breakdown(_ins([])))
    assert not empty.data and "no device kernels" in empty.layout.annotations[0].text


def test_idle_time_breakdown_of_a_neuron_trace_is_per_engine_track():
    """All engine tracks of a Neuron core share tid 0; each engine runs its instructions in order, so each is
    its own stream (merged, the engines' overlapping rows read as negative idle time)."""
    from pathlib import Path

    import analysis

    t = analysis.load(Path(__file__).resolve().parents[2] / "sample_traces" / "cnn_inference.nprof")
    r = t.idle_time_breakdown()
    engine_tracks = set(t.table("instructions")["track"].unique().tolist())
    assert len(engine_tracks) > 1 and set(r["stream"]) == engine_tracks
    assert (t.tracks.loc[sorted(engine_tracks), "kind"] == "engine").all()
    assert (r["idle_time_ns"] >= 0).all()
    assert r.groupby("stream")["idle_time_ratio"].sum().round(3).eq(1.0).all()
    from analysis.figures.breakdown import idle_time_figure

    labels = set(idle_time_figure(t).data[2].x)  # "other" bars: one per engine, named by core and engine
    assert "rank 0 · nc0 TensorMatrix" in labels and len(labels) == len(engine_tracks)


@pytest.mark.parametrize("hta", [False, True])
def test_idle_time_breakdown_per_stream_and_grouped_paths_agree(monkeypatch, hta):
    """The idle breakdown takes each stream's rows by a mask when there are few streams and groups all rows in
    one order otherwise: both give the same frame, on a real trace with launch flows and many streams, and on
    rows out of time order within a stream, overlapping rows and a lone row."""
    import analysis
    from analysis.analyses import idle as bd

    us = 1000
    ins = _ins([("k2", 120 * us, 10 * us, "kernel", "Kernel", 0), ("k0", 0, 100 * us, "kernel", "Kernel", 0),
                ("k1", 10 * us, 40 * us, "kernel", "Kernel", 0), ("a0", 5 * us, 1 * us, "kernel", "Kernel", 3),
                ("a1", 50 * us, 1 * us, "kernel", "Kernel", 3), ("b0", 7 * us, 2 * us, "kernel", "Kernel", 5)])
    t = analysis.load(real_trace("HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz"))
    results = {}
    for few in (bd._FEW_STREAMS, 0):
        monkeypatch.setattr(bd, "_FEW_STREAMS", few)
        results[few] = (idle_time_breakdown(ins, hta_rounding=hta), idle_time_breakdown(t, hta_compatible=hta))
    (hand_a, real_a), (hand_b, real_b) = results.values()
    assert len(real_a) >= 3 and real_a["stream"].nunique() > 1
    assert set(hand_a["stream"]) == {0, 3, 5}
    pd.testing.assert_frame_equal(hand_a, hand_b, check_exact=True)
    pd.testing.assert_frame_equal(real_a, real_b, check_exact=True)
