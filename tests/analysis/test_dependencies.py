"""event_dependencies(): an event's predecessors and successors match the trace's flows and semaphore waits."""
import numpy as np
import pandas as pd
import pytest
from _traces import neuron_builder

import analysis
from tests.realdata import sample_trace


def _semaphore_trace():
    """Host op H launches MATMUL A [0, 100) on TensorMatrix; on Vector, SemaphoreWait W1 [10, 60) waits for A,
    SemaphoreWait W2 [60, 120) waits for DMA D [20, 120), then ACTIVATE G [120, 150) runs; ACTIVATE X
    [200, 210) follows G without a wait."""
    b, t = neuron_builder()
    h = b.add_rows("host_ops", {"track": t["thread"], "name": ["aten::mm"], "category": ["cpu_op"],
                                "start_ts": [0], "duration_ns": [5]})
    ins = b.add_rows("instructions", {
        "track": [t["TensorMatrix"], t["Vector"], t["Vector"], t["Vector"], t["Vector"]],
        "start_ts": [0, 10, 60, 120, 200], "duration_ns": [100, 50, 60, 30, 10],
        "engine": ["TensorMatrix", "Vector", "Vector", "Vector", "Vector"],
        "opcode": ["MATMUL", "SemaphoreWait", "SemaphoreWait", "ACTIVATE", "ACTIVATE"],
        "name": ["mm", "mm", "mm", "relu", "relu"]})
    d = b.add_rows("dma", {"track": t["qSyncIO0"], "start_ts": [20], "duration_ns": [100], "transfer_bytes": [4096],
                           "source": ["HBM"], "dest": ["SBUF"]})
    b.add_flows("host_ops", [h], "instructions", [ins], kind="launch")
    b.add_flows("instructions", [ins], "instructions", [ins + 1], kind="dependency")
    b.add_flows("dma", [d], "instructions", [ins + 2], kind="dependency")
    return analysis.Trace.from_builder(b), h, ins, d


def _rel(df):
    return sorted(zip(df["direction"], df["relation"], df["table"], df["row_id"], df["via_row"]))


def test_semaphore_relations_hand_built():
    t, h, a, d = _semaphore_trace()
    w1, w2, g, x = a + 1, a + 2, a + 3, a + 4
    dg = analysis.event_dependencies(t, "instructions", g)
    assert _rel(dg) == [("predecessor", "semaphore", "dma", d, w2),
                        ("predecessor", "semaphore", "instructions", a, w1)]
    gap = dg.set_index(["table", "row_id"])["gap_ns"]
    assert gap[("instructions", a)] == 120 - 100 and gap[("dma", d)] == 120 - 120
    da = analysis.event_dependencies(t, "instructions", a)
    assert _rel(da) == [("predecessor", "launch", "host_ops", h, -1),
                        ("successor", "dependency", "instructions", w1, -1),
                        ("successor", "semaphore", "instructions", g, w1)]
    assert list(da["direction"]) == ["predecessor", "successor", "successor"]  # predecessors first, then by start
    assert da.loc[1, "name"] == "SemaphoreWait mm" and da.loc[1, "track"] == "Vector"
    assert _rel(analysis.event_dependencies(t, "instructions", w1)) == [
        ("predecessor", "dependency", "instructions", a, -1), ("successor", "semaphore", "instructions", g, w1)]
    assert _rel(analysis.event_dependencies(t, "dma", d)) == [
        ("successor", "dependency", "instructions", w2, -1), ("successor", "semaphore", "instructions", g, w2)]
    assert analysis.event_dependencies(t, "instructions", x).empty  # no wait between G and X
    assert analysis.event_dependencies(t, "instructions", 999).empty
    assert list(analysis.event_dependencies(t, "collectives", 0).columns) == \
        [c.name for c in analysis.registry.REGISTRY["event_dependencies"].columns]


@pytest.mark.slow
def test_dependencies_match_the_flows_of_a_captured_trace():
    t = analysis.load(sample_trace("gpt_train_step.nprof"))
    flows = t.table("flows").astype({"src_table": str, "dst_table": str, "kind": str})
    ins = t.table("instructions", ["track", "start_ts", "opcode"])
    rng = np.random.default_rng(0)
    ends = pd.concat([flows[["src_table", "src_row"]].set_axis(["table", "row"], axis=1),
                      flows[["dst_table", "dst_row"]].set_axis(["table", "row"], axis=1)]).drop_duplicates()
    picks = ends.iloc[rng.choice(len(ends), 150, replace=False)]
    n_sem = 0
    for table, row in zip(picks["table"], picks["row"]):
        dep = analysis.event_dependencies(t, table, int(row))
        direct = dep[dep["relation"] != "semaphore"]
        want = sorted([("predecessor", k, st, int(sr)) for st, sr, k in
                       flows[(flows.dst_table == table) & (flows.dst_row == row)][["src_table", "src_row", "kind"]]
                       .itertuples(index=False)] +
                      [("successor", k, dt, int(dr)) for dt, dr, k in
                       flows[(flows.src_table == table) & (flows.src_row == row)][["dst_table", "dst_row", "kind"]]
                       .itertuples(index=False)])
        assert sorted(zip(direct["direction"], direct["relation"], direct["table"], direct["row_id"])) == want
        for _, r in dep[dep["relation"] == "semaphore"].iterrows():  # each semaphore relation seen from both ends
            n_sem += 1
            wait = ins.loc[r["via_row"]]
            assert wait["opcode"] == "SemaphoreWait"
            if r["direction"] == "successor":  # the gated instruction runs on the wait's engine, after it
                g = ins.loc[r["row_id"]]
                assert g["track"] == wait["track"] and g["start_ts"] >= wait["start_ts"]
            if not (table == "instructions" and r["via_row"] == row):  # not the wait itself
                other = analysis.event_dependencies(t, r["table"], int(r["row_id"]))
                back = other[(other["relation"] == "semaphore") & (other["via_row"] == r["via_row"])]
                assert ((back["table"] == table) & (back["row_id"] == row)).any()
    assert n_sem > 50


def test_dependencies_figure_draws_each_relation_and_the_event():
    t, h, a, d = _semaphore_trace()
    fig = analysis.figures.dependencies_figure(t, "instructions", a)
    assert [tr.name for tr in fig.data] == ["predecessor", "event", "successor"]
    assert [len(tr.y) for tr in fig.data] == [1, 1, 2]
    ev = fig.data[1]  # A [0, 100) ns; the earliest bar is H at 0: µs from 0
    assert list(ev.base) == [0.0] and list(ev.x) == [0.1]
    assert list(fig.data[2].base) == [0.01, 0.12]  # W1 at 10 ns, G at 120 ns
    assert list(fig.data[2].y) == ["3. SemaphoreWait mm (instructions #1)", "4. ACTIVATE relu (instructions #3)"]
    compact = analysis.figures.dependencies_figure(analysis.event_dependencies(t, "instructions", a), compact=True)
    assert list(compact.data[1].y) == ["2. instructions #1", "3. instructions #3"] and not compact.layout.showlegend
    empty = analysis.figures.dependencies_figure(t, "instructions", a + 4)
    assert "no predecessors" in empty.layout.annotations[0].text
