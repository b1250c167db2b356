"""Shared intermediate results are computed once: ``Trace.memo`` under concurrent callers (the explorer's
worker pool), and ``diff``'s per-trace op profile (memoised, grouped on category codes: checked against
an independent string groupby)."""
from __future__ import annotations

import threading

import numpy as np
import pandas as pd
import pytest
from realdata import real_trace, sample_trace

import analysis
from analysis.analyses.diff import KEYS, op_profile
from analysis.analyses.work import instruction_work


def test_memo_computes_once_for_concurrent_callers():
    t = analysis.Trace.from_file(sample_trace("cnn_inference.nprof"))
    entered, release, calls, got = threading.Event(), threading.Event(), [], []

    def slow():
        calls.append(1)
        entered.set()
        release.wait(30)
        return 42

    first = threading.Thread(target=lambda: got.append(t.memo("k", slow)))
    first.start()
    assert entered.wait(30)                        # the first caller is inside compute()
    second = threading.Thread(target=lambda: got.append(t.memo("k", slow)))
    second.start()
    second.join(0.5)                               # gives the second caller time to reach memo() ...
    release.set()                                  # ... then lets the first one finish
    first.join(30)
    second.join(30)
    assert got == [42, 42] and len(calls) == 1     # the second waited for the first's value
    w = t.window(*t.time_range)
    assert w.memo("k", lambda: 7) == 7             # a window keeps its own memo


def test_a_table_asked_for_by_two_threads_is_read_once():
    """The explorer's workers may ask for one table at the same time: the second waits for the first's read
    (before, both read it, doubling the memory of a 5M-row table for a while)."""
    reader = analysis.Trace.from_file(sample_trace("cnn_inference.nprof"))._source
    entered, release, reads = threading.Event(), threading.Event(), []

    class SlowSource:
        header = reader.header

        def table(self, name, columns=None):
            reads.append(name)
            entered.set()
            release.wait(30)
            return reader.table(name, columns=columns)

    t = analysis.Trace(SlowSource(), name="slow")
    got = []
    first = threading.Thread(target=lambda: got.append(t.table("instructions")))
    first.start()
    assert entered.wait(30)
    second = threading.Thread(target=lambda: got.append(t.table("instructions")))
    second.start()
    second.join(0.5)
    release.set()
    first.join(30)
    second.join(30)
    assert reads == ["instructions"] and len(got) == 2
    pd.testing.assert_frame_equal(got[0], got[1])
    assert len(got[0]) == len(reader.table("instructions")) > 0


def _string_profile(trace, keys):
    """The op profile's groups the plain way: one Python string per row and key, a pandas groupby."""
    w = instruction_work(trace)
    cols = {}
    for k in keys:
        if k == "shape":
            ho = trace.whole_table("host_ops", ["input_shapes"])
            sh = {int(i): str(v) for i, v in zip(ho.index, ho["input_shapes"])}
            cols[k] = [sh.get(int(f), "") for f in w["framework_op"]]
        else:
            cols[k] = [str(v) for v in w[k]]
    df = pd.DataFrame(cols)
    df["f"], df["b"], df["fo"] = w["flops"].to_numpy(), w["hbm_bytes"].to_numpy(), w["framework_op"].to_numpy()
    df["unknown"] = ~w["bytes_known"].to_numpy()
    g = df.groupby(list(keys), sort=False)
    out = g.agg(flops=("f", "sum"), hbm_bytes=("b", "sum"), unknown=("unknown", "sum"), rows=("f", "size"))
    launched = df[df["fo"] >= 0].groupby(list(keys), sort=False)["fo"].nunique()
    calls = launched.reindex(out.index).fillna(0).astype("int64")
    out["calls"] = calls.where(calls > 0, out["rows"])
    out["hbm_bytes"] = out["hbm_bytes"].where(out["unknown"] == 0)
    return out


@pytest.mark.parametrize("keys", [KEYS, ("op",), ("shape", "op"), ("module",)])
@pytest.mark.parametrize("which", ["gpt_train_step.nprof", "kineto"])
def test_op_profile_matches_a_string_groupby(which, keys):
    if which == "kineto":  # an imported GPU trace: work from shapes, launching ops without shapes
        t = analysis.load(real_trace("HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz"), cache=False)
    else:
        t = analysis.Trace.from_file(sample_trace(which))
    got, want = op_profile(t, keys), _string_profile(t, keys)
    assert len(got) >= 1
    assert list(got.index) == list(want.index)     # the same groups, in order of first appearance
    assert got.index.names == list(keys) or got.index.name == keys[0]
    assert (got["calls"].to_numpy() == want["calls"].to_numpy()).all()
    np.testing.assert_allclose(got["flops"].to_numpy(), want["flops"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(got["hbm_bytes"].to_numpy(float), want["hbm_bytes"].to_numpy(float), rtol=1e-12)


def test_diff_profiles_each_trace_once():
    a = analysis.Trace.from_file(sample_trace("ddp_train_rank0.nprof"))
    b = analysis.Trace.from_file(sample_trace("ddp_train_rank1.nprof"))
    d = analysis.diff(a, b)

    def again():
        raise AssertionError("op profile computed again")

    for t, side in ((a, "a"), (b, "b")):          # both sides' profiles sit in their trace's memo ...
        prof = t.memo(("op_profile", KEYS), again)
        assert int(d[f"calls_{side}"].sum()) == int(prof["calls"].sum())
    d2 = analysis.diff(b, a)                       # ... and a second comparison reuses them
    assert int(d2["calls_a"].sum()) == int(d["calls_b"].sum())
