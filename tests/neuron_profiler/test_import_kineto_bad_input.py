"""Bad Kineto input: a clear TraceFormatError for what cannot be read, warnings with counts for skipped
events, never a crash from deep inside."""
from __future__ import annotations

import gzip
import json
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neuron_profiler.importers.kineto import import_directory, import_kineto, load_kineto_builder
from neuron_profiler.trace import NotATraceError, TraceFormatError, TruncatedTraceError, read_trace

GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.0}
KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 11, "dur": 1,
          "args": {"device": 0, "stream": 7, "correlation": 3}}


def _write(tmp_path, doc, name="t.json"):
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


@pytest.mark.parametrize("text, match", [
    ("{not json", "not valid JSON"),
    ("", "empty file"),
    ('{"foo": 1}', "'traceEvents' list"),
    ('"just a string"', "found a JSON str"),
    ('{"traceEvents": {"a": 1}}', "must be a list"),
])
def test_not_a_trace(tmp_path, text, match):
    with pytest.raises(NotATraceError, match=match):
        load_kineto_builder(_write(tmp_path, text))


def test_truncated_gzip(tmp_path):
    raw = gzip.compress(json.dumps({"traceEvents": [GOOD] * 200}).encode())
    p = tmp_path / "t.json.gz"
    p.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(TruncatedTraceError, match="truncated gzip"):
        import_kineto(p, tmp_path / "o.nprof", progress=False)
    assert not (tmp_path / "o.nprof").exists()


def test_corrupt_gzip(tmp_path):
    raw = bytearray(gzip.compress(json.dumps({"traceEvents": [GOOD] * 50}).encode()))
    raw[20:40] = b"\xff" * 20
    p = tmp_path / "t.json.gz"
    p.write_bytes(bytes(raw))
    with pytest.raises(TraceFormatError):
        load_kineto_builder(p)


def test_bare_event_list_is_accepted(tmp_path):
    b = load_kineto_builder(_write(tmp_path, [GOOD]))
    assert b.rows("host_ops") == 1


def test_skipped_events_warn_with_counts(tmp_path):
    events = [GOOD, KERNEL,
              {"ph": "X", "cat": "cpu_op", "name": "no ts", "pid": 1, "tid": 1, "dur": 1},
              {"ph": "X", "cat": "cpu_op", "name": "str ts", "pid": 1, "tid": 1, "ts": "12", "dur": 1},
              {"ph": "X", "cat": "cpu_op", "name": "neg", "pid": 1, "tid": 1, "ts": 12, "dur": -5},
              {"ph": "X", "cat": "cpu_op", "name": "neg2", "pid": 1, "tid": 1, "ts": 13, "dur": -1},
              {"ph": "Q", "name": "weird phase"}, 42, None,
              {"ph": "X", "cat": "kernel", "name": "no device", "pid": "GPU?", "tid": 1, "ts": 1, "dur": 1}]
    with pytest.warns(UserWarning) as rec:
        b = load_kineto_builder(_write(tmp_path, {"traceEvents": events}))
    msg = " ".join(str(w.message) for w in rec)
    assert "skipped 8 unreadable events" in msg
    for part in ("2 negative dur", "2 missing or non-numeric ts", "2 event is not a JSON object",
                 "1 unsupported ph 'Q'", "1 device event without a device id"):
        assert part in msg
    assert b.rows("host_ops") == 1 and b.rows("instructions") == 1
    assert json.loads(b.footer_metadata["skipped_events"])["negative dur"] == 2


def test_all_events_unreadable_is_an_error(tmp_path):
    bad = [{"ph": "X", "name": "x", "ts": "a", "dur": 1}, {"ph": "X", "name": "y", "ts": 1, "dur": -1}]
    with pytest.raises(TraceFormatError, match=r"none of the 2 events could be read \(1 missing"):
        load_kineto_builder(_write(tmp_path, {"traceEvents": bad}))


