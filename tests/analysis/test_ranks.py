"""analysis.rank_balance: per-rank device time, step time and straggling, on hand-built ranks and the DDP pair."""
from __future__ import annotations

import numpy as np
import pytest
from _traces import neuron_builder
from realdata import real_trace, sample_trace

import analysis
from analysis.analyses.ranks import RANK_BALANCE_COLUMNS


def _rank(rank: int, compute_ns: int, cc_start: int, step_ns: int) -> analysis.Trace:
    """One rank: a ProfilerStep of ``step_ns``, a Vector instruction of ``compute_ns`` from t=0 and an
    all_reduce (seq 0) of 1,000 ns at ``cc_start``."""
    b, t = neuron_builder(rank=rank, world_size=3)
    b.add_rows("collectives", {"track": t["cc"], "start_ts": [cc_start], "duration_ns": [1000],
                               "operation": "all_reduce", "process_group": "pg0", "replica_group": "0,1,2",
                               "group_size": 3, "sequence_number": [0], "input_size": 1 << 20,
                               "output_size": 1 << 20, "dtype": "bfloat16"})
    b.add_rows("host_ops", {"track": t["thread"], "name": "ProfilerStep#0", "category": "user_annotation",
                            "start_ts": [0], "duration_ns": [step_ns]})
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": [0], "duration_ns": [compute_ns], "engine": "Vector",
                                "opcode": "TensorTensor", "name": "add", "dtype": "float32"})
    return analysis.Trace.from_builder(b)


def test_slow_rank_is_the_straggler_and_above_the_median():
    ranks = [_rank(0, 10_000, 12_000, 20_000), _rank(1, 30_000, 31_000, 40_000), _rank(2, 10_000, 12_500, 20_000)]
    df = analysis.rank_balance(ranks)
    assert list(df.columns) == RANK_BALANCE_COLUMNS and df["rank"].tolist() == [0, 1, 2]
    assert df["compute_time_ns"].tolist() == [10_000, 30_000, 10_000]  # Vector = computation (HTA)
    # the device span runs from the instruction start to the collective's end; the gap between them is idle
    assert df["kernel_time_ns"].tolist() == [13_000, 32_000, 13_500]
    assert df["idle_time_ns"].tolist() == [2_000, 1_000, 2_500]
    assert df["collective_time_ns"].tolist() == [1000, 1000, 1000]
    assert df["step_time_mean_ns"].tolist() == [20_000, 40_000, 20_000]
    assert df["step_time_vs_median"].tolist() == [1.0, 2.0, 1.0]
    assert df["compute_time_vs_median"].tolist() == [1.0, 3.0, 1.0]
    # rank 1 arrives 19,000 ns after the first arrival (rank 0 at 12,000): it caused that much waiting
    assert df["times_last"].tolist() == [0, 1, 0]
    assert df.loc[1, "total_wait_caused_ns"] == 19_000 and df.loc[0, "total_wait_caused_ns"] == 0
    assert df["mean_arrival_delay_ns"].tolist() == [0.0, 19_000.0, 500.0]


def test_single_rank_has_no_straggler_columns():
    df = analysis.rank_balance([_rank(0, 10_000, 12_000, 20_000)])
    assert df["times_last"].tolist() == [0] and df["total_wait_caused_ns"].tolist() == [0.0]
    assert np.isnan(df.loc[0, "mean_arrival_delay_ns"])
    assert df.loc[0, "step_time_vs_median"] == 1.0


def test_ddp_sample_pair_and_figure():
    ts = analysis.TraceSet([analysis.load(sample_trace(f"ddp_train_rank{r}.nprof")) for r in (0, 1)])
    df = analysis.rank_balance(ts)
    assert df["rank"].tolist() == [0, 1]
    for t, (_, row) in zip(ts, df.iterrows()):
        tb = t.temporal_breakdown().iloc[0]
        assert row["compute_time_ns"] == tb["compute_time_ns"] and row["idle_time_ns"] == tb["idle_time_ns"]
        assert row["step_time_mean_ns"] == pytest.approx(analysis.summary_dict(t)["step_time_mean_ns"])
    strag = analysis.straggler_ranks(ts.collectives())
    assert df["total_wait_caused_ns"].sum() == pytest.approx(strag["total_wait_caused_ns"].sum())
    fig = analysis.figures.rank_balance_figure(df)
    names = [d.name for d in fig.data]
    assert names == ["compute", "non-compute", "idle", "mean step time", "wait caused"]
    assert list(fig.data[0].y) == ["rank 0", "rank 1"]
    assert list(fig.data[4].x) == pytest.approx((df["total_wait_caused_ns"] / 1e6).tolist())
    notes = [a.text for a in fig.layout.annotations]  # the DDP sample's ranks arrive together: the panel says so
    assert (df["total_wait_caused_ns"].sum() == 0) == any("no rank made another wait" in n for n in notes)


