"""The timeline's derived rows against the trace (issue 27): the hierarchy rows (each op's span holds exactly its
instructions' extent, each module span its ops'), the DMA engine rows (a partition of the DMA table by engine),
the cumulative MFU / DMA counters (ending at the summary's MFU and DMA bytes, also over a window), and the
event a click selects (against a brute-force search)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis.analyses.timeline_tracks import _spread
from explorer.derived import CUMULATIVE, CUMULATIVE_TRACK0
from explorer.rows import build_index
from explorer.viewport import event_at, query_view

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"
TRACES = ["gpt_train_step.nprof", "ddp_train_rank1.nprof"]


@pytest.fixture(scope="module", params=TRACES)
def indexed(request):
    t = analysis.load(SAMPLES / request.param)
    return t, build_index(t)


def _parent(t, tracks: np.ndarray) -> np.ndarray:
    tr = t.table("tracks")
    return tr["parent"].reindex(tracks).to_numpy()


def test_op_rows_span_exactly_their_instructions(indexed):
    t, idx = indexed
    ins = t.table("instructions")
    ins = ins[ins["framework_op"] >= 0]
    core = _parent(t, ins["track"].to_numpy())
    g = pd.DataFrame({"core": core, "op": ins["framework_op"].to_numpy(), "s": ins["start_ts"].to_numpy(),
                      "e": (ins["start_ts"] + ins["duration_ns"]).to_numpy()}).groupby(["core", "op"])
    want = g.agg(s=("s", "min"), e=("e", "max"))
    ops = [i for i, info in enumerate(idx.infos) if info.kind == "hierarchy" and info.label == "Op"]
    assert ops, "no Op row in the hierarchy"
    seen = 0
    for i in ops:
        info, row = idx.infos[i], idx.rows[i]
        assert info.table == "host_ops" and info.alias
        for k, op in enumerate(idx.ids[i].tolist()):
            s, e = want.loc[(info.track, op)]
            assert (row.start[k], row.end[k]) == (s, e)  # contains every instruction, and no more
            seen += 1
    assert seen == len(want)  # every launching op has its span


def test_module_spans_contain_their_ops_and_nest(indexed):
    t, idx = indexed
    h = idx.hierarchy
    assert h is not None and (h["kind"] == "module").any()
    ops = h[h["kind"] == "op"]
    mods = h[h["kind"] == "module"]
    host = t.table("host_ops")
    for _, m in mods.iterrows():
        inside = ops[(ops["core"] == m["core"]) & (ops["start_ts"] >= m["start_ts"]) & (ops["end_ts"] <= m["end_ts"])]
        # the ops of the module span (their module path starts with its name) are inside it
        under = inside["host_op"].map(lambda r, name=m["name"]: str(host.loc[r, "module"]).startswith(name))
        assert int(under.sum()) >= m["ops"], m.to_dict()
    # each level's spans lie inside the spans of the level above
    for lvl in sorted(mods["level"].unique())[1:]:
        up = mods[mods["level"] == lvl - 1]
        for _, m in mods[mods["level"] == lvl].iterrows():
            parent = m["name"].rsplit(".", 1)[0]
            cand = up[(up["name"] == parent) & (up["start_ts"] <= m["start_ts"]) & (up["end_ts"] >= m["end_ts"])]
            assert len(cand) == 1, m.to_dict()
    # the rows drawn are the frame's spans
    for i, info in enumerate(idx.infos):
        if info.kind == "hierarchy" and info.table == "hierarchy":
            sub = h.loc[idx.ids[i]]
            assert (sub["start_ts"].to_numpy() == idx.rows[i].start).all()
            assert (sub["kind"] == "module").all() and (sub["core"] == info.track).all()


def test_hierarchy_levels_fold_below_the_first(indexed):
    _, idx = indexed
    levels = [i for i in idx.infos if i.kind == "hierarchy" and i.folds]
    assert levels[0].label == "Layer" and idx.folded() == [i.folds for i in levels]
    # each level's children are the next level's rows; the last level's children the instructions
    for a, b in zip(levels, levels[1:]):
        assert b.group == a.folds
    inst = [i for i in idx.infos if i.kind == "hierarchy" and i.table == "instructions"]
    assert inst and all(i.group == levels[-1].folds for i in inst)


def test_dma_engine_rows_partition_the_dma_table(indexed):
    """Every transfer is on exactly one engine: an engine row, or the queue row that names its engine (an engine
    that ran exactly one queue's transfers, the simulated runtime's case), and no row repeats another's events."""
    t, idx = indexed
    dma = t.table("dma")
    rows = [i for i, info in enumerate(idx.infos) if info.kind == "dma_engine"]
    named = [i for i, info in enumerate(idx.infos) if info.kind == "dma_queue" and " · DMA-E" in info.label]
    assert named  # each simulated queue runs on one engine
    ids = np.concatenate([idx.ids[i] for i in rows + named])
    assert len(ids) == len(dma) and set(ids.tolist()) == set(dma.index.tolist())  # every transfer exactly once
    for i in rows + named:
        info = idx.infos[i]
        sub = dma.loc[idx.ids[i]]
        assert info.label.rsplit(" · ", 1)[-1] == f"DMA-E{int(sub['dma_engine'].iloc[0])}"
        assert (sub["dma_engine"] == sub["dma_engine"].iloc[0]).all()
        if info.kind == "dma_engine":
            assert (_parent(t, sub["track"].to_numpy()) == info.track).all()
        else:
            assert (sub["track"] == info.track).all()
        assert (idx.rows[i].start == np.sort(sub["start_ts"].to_numpy())).all()
    # no two rows of the DMA table draw the same transfers (the engine rows used to repeat the queue rows)
    dma_rows = [tuple(idx.ids[i].tolist()) for i, info in enumerate(idx.infos) if info.table == "dma"]
    assert len(dma_rows) == len(set(dma_rows))


