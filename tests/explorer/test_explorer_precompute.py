"""Pages precomputed on open and pushed when ready (explorer.frames.warm, explorer.push): the per-trace cache
gives the numbers a fresh computation gives (oracle: the analysis functions on a freshly opened trace), a
result a caller changes does not reach the next caller, the background precompute covers every frame the
pages ask for, and a section still computing is answered by the long-poll as soon as its frame is ready."""
from __future__ import annotations

import threading
import time

import numpy as np
import pandas as pd
import pytest

import analysis
from analysis.analyses.activity import analysis_span
from explorer import frames
from explorer.app import build_page, create_app, start_precompute
from explorer.pages.common import Ctx, guarded
from explorer.pages.compare import _singles, default_keys, default_partner, warm_pair, warm_partner
from explorer.state import PAGES, ViewState
from explorer.store import FramePending, TraceStore

KEY = "single.nprof"


@pytest.fixture(scope="module")
def warmed(served_dir):
    """A store whose trace ``single.nprof`` is fully precomputed (the background thread joined)."""
    store = TraceStore(served_dir)
    ctx = Ctx(store)
    th = frames.warm(ctx, KEY, extra=(("compare", lambda: warm_pair(ctx, KEY)),))
    th.join(300)
    assert not th.is_alive()
    return store, ctx


def _fresh(served_dir, key=KEY):
    return analysis.load(served_dir / key)


def test_cached_frames_equal_a_fresh_computation(warmed, served_dir):
    store, ctx = warmed
    st = ViewState(trace=KEY)
    pd.testing.assert_frame_equal(frames.summary(ctx, st), analysis.summary(_fresh(served_dir)))
    pd.testing.assert_frame_equal(frames.hot_ops(ctx, st, "op"), analysis.hot_ops(_fresh(served_dir), by="op"))
    pd.testing.assert_frame_equal(frames.roofline(ctx, st), analysis.roofline(_fresh(served_dir)))
    pd.testing.assert_frame_equal(frames.steps(ctx, st), analysis.steps(_fresh(served_dir)))
    pd.testing.assert_frame_equal(frames.recommendations(ctx, st), analysis.recommendations(_fresh(served_dir)))
    for name, fn in (("time_split", analysis.time_split), ("summary_items", analysis.summary_items),
                     ("flops_breakdown", analysis.flops_breakdown)):
        pd.testing.assert_frame_equal(frames.named(ctx, st, name), fn(_fresh(served_dir)))
    # the time split adds up to the analysed span (an invariant, independent of the cache)
    ts = frames.named(ctx, st, "time_split")
    lo, hi = analysis_span(_fresh(served_dir))
    assert hi > lo and int(ts["time_ns"].sum()) == hi - lo
    assert np.isclose(ts["percent"].sum(), 100.0)


def test_compare_diff_precomputed_equals_fresh_diff(warmed, served_dir):
    store, ctx = warmed
    other = "run/rank00000_window000.nprof"
    keys = ("op", "module", "shape")
    got = frames.diff(ctx, KEY, other, keys)
    want = analysis.diff(_fresh(served_dir), _fresh(served_dir, other), keys=keys)
    pd.testing.assert_frame_equal(got, want)


def test_the_partner_profile_is_precomputed_at_open(served_dir):
    """``warm_partner`` computes the per-op profiles of the trace and its default partner on their open traces:
    the diff of the pair then reuses them, and both equal a fresh computation."""
    store = TraceStore(served_dir)
    ctx = Ctx(store)
    other, _ = default_partner(ctx, KEY, _singles(ctx))
    assert other is not None and other != KEY
    keys = default_keys(ctx, KEY, other)
    assert not store.trace(other).has_memo(("op_profile", keys))
    th = warm_partner(ctx, KEY)
    th.join(300)
    assert not th.is_alive() and store.trace(other).has_memo(("op_profile", keys))
    assert store.trace(KEY).has_memo(("op_profile", keys))  # both sides
    pd.testing.assert_frame_equal(analysis.op_profile(store.trace(other), keys),
                                  analysis.op_profile(_fresh(served_dir, other), keys))
    pd.testing.assert_frame_equal(frames.diff(ctx, KEY, other, keys),
                                  analysis.diff(_fresh(served_dir), _fresh(served_dir, other), keys=keys))


