"""Level-of-detail binning: merged shapes cover every event of the window, respect the pixel threshold
and the shape budget, and zooming in gives back the individual events."""
from __future__ import annotations

import numpy as np
import pytest

from explorer.timeline import LONG_FACTOR, Row, bin_counter, merge, query_rows


def _events(seed: int, n: int = 3000, overlap: bool = False):
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(300, n).astype(np.int64)
    dur = rng.integers(1, 2000, n)
    start = np.cumsum(gaps + (0 if overlap else dur))
    return rng.permutation(start), None, dur  # unsorted on purpose


def _brute(start, end, thr):
    """Reference merge: sort, then walk with the running end; an event longer than LONG_FACTOR * thr stays
    alone (wide slices keep their identity)."""
    o = np.argsort(start, kind="stable")
    groups = []
    runmax = None
    for s, e in zip(start[o].tolist(), end[o].tolist()):
        long = e - s > LONG_FACTOR * thr
        if groups and s - runmax <= thr and not long and not groups[-1][3]:
            groups[-1][1] = max(groups[-1][1], e)
            groups[-1][2] += 1
        else:
            groups.append([s, e, 1, long])
        runmax = e if runmax is None else max(runmax, e)
    return groups


@pytest.mark.parametrize("seed,overlap", [(0, False), (1, True), (2, False)])
def test_query_covers_window_and_respects_threshold(seed, overlap):
    start, _, dur = _events(seed, overlap=overlap)
    end = start + dur
    row, order = Row.build(start, end)
    assert np.array_equal(row.start, start[order])
    span = int(end.max() - start.min())
    rng = np.random.default_rng(seed + 10)
    for _ in range(20):
        w = int(span / rng.choice([1, 3, 20, 200]))
        t0 = int(start.min() + rng.integers(0, max(span - w, 1)))
        t1 = t0 + w
        thr = w / 800
        sh = row.query(t0, t1, thr)
        inside = (row.end > t0) & (row.start < t1)
        # every event of the window lies inside a shape (wide events may overlap the shapes beside them)
        pos = np.searchsorted(sh.start, row.start[inside], side="right") - 1
        assert (pos >= 0).all()
        assert (row.end[inside] <= np.maximum.accumulate(sh.end)[pos]).all()
        # shapes are sorted, separated by more than the threshold unless one side is a single wide event
        wide = (sh.count == 1) & (sh.end - sh.start > LONG_FACTOR * int(thr))
        assert ((sh.start[1:] - sh.end[:-1] > int(thr)) | wide[1:] | wide[:-1]).all()
        assert sh.count.sum() >= inside.sum()
        assert len(sh) <= w / max(int(thr), 1) + 2
        # the representative of each shape is one of its members
        assert ((row.start[sh.rep] >= sh.start) & (row.end[sh.rep] <= sh.end)).all()


def test_pyramid_matches_direct_merge_on_whole_trace():
    start, _, dur = _events(4, n=5000, overlap=True)
    end = start + dur
    row, _ = Row.build(start, end)
    for thr in (0, 20, 500, 5000, 10**6):
        sh = row.query(int(start.min()), int(end.max()) + 1, thr)
        ref = _brute(start, end, thr)
        assert len(sh) == len(ref)
        assert sh.start.tolist() == [g[0] for g in ref]
        assert sh.end.tolist() == [g[1] for g in ref]
        assert sh.count.tolist() == [g[2] for g in ref]


def test_zoom_reveals_individual_events():
    n = 20_000
    start = np.arange(n, dtype=np.int64) * 1000
    end = start + 600  # 400 ns gaps: merged when a pixel is wider than 400 ns
    row, _ = Row.build(start, end)
    full = row.query(0, n * 1000, n * 1000 / 1000)
    assert len(full) == 1 and full.count[0] == n
    zoom = row.query(5_000_000, 5_050_000, 50_000 / 1000)
    assert (zoom.count == 1).all() and len(zoom) == 50
    assert zoom.start[0] == 5_000_000


def test_merge_keeps_longest_member_as_representative():
    s = np.array([0, 10, 20], dtype=np.int64)
    e = np.array([5, 19, 22], dtype=np.int64)
    out = merge(s, e, np.ones(3, dtype=np.int64), np.arange(3), e - s, threshold=5)
    assert out[0].tolist() == [0] and out[1].tolist() == [22] and out[2].tolist() == [3]
    assert out[3].tolist() == [1]


def test_query_rows_respects_budget():
    rows = []
    for r in range(30):
        start = np.arange(0, 10_000_000, 20_000, dtype=np.int64) + r
        rows.append(Row.build(start, start + 100)[0])
    out, thr = query_rows(rows, 0, 10_000_000, width_px=2000, budget=1500)
    assert sum(len(s) for s in out) <= 1500
    assert thr > 10_000_000 / 2000


def test_bin_counter_keeps_peaks_and_bounds_points():
    ts = np.arange(0, 1_000_000, 10, dtype=np.int64)
    val = np.zeros(len(ts))
    val[54321] = 7.0
    t, v = bin_counter(ts, val, 0, 1_000_000, 500)
    assert len(t) <= 502 and v.max() == 7.0
    t2, v2 = bin_counter(ts, val, 500_000, 500_100, 500)
    assert len(t2) == 13 and t2[0] < 500_000 < 500_100 < t2[-1]  # raw samples plus one on each side


def test_empty_row():
    row, _ = Row.build(np.zeros(0), np.zeros(0))
    assert len(row.query(0, 100, 1)) == 0
