"""Store: listing and grouping of ranks, containment (no path traversal), LRU bound, bad files."""
from __future__ import annotations

import os

import pytest

from explorer.store import GROUP_PREFIX, TraceAccessError, TraceOpenError, TraceStore


def test_listing_groups_ranks(served_dir):
    st = TraceStore(served_dir)
    keys = [e.key for e in st.entries()]
    assert "single.nprof" in keys and "run/rank00000_window000.nprof" in keys and "broken.nprof" in keys
    assert "notes.txt" not in keys
    groups = [e for e in st.entries() if e.is_group]
    assert len(groups) == 1 and groups[0].key == GROUP_PREFIX + "run/synthetic"
    assert groups[0].members == ("run/rank00000_window000.nprof", "run/rank00001_window000.nprof")
    ts = st.open(groups[0].key)
    assert [t.rank for t in ts.traces] == [0, 1]
    assert st.trace(groups[0].key, rank=1).rank == 1


@pytest.mark.parametrize("key", ["../x.nprof", "/etc/passwd", "run/../../etc/passwd", "..", "",
                                 "single.nprof/../../x", "group:../*", "notes.txt", "a\x00b", "x" * 5000])
def test_path_traversal_and_unlisted_keys_are_refused(served_dir, key):
    st = TraceStore(served_dir)
    with pytest.raises(TraceAccessError):
        st.open(key)


def test_symlink_out_of_root_is_not_served(served_dir, tmp_path):
    outside = tmp_path / "secret.nprof"
    outside.write_bytes((served_dir / "single.nprof").read_bytes())
    link = served_dir / "link_out.nprof"
    os.symlink(outside, link)
    try:
        st = TraceStore(served_dir)
        assert "link_out.nprof" not in [e.key for e in st.entries()]
        with pytest.raises(TraceAccessError):
            st.open("link_out.nprof")
    finally:
        link.unlink()


def test_file_root_serves_only_that_file(served_dir):
    st = TraceStore(served_dir / "single.nprof")
    assert [e.key for e in st.entries()] == ["single.nprof"]
    assert st.open("single.nprof").rank == 0
    with pytest.raises(TraceAccessError):
        st.open("broken.nprof")


def test_bad_file_is_an_error_not_a_crash(served_dir):
    st = TraceStore(served_dir)
    with pytest.raises(TraceOpenError, match="broken.nprof"):
        st.timeline("broken.nprof")
    # the store still serves the others afterwards
    assert st.timeline("single.nprof").n_events() > 0


def test_lru_bounds_open_traces(served_dir):
    st = TraceStore(served_dir, cache_size=2)
    for k in ("single.nprof", "run/rank00000_window000.nprof", "run/rank00001_window000.nprof"):
        st.open(k)
    assert st.cached_keys() == ["run/rank00000_window000.nprof", "run/rank00001_window000.nprof"]
    st.open("run/rank00000_window000.nprof")
    assert st.cached_keys()[-1] == "run/rank00000_window000.nprof"


def test_timeline_rows_follow_neuron_layout(served_dir):
    idx = TraceStore(served_dir).timeline("single.nprof")
    core0 = [i.label for i in idx.infos if i.group.endswith("nc0")]
    assert core0[:6] == ["Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync"]
    assert {"qSyncIO0", "qGpSimdDynamic"} <= set(core0)
    kinds = {i.kind for i in idx.infos}
    assert {"engine", "dma_queue", "cc_core", "thread", "counter"} <= kinds
    # host ops split by nesting depth: ProfilerStep on depth 0, ops on depth 1
    host = [i for i in idx.infos if i.table == "host_ops" and not i.alias]  # alias: the hierarchy's Op rows
    assert [h.depth for h in host] == [0, 1]
    tr = idx.trace
    assert idx.n_events() == sum(len(tr.table(t)) for t in ("instructions", "dma", "collectives", "host_ops"))


def test_a_page_build_waits_one_budget_not_one_per_frame(served_dir):
    """A page build asking for 4 frames of 0.4 s each (wait 1 s): before, each frame had the whole second and
    they ran one after another in the request (1.6 s); now the build shares 1 s, the frames left are pending
    (computing on the pool meanwhile) and come out equal to their computation; after end_request the next
    request has its whole wait again."""
    import time

    from explorer.store import FramePending, end_request, new_request

    st = TraceStore(served_dir)

    def frame(i):
        return lambda: (time.sleep(0.4), f"frame {i}")[1]

    new_request()
    t = time.monotonic()
    got, pending = {}, []
    for i in range(4):
        try:
            got[i] = st.memo("single.nprof", ("budget", i), frame(i), wait=1.0)
        except FramePending as exc:
            pending.append((i, exc.future))
    elapsed = time.monotonic() - t
    end_request()
    assert elapsed < 1.35, elapsed  # one budget (1 s) and a short wait, not 4 x 0.4 s
    assert got == {0: "frame 0", 1: "frame 1"} and [i for i, _ in pending] == [2, 3]
    for i, fut in pending:  # computing on the pool: the frame arrives, as the page's push will show it
        assert fut.result(timeout=10) == f"frame {i}"
        assert st.memo("single.nprof", ("budget", i), frame(i), wait=1.0) == f"frame {i}"
    new_request()
    time.sleep(1.1)  # this request's budget spent: a new frame is pending after the short wait
    with pytest.raises(FramePending):
        st.memo("single.nprof", ("budget", 9), frame(9), wait=1.0)
    end_request()
    assert st.memo("single.nprof", ("budget", 8), frame(8), wait=1.0) == "frame 8"  # ended: the whole wait again
