"""The write half of an import: string interning (dict passes or pd.factorize, same ids), builder batches handed
to the writer without a second normalization, and one temporary file per atomic write."""
from __future__ import annotations

import errno
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neuron_profiler.importers.output import OutputWriteError, write_atomically
from neuron_profiler.trace import TraceBuilder, TraceWriter, framing, make_header, read_trace
from neuron_profiler.trace import encode as trace_encode
from neuron_profiler.trace import files as trace_files
from neuron_profiler.trace import writer as trace_writer
from neuron_profiler.trace.strings import _LONG, _SMALL, CodedStrings, StringTable
from schemas import pb


def _one_by_one(table: dict[str, int], values: list) -> list[int]:
    """Oracle: intern value by value, missing values (None, NaN) as "", anything else by its str()."""
    out = []
    for v in values:
        s = "" if v is None or (isinstance(v, float) and np.isnan(v)) else str(v)
        out.append(table.setdefault(s, len(table)))
    return out


@pytest.mark.parametrize("case", ["short", "long_short_strings", "long_long_strings", "with_missing", "numbers"])
def test_interned_ids_follow_first_appearance_across_columns(case: str) -> None:
    rng = np.random.default_rng(7)
    n = {"short": 40}.get(case, _SMALL * 8)
    width = 3 * _LONG if case == "long_long_strings" else 6
    pool = [f"{i:0{width}d}" for i in range(60)]
    values: list = [pool[i] for i in rng.integers(0, len(pool), n)]
    if case == "with_missing":
        values[3], values[n // 2], values[-1] = None, float("nan"), None
    if case == "numbers":
        values[5], values[9] = 17, 2.5
    st, oracle = StringTable(), {"": 0}
    first = [pool[5], pool[0], "x"]  # some strings already interned by an earlier column
    assert st.intern_array(np.array(first, dtype=object), 3).tolist() == _one_by_one(oracle, first)
    got = st.intern_array(np.array(values, dtype=object), n)
    assert got.dtype == np.uint32
    assert got.tolist() == _one_by_one(oracle, values)
    assert st.values == list(oracle)  # the string table, in id order
    assert st.intern_array(list(values), n).tolist() == got.tolist()  # a list: the same ids, nothing new
    assert len(st.values) == len(oracle)


def test_a_column_refused_by_the_dict_pass_leaves_the_table_as_it_was() -> None:
    # new strings, then a value that is not a str (a number, an unhashable list): the one-pass lookup added keys
    # before it met that value; they are dropped, and the column is interned by the factorize path instead
    st, oracle = StringTable(), {"": 0}
    assert st.intern_array(["a", "b"], 2).tolist() == _one_by_one(oracle, ["a", "b"])
    assert st._intern_strs(["c", "a", "d", 5]) is None and st._intern_strs(["e", ["x"]]) is None
    assert list(st.ids) == ["", "a", "b"] and st.values == ["", "a", "b"]
    assert st.intern_array(["c", 5, "a"], 3).tolist() == _one_by_one(oracle, ["c", 5, "a"])
    assert st.intern("f") == len(oracle) and st.values == list(oracle) + ["f"]


def test_coded_strings_get_the_ids_and_bytes_of_their_expanded_column(tmp_path: Path) -> None:
    # codes into distinct strings listed in order of first use (-1: ""), after a column that interned some
    coded = CodedStrings(np.asarray([0, -1, 1, 0, 2, 1], dtype=np.int64), ["x", "mm", "add"])
    expanded = ["x", "", "mm", "x", "add", "mm"]
    assert coded.strings().tolist() == expanded and len(coded) == 6
    st, oracle = StringTable(), {"": 0}
    assert st.intern_array(np.asarray(["add", "y"], dtype=object), 2).tolist() == _one_by_one(oracle, ["add", "y"])
    assert st.intern_array(coded, 6).tolist() == _one_by_one(oracle, expanded)
    assert st.values == list(oracle)
    files = []
    for name, col in (("coded", coded), ("plain", np.asarray(expanded, dtype=object))):
        b = TraceBuilder(make_header("tests"))
        b.add_rows("host_ops", {"track": 0, "start_ts": np.arange(6), "name": col, "category": col})
        assert b.table("host_ops")["name"].astype(str).tolist() == expanded
        files.append(b.write(tmp_path / f"{name}.nprof").read_bytes())
    head = framing.FRAME.size + framing.FRAME.unpack_from(files[0], len(framing.MAGIC))[0] + len(framing.MAGIC)
    at = framing.TRAILER.unpack_from(files[0], len(files[0]) - framing.TRAILER.size)[0]
    assert files[0][head:at] == files[1][head:at]  # the chunks (header: its creation time; footer: map order)
    assert read_trace(tmp_path / "coded.nprof").table("host_ops")["name"].astype(str).tolist() == expanded


def test_builder_rows_read_back_with_missing_strings_and_scalars(tmp_path: Path) -> None:
    b = TraceBuilder(make_header("tests"))
    names = np.array(["mm", None, "add", float("nan"), "mm"], dtype=object)
    b.add_rows("host_ops", {"track": 0, "start_ts": np.arange(5) * 10, "duration_ns": [1, 2, 3, 4, 5],
                            "name": names, "category": "cpu_op"})
    b.add_rows("host_ops", {"track": 0, "start_ts": [100], "name": pd.Categorical(["add"])})
    b.set_columns("host_ops", {"flops": np.arange(6) * 2})
    expected_names = ["mm", "", "add", "", "mm", "add"]
    assert b.table("host_ops")["name"].astype(str).tolist() == expected_names
    df = read_trace(b.write(tmp_path / "t.nprof")).table("host_ops")
    assert df["name"].astype(str).tolist() == expected_names
    assert df["category"].astype(str).tolist() == ["cpu_op"] * 5 + [""]
    assert df["start_ts"].tolist() == [0, 10, 20, 30, 40, 100]
    assert df["flops"].tolist() == [0, 2, 4, 6, 8, 10]


def test_builder_batches_are_not_normalized_twice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": 0, "start_ts": np.arange(10), "engine": "Tensor"})
    calls = []
    real = trace_encode._normalize
    monkeypatch.setattr(trace_encode, "_normalize", lambda *a: calls.append(a) or real(*a))
    df = read_trace(b.write(tmp_path / "t.nprof")).table("instructions")
    assert calls == [] and df["start_ts"].tolist() == list(range(10))
    assert df["engine"].astype(str).tolist() == ["Tensor"] * 10


def test_an_import_write_makes_one_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``write_atomically(out, builder)``: the writer's own temporary file is the only one (was two:
    one from write_atomically, one beside it from TraceWriter); the final name holds the trace."""
    made = []
    real = trace_files.create_partial
    monkeypatch.setattr(trace_writer, "create_partial", lambda t: made.append(t) or real(t))
    monkeypatch.setattr(trace_files, "create_partial", lambda t: made.append(t) or real(t))
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": 0, "start_ts": np.arange(3)})
    out = tmp_path / "sub" / "o.nprof"
    assert write_atomically(out, b) == out
    assert made == [out] and read_trace(out).table("instructions")["start_ts"].tolist() == [0, 1, 2]
    assert [p.name for p in out.parent.iterdir()] == ["o.nprof"]


def test_an_import_write_failing_with_enospc_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = TraceBuilder(make_header("tests"))
    b.add_rows("instructions", {"track": 0, "start_ts": np.arange(3)})
    out = tmp_path / "o.nprof"
    out.write_bytes(b"previous")

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(trace_writer, "encode_rows", full)
    with pytest.raises(OutputWriteError, match="no space left on device") as e:
        write_atomically(out, b)
    assert str(out) in str(e.value) and e.value.errno == errno.ENOSPC
    assert out.read_bytes() == b"previous" and [p.name for p in tmp_path.iterdir()] == ["o.nprof"]


def test_tracks_added_one_by_one_read_back_in_id_order_with_other_batches(tmp_path: Path) -> None:
    b = TraceBuilder(make_header("test"))
    p = b.add_track("process", "proc", pid=7)
    t = b.add_track("thread", "main", parent=p, pid=7, tid=8, sort_index=5)
    first = b.add_rows("tracks", {"kind": ["stream", "stream"], "name": ["s1", "s2"], "parent": [p, p]})
    c = b.add_track("counter", "HBM used", parent=p, unit="bytes")
    b.add_rows("host_ops", {"track": [t], "name": ["aten::mm"], "start_ts": [10], "duration_ns": [5]})
    assert (p, t, first, c) == (0, 1, 2, 4) and b.rows("tracks") == 5
    want = {"kind": ["process", "thread", "stream", "stream", "counter"],
            "name": ["proc", "main", "s1", "s2", "HBM used"], "parent": [-1, 0, 0, 0, 0],
            "sort_index": [0, 5, 0, 0, 4], "unit": ["", "", "", "", "bytes"]}
    got = read_trace(b.write(tmp_path / "t.nprof")).table("tracks")
    assert {k: got[k].astype(object if k in ("kind", "name", "unit") else "int64").tolist() for k in want} == want
    assert b.table("tracks")["name"].tolist() == want["name"]


@pytest.mark.parametrize("bad", [{"parent": -2}, {"pid": 2**64}, {"device": "gpu"}])
def test_a_bad_track_is_refused_when_added(bad: dict) -> None:
    b = TraceBuilder(make_header("test"))
    kw = {"kind": "thread", "name": "t", **bad}
    with pytest.raises((ValueError, TypeError, OverflowError)):
        b.add_track(**kw)
    assert b.rows("tracks") == 0


def _golden_write(path: Path, compression: str = "none") -> Path:
    """A fixed trace through every step of a write: batches split and merged across chunks (7 rows each), columns
    missing from some batches, new strings between chunks, a multi-chunk append (worker threads), a flush, a
    second table with time, dropped events and footer metadata."""
    h = pb.Header(producer="golden", rank=3, world_size=4)
    with TraceWriter(path, h, chunk_rows=7, compression=compression) as w:
        w.append("host_ops", {"track": 0, "start_ts": np.arange(5) * 10, "duration_ns": [1, 2, 3, 4, 5],
                              "name": ["a", "b", "a", "c", "b"], "category": "cpu_op"})
        w.append("host_ops", {"track": 1, "start_ts": np.arange(20) * 3 + 100,
                              "name": [f"n{i % 6}" for i in range(20)]})
        w.append("instructions", {"track": 2, "start_ts": np.arange(16) * 1000, "duration_ns": 999,
                                  "engine": "Tensor", "opcode": [f"op{i % 3}" for i in range(16)]})
        w.flush()
        w.append("instructions", {"track": 2, "start_ts": [20000, 20500], "duration_ns": [10, 7000],
                                  "engine": "Vector"})
        w.dropped_events["nc0"] = 5
        w.footer_metadata["note"] = "golden"
    return path


#: sha256 of the golden trace's bytes before its footer (magic, header, every chunk record), written by the writer
#: as it was before its steps were reordered into one module (commit c956070); the footer itself is compared as a
#: message below (protobuf writes map entries in an order that changes between processes). Format 2.3 changed
#: exactly the header's format_minor byte (2 -> 3) and so the header frame's CRC-32 (the 2.2 digest was
#: cd3dc6c9...bbd10), and the footer's table_rows gained "allocations" (0): 1694 -> 1711 bytes.
_GOLDEN_SHA256 = "5c981d5fe6e72888214fe6f95795efed5b72db33774a53edf32d8a8f45926158"


def test_the_write_path_keeps_the_file_format_byte_for_byte(tmp_path: Path) -> None:
    import hashlib

    data = _golden_write(tmp_path / "g.nprof").read_bytes()
    footer_at, end = framing.TRAILER.unpack_from(data, len(data) - framing.TRAILER.size)
    assert end == framing.END_MAGIC and (len(data), footer_at) == (1711, 1355)
    assert hashlib.sha256(data[:footer_at]).hexdigest() == _GOLDEN_SHA256
    tf = read_trace(tmp_path / "g.nprof")
    ft = tf.footer
    # by hand: host_ops start at 0 (first batch), instructions end last at 20500 + 7000
    assert (ft.min_ts, ft.max_ts) == (0, 27500)
    assert dict(ft.table_rows)["host_ops"] == 25 and dict(ft.table_rows)["instructions"] == 18
    assert dict(ft.dropped_events) == {"nc0": 5} and dict(ft.metadata) == {"note": "golden"}
    # table id, first row, rows, time bounds of each chunk in file order: the strings (10) come before the first
    # chunk using them; 7-row chunks of host_ops (12) and instructions (13); the flush writes the short ones
    assert [(c.table_id, c.first_row, c.rows, c.min_ts, c.max_end_ts) for c in ft.chunks] == [
        (10, 0, 11, 0, 0), (12, 0, 7, 0, 103), (12, 7, 7, 106, 124), (12, 14, 7, 127, 145), (10, 11, 4, 0, 0),
        (13, 0, 7, 0, 6999), (13, 7, 7, 7000, 13999), (12, 21, 4, 148, 157), (13, 14, 2, 14000, 15999),
        (10, 15, 1, 0, 0), (13, 16, 2, 20000, 27500)]
    offsets = [c.offset for c in ft.chunks]
    assert offsets == sorted(offsets) and offsets[-1] + ft.chunks[-1].length == footer_at
    host = tf.table("host_ops")
    assert host["name"].astype(str).tolist()[:5] == ["a", "b", "a", "c", "b"]
    assert host["duration_ns"].tolist() == [1, 2, 3, 4, 5] + [0] * 20  # a column missing from the second batch
