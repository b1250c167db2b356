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