def test_only_unreadable_flow_halves_name_their_reason(tmp_path):
    bad = [{"ph": "s", "cat": "ac2g"}, {"ph": "f", "cat": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": "x"}]
    with pytest.raises(TraceFormatError, match=r"none of the 2 events could be read \(2 unreadable flow event\)$"):
        load_kineto_builder(_write(tmp_path, {"traceEvents": bad}))


def test_unknown_categories_are_imported_and_reported(tmp_path):
    ev = [GOOD, dict(GOOD, cat="my_backend_runtime", name="x"), dict(GOOD, cat=None, name="nocat")]
    with pytest.warns(UserWarning, match=r"2 events with unknown categories imported as host ops"):
        b = load_kineto_builder(_write(tmp_path, {"traceEvents": ev}))
    assert sorted(b.table("host_ops")["category"].astype(str)) == ["", "cpu_op", "my_backend_runtime"]


def test_wrong_typed_fields_do_not_crash(tmp_path):
    ev = [dict(GOOD, args="not a dict"), dict(GOOD, pid=[1, 2], tid={"a": 1}), dict(GOOD, name=123),
          dict(KERNEL, args={"device": "zero", "stream": None, "correlation": "abc", "bytes": "many"}),
          {"ph": "s", "id": [1], "ts": "x", "cat": "ac2g"}, {"ph": "f", "cat": ["ac2g"], "ts": 1, "id": 1},
          {"ph": "M", "name": "thread_name", "pid": [1], "tid": 1, "args": {"name": "t"}},
          {"ph": "i", "name": "[memory]", "ts": 1, "args": None},
          {"ph": "C", "name": "ctr", "ts": 1, "pid": 1, "args": {"v": "not a number", "w": 3}},
          dict(GOOD, ts=1e30), dict(GOOD, dur=10**40), dict(GOOD, args={"External id": 10**30})]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(_write(tmp_path, {"traceEvents": ev, "distributedInfo": "junk"}))
    assert b.rows("host_ops") == 4 and b.rows("instructions") == 1 and b.rows("counters") == 1
    assert json.loads(b.footer_metadata["skipped_events"])["ts or dur out of range"] == 2
    assert b.table("instructions")["correlation_id"].tolist() == [-1]
    assert (b.header.rank, b.header.world_size) == (0, 1)


def test_nan_and_infinity_timestamps_are_skipped(tmp_path):
    text = ('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": NaN, "dur": 1},'
            '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1, "dur": Infinity},'
            '{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 1, "dur": 1}]}')
    with pytest.warns(UserWarning, match="2 ts or dur out of range"):
        b = load_kineto_builder(_write(tmp_path, text))
    assert b.table("host_ops")["name"].tolist() == ["c"]


def test_missing_file_and_empty_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        import_kineto(tmp_path / "nope.json", tmp_path / "o.nprof", progress=False)
    with pytest.raises(TraceFormatError, match="no Kineto trace files"):
        import_directory(tmp_path, tmp_path / "out", progress=False)
    with pytest.raises(TraceFormatError, match="is a directory"):
        load_kineto_builder(tmp_path)


def test_duplicate_ranks_in_directory(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    for n in ("a.json", "b.json"):
        _write(d, {"distributedInfo": {"rank": 3, "world_size": 4}, "traceEvents": [GOOD]}, n)
    with pytest.raises(TraceFormatError, match="rank 3 already imported"):
        import_directory(d, tmp_path / "out", progress=False)


_scalar = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(-10, 1e6, allow_nan=False),
                    st.text(max_size=5))
_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "s", "f", "M", "i", "C", "B", None])},
    optional={"cat": st.sampled_from(["cpu_op", "kernel", "gpu_memcpy", "cuda_runtime", "ac2g", "fwdbwd",
                                      "gpu_user_annotation", "python_function", "Trace", "zzz"]),
              "name": _scalar, "pid": _scalar, "tid": _scalar, "ts": _scalar, "dur": _scalar, "id": _scalar,
              "args": st.one_of(st.none(), st.dictionaries(
                  st.sampled_from(["device", "stream", "correlation", "External id", "bytes", "Collective name",
                                   "Input Dims", "Python id", "Python parent id", "name", "Total Allocated"]),
                  _scalar, max_size=4))})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_event, max_size=12))
def test_fuzzed_events_import_or_raise_format_error(tmp_path, events):
    p = _write(tmp_path, {"traceEvents": events}, "fuzz.json")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = import_kineto(p, tmp_path / "fuzz.nprof", progress=False)
    except TraceFormatError:
        return
    tf = read_trace(out)
    assert tf.row_counts["host_ops"] + tf.row_counts["instructions"] <= len(events)
