"""The fast paths of the device activity, steps, idle breakdown and per-key unions give what the plain
definitions give: independent oracles (a naive union, the per-row step search the steps used, the masked
idle path, the gathered index) on random data, the bundled samples and real Kineto traces."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from realdata import real_trace, sample_trace

import analysis
from analysis.analyses import activity as A
from analysis.analyses import idle as idle_mod
from analysis.analyses import steps as steps_mod
from analysis.core import intervals as I

SAMPLES = ("cnn_inference.nprof", "ddp_train_rank0.nprof", "gpt_train_step.nprof")
REALS = ("kineto/docs_traces/after_fix_trace.json", "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",
         "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz")
_loaded: dict = {}


def _trace(name: str):
    if name not in _loaded:
        _loaded[name] = analysis.load(sample_trace(name) if name.endswith(".nprof") else real_trace(name),
                                      cache=False)
    return _loaded[name]


def _naive_union_per_key(key, start, end) -> dict[int, int]:
    """Σ of the union per key, by walking each key's intervals in start order (an independent oracle)."""
    out = {}
    for k in sorted(set(key.tolist())):
        iv = sorted(zip(start[key == k].tolist(), end[key == k].tolist()))
        total, reach = 0, None
        for s, e in iv:
            if reach is None or s > reach:
                total += max(e - s, 0)
                reach = e
            elif e > reach:
                total += e - reach
                reach = e
        out[k] = total
    return out


@pytest.mark.parametrize("chunk", [7, 64, 1 << 16])
def test_few_keys_union_matches_a_naive_union(monkeypatch, chunk):
    monkeypatch.setattr(I, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    n = 3000
    start = np.sort(rng.integers(0, 50_000, n))
    end = start + rng.integers(0, 400, n)  # zero-length intervals included
    end[::97] = start[::97]
    key = rng.choice([0, 2, 3, 9], n).astype(np.int8)  # keys 1, 4..8 absent
    got = I.union_by_key(key, start, end, sorted_by_start=True)
    assert got.index.tolist() == [0, 2, 3, 9] and got.dtype == np.int64 and got.index.dtype == np.int64
    assert got.to_dict() == _naive_union_per_key(key, start, end)
    shuffled = rng.permutation(n)  # unsorted input: sorted by start first, same sums
    assert I.union_by_key(key[shuffled], start[shuffled], end[shuffled]).to_dict() == got.to_dict()


def test_few_keys_union_carries_a_long_interval_across_chunks(monkeypatch):
    monkeypatch.setattr(I, "_CHUNK", 2)
    # key 1's [0, 100) covers its later rows, which lie in later chunks; key 0 is disjoint
    key = np.array([1, 0, 1, 0, 1, 1], np.int8)
    start = np.array([0, 5, 10, 20, 50, 99])
    end = np.array([100, 6, 20, 30, 60, 150])
    assert I.union_by_key(key, start, end, sorted_by_start=True).to_dict() == {0: 11, 1: 150}


def _old_device_ends(trace, h_start, h_end):
    """The per-row step search steps used before (the oracle of the per-host-op lookup)."""
    out = np.full(len(h_start), -1, dtype=np.int64)
    act = A.trace_activity(trace)
    if not len(act):
        return out
    host = trace.whole_table("host_ops", ["start_ts", "duration_ns"])
    fop = act["framework_op"].to_numpy(np.int64)
    pos = host.index.get_indexer(fop)
    ok = (fop >= 0) & (pos >= 0)
    if not ok.any():
        return out
    hs = host["start_ts"].to_numpy(np.int64)[pos[ok]]
    k = steps_mod._step_of(hs, hs + host["duration_ns"].to_numpy(np.int64)[pos[ok]], h_start, h_end)
    ends = act["end_ts"].to_numpy(np.int64)[ok]
    np.maximum.at(out, k[k >= 0], ends[k >= 0])
    return out


@pytest.mark.parametrize("name", SAMPLES + REALS)
def test_device_ends_equal_the_per_row_search(name):
    t = _trace(name)
    st = analysis.steps(t)
    if not len(st):  # steps() looks for device ends only when the trace has steps
        assert steps_mod._device_ends(t, np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []
        return
    for tt in (t, t.window(*A.analysis_span(t))):
        h_start, h_end = st["start_ts"].to_numpy(), st["host_end_ts"].to_numpy()
        got = steps_mod._device_ends(tt, h_start, h_end)
        assert got.tolist() == _old_device_ends(tt, h_start, h_end).tolist()
    assert (st["end_ts"] >= st["device_end_ts"]).all() and (st["device_end_ts"] >= 0).any()


@pytest.mark.parametrize("index", [pd.RangeIndex(0, 6), pd.RangeIndex(3, 9), pd.Index([10, 2, 7, 3, 40, 5])])
def test_step_per_row_equals_an_index_lookup(index):
    step = np.array([0, -1, 1, 1, 2, -1])
    fop = np.array([-1, -7, 0, 2, 3, 5, 7, 8, 9, 40, 10, 100])
    pos = index.get_indexer(fop)
    want = np.where((fop >= 0) & (pos >= 0), step[pos], -1)
    got = steps_mod._step_per_row(fop, index, step, 3)
    assert got.dtype == np.int8 and got.tolist() == want.tolist()


@pytest.mark.parametrize("name", SAMPLES + REALS)
def test_activity_index_from_rows_equals_the_gathered_index(monkeypatch, name):
    t = _trace(name)
    ins = t.analysis_table("instructions")
    dma = t.table("dma", ["track", "start_ts", "duration_ns", "framework_op"])
    cc = None if t.is_kineto_import else t.table("collectives")
    fast = A.activity_frame(ins, dma=dma, collectives=cc, sort=True)
    monkeypatch.setattr(A, "_index_from_rows", lambda *a: None)
    slow = A.activity_frame(ins, dma=dma, collectives=cc, sort=True)
    pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    # the index is the instruction row id, -1 - row for the other tables
    ids = np.where(fast["table"].to_numpy() == A.INSTRUCTIONS, fast["row"].to_numpy() + ins.index[0] if len(ins)
                   else 0, -1 - fast["row"].to_numpy())
    assert fast.index.to_numpy().tolist() == ids.tolist()


@pytest.mark.parametrize("name", SAMPLES + REALS)
def test_idle_slices_equal_the_masked_path(monkeypatch, name):
    t = _trace(name)
    want = analysis.idle_time_breakdown(t)
    monkeypatch.setattr(idle_mod, "_stream_blocks", lambda *a: None)
    got = analysis.idle_time_breakdown(t)
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_idle_stream_blocks_only_for_grouped_rows():
    assert idle_mod._stream_blocks(np.array([0, 0, 2, 2, 2], np.int32), 4).tolist() == [0, 2, 2, 5, 5]
    assert idle_mod._stream_blocks(np.array([0, 1, 0], np.int32), 2) is None


def test_engine_rows_equal_a_naive_union_on_a_sample():
    t = _trace("gpt_train_step.nprof")
    act = A.trace_activity(t)
    ins = t.analysis_table("instructions")
    is_ins = act["table"].to_numpy() == A.INSTRUCTIONS
    eng = ins["engine"].cat.codes.to_numpy()[act["row"].to_numpy()[is_ins]]
    want = _naive_union_per_key(eng, act["start_ts"].to_numpy()[is_ins], act["end_ts"].to_numpy()[is_ins])
    s = t.summary_dict()
    lo, hi = A.analysis_span(t)
    for code, name in enumerate(ins["engine"].cat.categories):
        if code in want:
            assert s[f"{name}_active_percent"] == pytest.approx(100.0 * want[code] / (hi - lo), rel=1e-12)


@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 16])
def test_merge_where_equals_merge(monkeypatch, chunk):
    monkeypatch.setattr(I, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk + 1)
    n = 2000
    start = np.sort(rng.integers(0, 40_000, n))
    end = start + rng.integers(0, 300, n)
    end[::50] += 5000  # long intervals that swallow the next chunks' rows
    keep = rng.random(n) < 0.6
    for sel, mask in ((None, np.ones(n, bool)), (lambda a, b: keep[a:b], keep)):
        got = I.merge_where(start, end, sel)
        want = I.merge(start[mask], end[mask], sorted_by_start=True)
        assert [x.tolist() for x in got] == [x.tolist() for x in want] and got[0].dtype == np.int64
    assert [x.tolist() for x in I.merge_where(start[:0], end[:0])] == [[], []]
    assert [x.tolist() for x in I.merge_where(start, end, lambda a, b: np.zeros(b - a, bool))] == [[], []]