def test_rank_balance_figure_with_a_straggler_has_no_empty_panel_note():
    ranks = [_rank(0, 10_000, 12_000, 20_000), _rank(1, 10_000, 31_000, 40_000)]
    fig = analysis.figures.rank_balance_figure(analysis.rank_balance(ranks))
    assert not any("no rank made another wait" in a.text for a in fig.layout.annotations)
    assert max(fig.data[-1].x) > 0


def test_rank_timeline_lanes_union_and_coarsening():
    ranks = [_rank(0, 10_000, 12_000, 20_000), _rank(1, 30_000, 31_000, 40_000)]
    df = analysis.rank_timeline(ranks)
    assert list(df.columns) == analysis.analyses.ranks.RANK_TIMELINE_COLUMNS
    got = {(r.rank, r.lane): (r.start_ts, r.end_ts, r.busy_ns, r.label) for r in df.itertuples(index=False)}
    assert got == {(0, "steps"): (0, 20_000, 20_000, "step 0"), (0, "compute"): (0, 10_000, 10_000, "compute"),
                   (0, "communication"): (12_000, 13_000, 1000, "communication"),
                   (1, "steps"): (0, 40_000, 40_000, "step 0"), (1, "compute"): (0, 30_000, 30_000, "compute"),
                   (1, "communication"): (31_000, 32_000, 1000, "communication")}
    # rows come rank by rank, lanes in RANK_LANES order
    assert df[["rank", "lane"]].drop_duplicates().apply(tuple, axis=1).tolist() == [
        (0, "steps"), (0, "compute"), (0, "communication"), (1, "steps"), (1, "compute"), (1, "communication")]
    with pytest.raises(ValueError, match="max_intervals"):
        analysis.rank_timeline(ranks, max_intervals=0)


def test_rank_timeline_merges_bursts_closer_than_the_resolution():
    b, t = neuron_builder(rank=0, world_size=1)
    starts = np.arange(100) * 1000          # 100 instructions of 400 ns every µs over 100 µs
    b.add_rows("instructions", {"track": t["Vector"], "start_ts": starts, "duration_ns": 400, "engine": "Vector",
                                "opcode": "TensorTensor", "name": "add"})
    tr = analysis.Trace.from_builder(b)
    fine = analysis.rank_timeline([tr], max_intervals=1000)   # resolution 99.4 ns < the 600 ns gaps
    coarse = analysis.rank_timeline([tr], max_intervals=10)   # resolution 9.94 µs > the gaps: one interval
    assert len(fine) == 100 and (fine["busy_ns"] == 400).all()
    assert coarse[["start_ts", "end_ts", "busy_ns"]].values.tolist() == [[0, 99_400, 40_000]]
    fig = analysis.figures.rank_timeline_figure(coarse)
    assert fig.data[0].name == "compute" and list(fig.data[0].y) == ["rank 0 · compute"]
    assert fig.data[0].marker.opacity[0] == pytest.approx(0.35 + 0.65 * 40_000 / 99_400)


def test_rank_timeline_of_traces_without_activity_is_empty():
    b, _ = neuron_builder()
    df = analysis.rank_timeline([analysis.Trace.from_builder(b)])
    assert df.empty and list(df.columns) == analysis.analyses.ranks.RANK_TIMELINE_COLUMNS
    assert not analysis.figures.rank_timeline_figure(df).data


def test_real_two_rank_gpu_run_names_the_straggler():
    """HTA's 2-of-128-rank DLRM sample (NCCL SendRecv kernels): per-rank rows agree with the per-trace
    analyses, and rank 1 is the one that arrives last at most collectives."""
    ts = analysis.TraceSet([analysis.load(real_trace(f"HolisticTraceAnalysis/trace_filter/sampled_rank-{r}.json.gz"),
                                          cache=False) for r in (0, 1)])
    df = analysis.rank_balance(ts)
    for t, (_, row) in zip(ts, df.iterrows()):
        tb = t.temporal_breakdown().iloc[0]
        assert (row["compute_time_ns"], row["idle_time_ns"], row["kernel_time_ns"]) == (
            tb["compute_time_ns"], tb["idle_time_ns"], tb["kernel_time_ns"])
        assert row["step_count"] == 2
    strag = analysis.straggler_ranks(ts.collectives()).set_index("rank")
    assert df.set_index("rank")["times_last"].to_dict() == strag["times_last"].to_dict()
    assert df.loc[df["total_wait_caused_ns"].idxmax(), "rank"] == strag.index[0] == 1
    lanes = analysis.rank_timeline(ts).groupby("rank")["lane"].unique()
    assert all(set(v) == {"steps", "compute", "communication", "memory"} for v in lanes)