def test_an_engine_over_several_queues_keeps_its_row(monkeypatch):
    """Engines that do not map one-to-one onto queues get rows of their own (the partition still holds)."""
    t = analysis.load(SAMPLES / "gpt_train_step.nprof")
    real = analysis.dma_engines

    def two_engines(trace):  # every queue's transfers alternate between two engines
        d = real(trace)
        d["engine"] = np.arange(len(d)) % 2
        d["engine_track"] = pd.Categorical.from_codes(d["engine"], categories=["DMA-E0", "DMA-E1"])
        return d
    monkeypatch.setattr(analysis, "dma_engines", two_engines)
    idx = build_index(t)
    rows = [i for i, info in enumerate(idx.infos) if info.kind == "dma_engine"]
    assert [idx.infos[i].label for i in rows] == ["DMA-E0", "DMA-E1"]
    assert not [i for i in idx.infos if " · DMA-E" in i.label]
    assert sorted(np.concatenate([idx.ids[i] for i in rows]).tolist()) == t.table("dma").index.tolist()
    assert (idx.ids[rows[1]] % 2 == 1).all()


def test_cumulative_counters_end_at_the_summary(indexed):
    t, idx = indexed
    idx.cumulative.compute()
    s = analysis.summary(t).set_index("metric")["value"]
    _, mfu = idx.counters[CUMULATIVE_TRACK0]
    assert mfu[-1] == pytest.approx(s["mfu_estimated_percent"], rel=1e-9)
    by_label = {lab: idx.counters[CUMULATIVE_TRACK0 - k][1] for k, (lab, _, _) in enumerate(CUMULATIVE)}
    assert by_label["Cumulative DMA bytes"][-1] == pytest.approx(s["dma_transfer_total_bytes"], rel=1e-9)
    assert np.all(np.diff(by_label["Cumulative DMA bytes"]) >= -1e-6)  # bytes done never decrease
    rate = by_label["Cumulative DMA Throughput"]
    assert rate[-1] == pytest.approx(s["dma_transfer_total_bytes"] / (s["total_time"] / 1e9), rel=1e-9)
    assert analysis.cumulative_utilization(t)["elapsed_ns"].iloc[-1] == s["total_time"]  # the same window
    # the view draws them once computed
    v = query_view(idx, None, None, 800)
    assert not v.pending and any(idx.infos[i].track == CUMULATIVE_TRACK0 for i in v.counters)