def test_a_changed_result_does_not_reach_the_next_caller(warmed):
    store, ctx = warmed
    st = ViewState(trace=KEY)
    first = frames.summary(ctx, st)
    before = first.copy(deep=True)
    first.loc[first.index[0], "value"] = -12345.0
    first["extra"] = 1
    pd.testing.assert_frame_equal(frames.summary(ctx, st), before)
    h = frames.hot_ops(ctx, st, "op")
    want = h.copy(deep=True)
    num = h.select_dtypes("number").columns
    h[num] = -1  # every number of the caller's copy
    h.iloc[0, 0] = h.iloc[-1, 0]
    pd.testing.assert_frame_equal(frames.hot_ops(ctx, st, "op"), want)
    # the memo's raw values are untouched too (the store hands out copies)
    assert (store.memo(KEY, (None, ("summary", None)), lambda: None)["value"] != -12345.0).all()


def test_the_precompute_covers_every_frame_a_page_asks_for(warmed):
    store, ctx = warmed
    slot = store._slot(KEY)
    before = set(slot["memo"])
    for p in PAGES:
        build_page(ctx, ViewState(page=p, trace=KEY))
    new = set(slot["memo"]) - before
    assert not new, f"pages computed frames the precompute left out: {sorted(map(str, new))}"


def test_a_page_starts_the_precompute_once_per_trace(served_dir):
    store = TraceStore(served_dir)
    app = create_app(store=store, wait_s=None)
    ctx = app._explorer_ctx
    th = start_precompute(ctx, KEY)
    assert th is not None and start_precompute(ctx, KEY) is None  # once per open trace
    th.join(300)
    build_page(ctx, ViewState(page="summary", trace=KEY))
    assert start_precompute(ctx, KEY) is None


def test_the_precompute_yields_to_a_page_waiting_for_a_frame(served_dir):
    store = TraceStore(served_dir)
    ctx = Ctx(store, wait_s=30)
    release, order = threading.Event(), []

    def page_frame():
        release.wait(30)
        order.append("page")
        return 1

    t = threading.Thread(target=lambda: store.memo(KEY, "page-frame", page_frame, wait=30))
    t.start()
    deadline = time.time() + 10
    while not store.foreground_busy() and time.time() < deadline:
        time.sleep(0.01)
    assert store.foreground_busy()
    warm_started = []
    orig = frames.summary

    def spy(*a, **k):
        warm_started.append(time.time())
        return orig(*a, **k)

    frames.summary = spy
    try:
        th = frames.warm(ctx, KEY)
        time.sleep(0.5)
        assert not warm_started  # paused while the page's frame computes
        release.set()
        t.join(30)
        th.join(300)
    finally:
        frames.summary = orig
    assert order == ["page"] and warm_started and not store.foreground_busy()


def test_a_pending_section_is_answered_when_its_frame_is_ready(served_dir):
    store = TraceStore(served_dir)
    go = threading.Event()

    def slow():
        go.wait(30)
        return 7

    def section():
        return f"value {store.memo(KEY, 'slow', slow, wait=0.05)}"

    out = guarded(section)
    ids = out.id
    assert ids["type"] == "pending-section" and "nx-pending" in out.className
    token = ids["token"]
    t = time.perf_counter()
    assert store.wait_watch([token], 0.3) == []  # still computing: the long-poll times out empty
    assert time.perf_counter() - t >= 0.25
    threading.Timer(0.2, go.set).start()
    t = time.perf_counter()
    assert store.wait_watch([token], 20) == [token]  # answered when ready, not after the timeout
    assert time.perf_counter() - t < 10
    assert store.watched(token)() == "value 7"  # the rebuild shows the section
    assert store.wait_watch(["no-such-token"], 5) == ["no-such-token"] and store.watched("no-such-token") is None


def test_the_wait_endpoint_answers_json(served_dir):
    store = TraceStore(served_dir)
    app = create_app(store=store, precompute=False)
    c = app.server.test_client()
    with pytest.raises(FramePending) as exc:
        store.memo(KEY, "quick", lambda: time.sleep(0.3) or 1, wait=0.01)
    token = store.watch([exc.value.future], lambda: "x")
    r = c.get(f"/api/frames/wait?token={token}&timeout=20")
    assert r.status_code == 200 and r.get_json() == {"ready": [token]}
    r = c.get("/api/frames/wait?token=&timeout=nan")
    assert r.status_code == 200 and r.get_json() == {"ready": []}
