"""The chunked exclusive shares (:func:`analysis.core.intervals.exclusive_ns`), per-key unions
(:func:`analysis.core.intervals.union_by_key`, :func:`analysis.analyses.activity.invocation_time`) and sums per
group (:func:`analysis.core.devicetime.group_sum`) give exactly what the previous whole-array implementations gave
(kept below as oracles, with a naive sweep for the shares): on random data across chunk sizes, windows and
orders, on the bundled samples and on the 12 real traces, down to the Hot ops frames (same floats, same frame)."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from realdata import REAL_TRACE_PARAMS, real_trace, sample_trace

import analysis
from analysis.analyses import activity as A
from analysis.analyses import ceilings as C
from analysis.analyses import hot_ops as H
from analysis.core import devicetime
from analysis.core import intervals as I

SAMPLES = ("cnn_inference.nprof", "ddp_train_rank0.nprof", "ddp_train_rank1.nprof", "gpt_train_step.nprof",
           "gpt_train_step_compiled.nprof")
_I64_MIN = np.iinfo(np.int64).min


def _previous_exclusive_ns(start, end, windows=None):
    """exclusive_ns as it was: one stable sort of every start, end and window point, whole-array sums."""
    n = len(start)
    if n == 0:
        return np.zeros(0)
    s = np.asarray(start, dtype=np.int64)
    e = np.maximum(np.asarray(end, dtype=np.int64), s)
    ws = we = np.zeros(0, np.int64)
    if windows is not None:
        ws, we = np.asarray(windows[0], dtype=np.int64), np.asarray(windows[1], dtype=np.int64)
        if len(ws) <= 1:
            lo, hi = (int(ws[0]), int(we[0])) if len(ws) else (0, 0)
            s, e = I.clip(s, e, lo, hi)
            ws = we = np.zeros(0, np.int64)
    o = I.start_order(s)
    if o is not None:
        out = np.empty(n)
        out[o] = _previous_exclusive_sorted(s[o], e[o], ws, we)
        return out
    return _previous_exclusive_sorted(s, e, ws, we)


def _previous_exclusive_sorted(s, e, ws, we):
    n, m = len(s), len(ws)
    order = np.argsort(np.concatenate([s, e, ws, we]), kind="stable")
    t = np.concatenate([s, e, ws, we])[order]
    is_start = order < n
    if m:
        delta = is_start.view(np.int8) - (~is_start & ~(order >= 2 * n)).view(np.int8)
    else:
        delta = is_start.view(np.int8) * np.int8(2) - np.int8(1)
    count = np.cumsum(delta[:-1], dtype=np.int32)
    seg = np.empty(len(t) - 1)
    np.subtract(t[1:], t[:-1], out=seg, casting="unsafe")
    if m:
        wk = (order >= 2 * n).view(np.int8) - (order >= 2 * n + m).view(np.int8) * np.int8(2)
        seg[np.cumsum(wk[:-1], dtype=np.int32) <= 0] = 0.0
    np.maximum(count, 1, out=count)
    seg /= count
    acc = np.empty(len(order))
    acc[0] = 0.0
    np.cumsum(seg, out=acc[1:])
    out = np.empty(n)
    is_end = ~is_start
    if m:
        is_end &= order < 2 * n
    out[order[is_end] - n] = acc[is_end]
    out -= acc[is_start]
    np.maximum(out, 0.0, out=out)
    return out


def _previous_union_by_key(key, start, end, *, sorted_by_start=False):
    """union_by_key as it was for many keys: rows ordered by key, a running maximum over all rows at once."""
    key = np.asarray(key).astype(np.int64)
    start, end = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if not len(key):
        return pd.Series(dtype=np.int64)
    if not sorted_by_start:
        o = np.argsort(start, kind="stable")
        key, start, end = key[o], start[o], end[o]
    codes, uniques = pd.factorize(key, sort=True)
    o = np.argsort(codes, kind="stable")
    k, s0, e0 = codes[o], start[o], end[o]
    first = np.ones(len(k), dtype=bool)
    np.not_equal(k[1:], k[:-1], out=first[1:])
    heads = np.flatnonzero(first)
    reach = pd.Series(e0).groupby(k).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[1:] = reach[:-1]
    prev[first] = _I64_MIN
    np.maximum(s0, prev, out=prev)
    np.subtract(e0, prev, out=prev)
    np.maximum(prev, 0, out=prev)
    return pd.Series(np.add.reduceat(prev, heads), index=np.asarray(uniques, dtype=np.int64)[k[heads]])


def _naive_exclusive(start, end, windows=None) -> list[Fraction]:
    """Each interval's exclusive share by a sweep over the distinct points in exact fractions."""
    s = [int(x) for x in start]
    e = [max(int(b), a) for a, b in zip(s, end)]
    ws, we = (list(windows[0]), list(windows[1])) if windows is not None else ([], [])
    pts = sorted(set(s) | set(e) | set(ws) | set(we))
    out = [Fraction(0)] * len(s)
    for t0, t1 in zip(pts, pts[1:]):
        if windows is not None and not any(a <= t0 and t1 <= b for a, b in zip(ws, we)):
            continue
        running = [i for i in range(len(s)) if s[i] <= t0 and t1 <= e[i]]
        for i in running:
            out[i] += Fraction(t1 - t0, len(running))
    return out