def test_cumulative_mfu_of_a_window_is_the_windows_summary_mfu():
    t = analysis.load(SAMPLES / "gpt_train_step.nprof")
    st = analysis.steps(t)
    a, b = int(st["start_ts"].iloc[0]), int(st["start_ts"].iloc[0] + st["duration_ns"].iloc[0])
    w = t.window(a, b)
    cu = analysis.cumulative_utilization(w, bins=50)
    s = analysis.summary(w).set_index("metric")["value"]
    assert cu["ts"].iloc[-1] == b and cu["elapsed_ns"].iloc[-1] == b - a
    assert cu["mfu_percent"].iloc[-1] == pytest.approx(s["mfu_estimated_percent"], rel=1e-9)
    assert cu["model_flops"].iloc[-1] == pytest.approx(s["model_flops"], rel=1e-9)


def test_spread_puts_each_amount_over_its_duration():
    edges = np.array([0, 10, 20, 30], dtype=np.int64)
    # [5, 25) of 20: 5 ns in bin 0, 10 in bin 1, 5 in bin 2 -> 5, 10, 5; a point at 12 -> bin 1;
    # [-10, 5) of 30, clipped to [0, 5): the whole amount in bin 0
    got = _spread(np.array([5, 12, -10]), np.array([25, 12, 5]), np.array([20.0, 7.0, 30.0]), edges)
    assert got.tolist() == pytest.approx([35.0, 17.0, 5.0])
    # only items spanning several bins (the single-bin part is empty)
    assert _spread(np.array([5]), np.array([25]), np.array([20.0]), edges).tolist() == pytest.approx([5, 10, 5])
    # the same at trace-clock times (ns near 1.8e18: a float64 there is 256 ns coarse)
    o = 1_796_212_138_124_972_261
    got = _spread(np.array([5, 12, -10]) + o, np.array([25, 12, 5]) + o, np.array([20.0, 7.0, 30.0]), edges + o)
    assert got.tolist() == pytest.approx([35.0, 17.0, 5.0])


def test_a_click_selects_the_event_under_the_pointer(indexed):
    """event_at against a brute-force search, on points inside merged shapes of the whole-trace view."""
    _, idx = indexed
    v = query_view(idx, None, None, 600)
    rng = np.random.default_rng(0)
    checked = 0
    for i, sh in v.shapes.items():
        if idx.infos[i].table != "instructions" or idx.infos[i].alias:
            continue
        for j in np.flatnonzero(sh.count > 1)[:5]:
            tt = int(rng.integers(sh.start[j], sh.end[j] + 1)) - idx.origin
            got = event_at(idx, i, tt, 50.0)
            row = idx.rows[i]
            s, e = row.start - idx.origin, row.end - idx.origin
            inside = np.flatnonzero((s <= tt) & (e >= tt))
            if len(inside):
                best = inside[np.argmin((e - s)[inside])]
                assert (got["s"], got["e"]) == (s[best], e[best]) and got["table"] == "instructions"
            else:
                near = np.flatnonzero((e >= tt - 50) & (s <= tt + 50))
                dist = np.minimum(np.abs(s[near] - tt), np.abs(e[near] - tt))
                assert got is None if not len(near) else min(abs(got["s"] - tt), abs(got["e"] - tt)) == dist.min()
            checked += 1
    assert checked >= 5


def test_op_spans_do_not_depend_on_the_table_order():
    """The run-length path (instructions written op by op) and the hash path (any order) give the same spans."""
    from analysis.analyses.timeline_tracks import _op_spans

    t = analysis.load(SAMPLES / "gpt_train_step.nprof")

    class Shuffled:
        def table(self, name, columns=None):
            df = t.table(name, columns)
            return df.sample(frac=1.0, random_state=1) if name == "instructions" else df

        def whole_table(self, name, columns=None):
            return t.whole_table(name, columns)

    a, b = _op_spans(t), _op_spans(Shuffled())
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 1424 and int(a["instructions"].sum()) == int((t.table("instructions")["framework_op"] >= 0).sum())