@pytest.mark.parametrize("name", SAMPLES + REALS)
def test_union_of_kind_equals_the_masked_merge(name):
    act = A.trace_activity(_trace(name))
    for kind in (None, *A.KERNEL_TYPES):
        m = np.ones(len(act), bool) if kind is None else A.kernel_type_mask(act, kind)
        want = I.merge(act["start_ts"].to_numpy()[m], act["end_ts"].to_numpy()[m], sorted_by_start=True)
        got = A.union_of_kind(act, kind)
        assert [x.tolist() for x in got] == [x.tolist() for x in want]


@pytest.mark.parametrize("name", SAMPLES + REALS)
def test_activity_names_and_opcodes_are_those_of_their_rows(name):
    """Codes put in the union's categories (as they are for the instructions, looked up for the other tables):
    every row's name and opcode are its table row's, as strings."""
    t = _trace(name)
    act = A.trace_activity(t)
    ins = t.analysis_table("instructions")
    cc = t.table("collectives")
    table, row = act["table"].to_numpy(), act["row"].to_numpy()
    want_name = np.empty(len(act), dtype=object)
    want_op = np.empty(len(act), dtype=object)
    i = table == A.INSTRUCTIONS
    want_name[i] = ins["name"].astype(str).to_numpy()[row[i]]
    want_op[i] = ins["opcode"].astype(str).to_numpy()[row[i]]
    want_name[table == A.DMA], want_op[table == A.DMA] = "dma", "dma"
    c = table == A.COLLECTIVES
    if c.any():
        want_name[c] = cc["operation"].astype(str).to_numpy()[row[c]]
        want_op[c] = "collective"
    assert act["name"].astype(str).tolist() == want_name.tolist()
    assert act["opcode"].astype(str).tolist() == want_op.tolist()
    assert (table == A.DMA).any() == (name.endswith(".nprof") and len(t.table("dma")) > 0)
