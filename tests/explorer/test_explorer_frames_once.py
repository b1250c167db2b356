"""A page's analysis frame is computed once per open trace even when the background warm-up (inline) and a
page request (the worker pool) ask for it at the same time; a failed frame is computed again."""
from __future__ import annotations

import threading

import pytest

from explorer.store import FramePending, TraceStore


def test_warm_up_and_page_request_share_one_computation(served_dir):
    st = TraceStore(served_dir)
    entered, release, calls, got = threading.Event(), threading.Event(), [], []

    def warm_fn():
        calls.append("warm")
        entered.set()
        release.wait(30)
        return "value"

    def page_fn():
        calls.append("page")
        return "other"

    warm = threading.Thread(target=lambda: got.append(st.memo("single.nprof", "frame", warm_fn)))
    warm.start()
    assert entered.wait(30)                                 # the warm-up is computing the frame
    with pytest.raises(FramePending):                       # a page asks meanwhile: it is told to wait ...
        st.memo("single.nprof", "frame", page_fn, wait=0.05)
    release.set()
    warm.join(30)
    assert st.memo("single.nprof", "frame", page_fn, wait=5.0) == "value"   # ... and then gets that value
    assert got == ["value"] and calls == ["warm"]           # the page's request computed nothing


def test_a_failed_frame_is_computed_again(served_dir):
    st = TraceStore(served_dir)
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first try fails")
        return 5

    with pytest.raises(RuntimeError):
        st.memo("single.nprof", "f", flaky, wait=5.0)
    assert st.memo("single.nprof", "f", flaky, wait=5.0) == 5 and len(calls) == 2
    assert st.memo("single.nprof", "f", flaky) == 5 and len(calls) == 2