@pytest.mark.slow
def test_gpu_trace_has_op_spans_and_an_mfu_counter_only(realtraces_dir):
    """An imported H100 trace (no modules recorded, no DMA rows): the hierarchy is the Op row alone, each op's span
    holds its kernels, no DMA engine or DMA counter rows (they would read 0 for something absent), and the
    cumulative MFU ends at the summary's."""
    t = analysis.load(realtraces_dir / "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
    idx = build_index(t)
    assert [i.label for i in idx.infos if i.derived] == ["Estimated Cumulative MFU"]
    assert not [i for i in idx.infos if i.kind == "dma_engine"]
    h = idx.hierarchy
    assert set(h["kind"]) == {"op"}
    ins = t.table("instructions")
    for _, op in h.iterrows():
        k = ins[ins["framework_op"] == op["host_op"]]
        assert op["start_ts"] == k["start_ts"].min() and op["end_ts"] == (k["start_ts"] + k["duration_ns"]).max()
    idx.cumulative.compute()
    s = analysis.summary(t).set_index("metric")["value"]
    assert idx.counters[CUMULATIVE_TRACK0][1][-1] == pytest.approx(s["mfu_estimated_percent"], rel=1e-9)


def test_a_failed_cumulative_counter_is_drawn_empty_not_pending(monkeypatch):
    """When the analysis fails, the view stops answering "pending" (the canvas would ask again forever)."""
    import explorer.derived as derived

    t = analysis.load(SAMPLES / "gpt_train_step.nprof")
    idx = build_index(t)
    monkeypatch.setattr(derived.analysis, "cumulative_utilization", lambda trace: 1 / 0)
    idx.cumulative.compute()
    assert idx.cumulative.error and "ZeroDivisionError" in idx.cumulative.error
    v = query_view(idx, None, None, 800)
    assert not v.pending
    rows = [i for i, info in enumerate(idx.infos) if info.derived]
    assert rows and all(len(v.counters[i][0]) == 0 for i in rows)


def test_cumulative_rows_scale_to_the_settled_curve_and_send_the_final_value():
    """The compiled GPT sample's cumulative DMA throughput peaks in its first 1 % (a few transfers over a short
    elapsed time) well above where it settles: the row's scale leaves the first 10 % of the span out (clipped),
    so the curve reads across the trace, and the payload carries the final value (the whole trace's) to label."""
    from explorer.tiles import SETTLE, view_payload

    t = analysis.load(SAMPLES / "gpt_train_step_compiled.nprof")
    idx = build_index(t)
    idx.cumulative.compute()
    cu = analysis.cumulative_utilization(t)
    pay = view_payload(idx, query_view(idx, None, None, 800))
    by_track = {idx.infos[c[0]].track: c for c in pay["counters"]}
    el = cu["elapsed_ns"]
    late = el >= SETTLE * (el.iloc[-1] - el.iloc[0]) + el.iloc[0]
    for k, (_, col, _) in enumerate(CUMULATIVE):
        _, _, _, lo, hi, end = by_track[CUMULATIVE_TRACK0 - k]
        assert lo == 0.0 and hi == pytest.approx(cu.loc[late, col].max(), rel=1e-12)
        assert end == pytest.approx(cu[col].iloc[-1], rel=1e-12)
    _, _, _, _, hi, end = by_track[CUMULATIVE_TRACK0 - 1]  # DMA throughput: the early peak is off the scale
    assert cu["dma_throughput_bytes_per_s"].max() > 1.1 * hi and hi > end
    s = analysis.summary(t).set_index("metric")["value"]
    assert by_track[CUMULATIVE_TRACK0][5] == pytest.approx(s["mfu_estimated_percent"], rel=1e-9)
    # a recorded counter keeps its whole range and has no end value
    rec = [c for c in pay["counters"] if not idx.infos[c[0]].derived]
    assert rec and all(c[5] is None for c in rec)
    for c in rec:
        v = idx.counters[idx.infos[c[0]].track][1]
        assert (c[3], c[4]) == (float(np.nanmin(v)), float(np.nanmax(v)))