def test_exclusive_ns_hand_computed():
    # [0, 10) and [5, 15): alone 5 ns each, 5 ns shared; inside the windows [0, 6) and [8, 20) only
    s, e = np.array([0, 5]), np.array([10, 15])
    assert I.exclusive_ns(s, e).tolist() == [7.5, 7.5]
    w = (np.array([0, 8]), np.array([6, 20]))
    assert I.exclusive_ns(s, e, w).tolist() == [6.5, 6.5]  # 5 + 0.5 + 1 and 0.5 + 1 + 5
    assert [float(x) for x in _naive_exclusive(s, e, w)] == [6.5, 6.5]
    assert I.exclusive_ns(s, e, (np.array([12]), np.array([14]))).tolist() == [0.0, 2.0]


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 16])
def test_exclusive_ns_equals_the_previous_and_a_naive_sweep(monkeypatch, chunk):
    monkeypatch.setattr(I, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for trial in range(60):
        n = int(rng.choice([1, 2, 7, 40, 300]))
        s = rng.integers(0, int(rng.choice([5, 200, 10**6])), n)
        if trial % 3:
            s = np.sort(s)  # the start-sorted path; otherwise sorted, shared out and put back
        e = s + rng.integers(-2, int(rng.choice([1, 30, 5000])), n)  # ends before starts count as empty
        nw = int(rng.choice([0, 1, 2, 5]))
        p = np.sort(rng.choice(2 * 10**6 if s.max() > 1000 else 400, 2 * nw, replace=False))
        for w in (None, (p[0::2], p[1::2])):
            got, want = I.exclusive_ns(s, e, w), _previous_exclusive_ns(s, e, w)
            assert got.dtype == want.dtype and np.array_equal(got, want), (trial, nw)
            if n <= 40:
                assert np.allclose(got, [float(x) for x in _naive_exclusive(s, e, w)], rtol=1e-12, atol=1e-9)


def test_exclusive_ns_long_rows_and_ties_across_chunks(monkeypatch):
    monkeypatch.setattr(I, "_CHUNK", 2)
    # a long row whose end lies chunks later, several rows starting and ending at a chunk's cut
    s = np.array([0, 0, 3, 3, 3, 3, 8, 9])
    e = np.array([100, 3, 3, 5, 3, 9, 9, 9])
    for w in (None, (np.array([1, 4]), np.array([3, 50])), (np.array([2]), np.array([6]))):
        got = I.exclusive_ns(s, e, w)
        assert np.array_equal(got, _previous_exclusive_ns(s, e, w))
        assert np.allclose(got, [float(x) for x in _naive_exclusive(s, e, w)])


@pytest.mark.parametrize("chunk", [1, 5, 64, 1 << 16])
def test_union_by_key_equals_the_previous(monkeypatch, chunk):
    monkeypatch.setattr(I, "_CHUNK", chunk)
    rng = np.random.default_rng(100 + chunk)
    for trial in range(40):
        n = int(rng.choice([1, 3, 50, 2000]))
        s = np.sort(rng.integers(0, 10**5, n))
        e = s + rng.integers(-5, int(rng.choice([3, 500, 50_000])), n)
        lo, hi = int(rng.choice([-3, 0])), int(rng.choice([20, 3000, 10**12]))  # dense, sparse (factorized) keys
        key = rng.integers(lo, hi, n)
        so = bool(trial % 2)
        order = np.arange(n) if so else rng.permutation(n)
        k, ss, ee = key[order], s[order], e[order]
        pd.testing.assert_series_equal(I.union_by_key(k, ss, ee, sorted_by_start=so),
                                       _previous_union_by_key(k, ss, ee, sorted_by_start=so), check_exact=True)
        m = k >= 0
        pd.testing.assert_series_equal(I.union_by_key(k, ss, ee, sorted_by_start=so, skip_negative=True),
                                       _previous_union_by_key(k[m], ss[m], ee[m], sorted_by_start=so),
                                       check_exact=True)


def test_union_by_key_skip_negative_edges():
    none = I.union_by_key(np.array([-1, -2]), np.array([0, 1]), np.array([5, 6]), sorted_by_start=True,
                          skip_negative=True)
    assert none.empty and none.dtype == np.int64
    got = I.union_by_key(np.array([-1, 40, 40, -1, 41]), np.array([0, 1, 3, 4, 4]), np.array([9, 5, 8, 9, 6]),
                         sorted_by_start=True, skip_negative=True)
    assert got.to_dict() == {40: 7, 41: 2} and got.index.dtype == np.int64


def _previous_paths(mp):
    """Put the previous exclusive_ns and union_by_key in the analyses that use them."""
    def union(k, s, e, sorted_by_start=False, skip_negative=False):
        if skip_negative:
            m = np.asarray(k) >= 0
            k, s, e = np.asarray(k)[m], np.asarray(s)[m], np.asarray(e)[m]
        return _previous_union_by_key(k, s, e, sorted_by_start=sorted_by_start)
    mp.setattr(H, "exclusive_ns", _previous_exclusive_ns)
    mp.setattr(A, "union_by_key", union)
    mp.setattr(devicetime, "union_by_key", union)


def _hot_ops_frames(path) -> dict:
    t = analysis.load(path, cache=False)
    return {"exclusive": H.exclusive_in_steps(t), "invocation": A.invocation_time(t),
            **{by: analysis.hot_ops(t, by=by) for by in ("op", "module")}}


def _check_same_as_previous(monkeypatch, path, chunk: int):
    with monkeypatch.context() as mp:  # small chunks: what is carried from chunk to chunk is exercised too
        mp.setattr(I, "_CHUNK", chunk)
        got = _hot_ops_frames(path)
    with monkeypatch.context() as mp:
        _previous_paths(mp)
        old = _hot_ops_frames(path)
    assert np.array_equal(got["exclusive"], old["exclusive"])
    pd.testing.assert_series_equal(got["invocation"], old["invocation"], check_exact=True)
    for by in ("op", "module"):
        pd.testing.assert_frame_equal(got[by], old[by], check_exact=True)
    return got


@pytest.mark.parametrize("chunk", [97, 1 << 16])
@pytest.mark.parametrize("name", SAMPLES)
def test_hot_ops_frames_equal_the_previous_on_samples(monkeypatch, name, chunk):
    got = _check_same_as_previous(monkeypatch, sample_trace(name), chunk)
    assert len(got["op"]) and got["exclusive"].sum() > 0 and len(got["invocation"])  # real work was compared


@pytest.mark.parametrize("rel", REAL_TRACE_PARAMS)
def test_hot_ops_frames_equal_the_previous_on_real_traces(monkeypatch, rel):
    _check_same_as_previous(monkeypatch, real_trace(rel), 97)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_group_sum_equals_bincount(monkeypatch, chunk):
    """group_sum adds rows chunk by chunk with np.add.at: each bin's rows in row order from 0.0, as one bincount
    over all rows does (the previous implementation): the same floats, NaN and large values included, with and
    without left-out rows (-1), on read-only columns (as the memo hands them out) without copying them."""
    monkeypatch.setattr(devicetime, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for n, k in ((1, 1), (40, 3), (3000, 7), (3000, 2)):
        g = rng.integers(-1, k + (k == 2), n)  # k == 2: codes above n_groups widen the result, as bincount's
        w = rng.random(n) * 10.0 ** rng.integers(0, 15, n)
        w[1::17] = np.nan
        for groups in (g, np.maximum(g, 0)):
            for values in (w, rng.integers(0, 1 << 52, n)):
                values.flags.writeable = False
                want = np.bincount(groups + 1, weights=values, minlength=k + 1)[1:]
                got = devicetime.group_sum(groups, values, k)
                assert got.shape == want.shape and np.array_equal(got, want, equal_nan=True)
    assert devicetime.group_sum(np.zeros(0, np.int64), np.zeros(0), 2).tolist() == [0.0, 0.0]
    assert devicetime.group_sum(np.array([-1, 0, 2, 0]), np.array([5.0, 1.0, 2.0, 3.0]), 3).tolist() == [4.0, 0.0, 2.0]


@pytest.mark.parametrize("chunk", [1, 3, 64, 1 << 16])
def test_first_rows_equals_unique_with_and_without_where(monkeypatch, chunk):
    """first_rows (chunk by chunk, the last chunk first; ``where``: only the marked rows, indices into the whole
    array) gives np.unique's distinct keys and first indices of the selected rows."""
    monkeypatch.setattr(I, "_CHUNK", chunk)
    rng = np.random.default_rng(7 + chunk)
    for trial in range(60):
        n = int(rng.choice([1, 5, 100, 3000]))
        keys = rng.integers(int(rng.choice([-2, 0])), int(rng.choice([3, 50, 10**7])), n)  # dense, negative, sparse
        where = rng.random(n) < rng.random() if trial % 3 else None
        rows = np.arange(n) if where is None else np.flatnonzero(where)
        u, i = np.unique(keys[rows], return_index=True)
        got_u, got_i = I.first_rows(keys, where=where)
        assert np.array_equal(got_u, u) and np.array_equal(got_i, rows[i])
        assert got_u.dtype == np.int64 and got_i.dtype == np.int64
    assert [x.tolist() for x in I.first_rows(np.array([4, 2, 4, 2, 7]), where=np.array([0, 0, 1, 1, 1], bool))] \
        == [[2, 4, 7], [3, 2, 4]]
    assert [len(x) for x in I.first_rows(np.array([3, 1]), where=np.zeros(2, bool))] == [0, 0]


def _previous_group_kinds_counts(codes, kind, k, a_n):
    key = np.asarray(codes, dtype=np.int64) * a_n + kind
    cnt = np.bincount(key, minlength=k * a_n)
    pairs = np.flatnonzero(cnt)
    return pairs, cnt[pairs]


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_row_time_and_group_kinds_equal_the_previous(monkeypatch, chunk):
    """hot_ops' row time (Σ max(duration, 1) per group) and its (group, kind of work) counts, chunk by chunk,
    equal the previous whole-array bincounts: the same floats and counts, on read-only columns."""
    monkeypatch.setattr(devicetime, "_CHUNK", chunk)
    monkeypatch.setattr(C, "_CHUNK", chunk)
    rng = np.random.default_rng(11 + chunk)
    for n, k in ((1, 1), (50, 4), (3000, 9)):
        codes = rng.integers(0, k, n)
        dur = rng.integers(-3, 10**12, n)
        dur[::5] = 0
        dur.flags.writeable = False
        want = np.bincount(codes, weights=np.maximum(dur, 1.0, dtype=np.float64), minlength=k)
        assert np.array_equal(H._row_time(codes, k, dur), want)
        assert np.array_equal(H._row_time(codes, k), np.bincount(codes, weights=np.ones(n), minlength=k))
        table = pd.DataFrame({"dev": rng.integers(0, 3, 6), "core": rng.integers(0, 4, 6), "mm": rng.random(6) < .5,
                              "dt": ["bf16", "fp32", None, "bf16", "fp8", "fp32"], "eng": ["PE", "ACT", "PE", None,
                                                                                          "DVE", "POOL"]})
        kind = rng.integers(0, len(table), n)
        by_dev, cores, kinds = C._group_kinds(None, codes, k, (kind, table))
        pairs, n_rows = _previous_group_kinds_counts(codes, kind, k, len(table))
        assert kinds["g"].tolist() == (pairs // len(table)).tolist()
        assert by_dev.sum() == n and by_dev.sum(axis=1).tolist() == np.bincount(codes, minlength=k).tolist()
        for g in range(k):  # rows per device of each group, from the rows themselves
            assert by_dev[g].tolist() == np.bincount(table["dev"].to_numpy()[kind[codes == g]],
                                                     minlength=by_dev.shape[1]).tolist()
        assert n_rows.sum() == n
