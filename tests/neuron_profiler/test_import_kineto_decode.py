"""The importer's one parse (``decode``: msgspec into typed ``Event`` structs) against an independent oracle, the
standard library's ``json`` parse converted to the same structs; the extraction over both gives the same
columns. Also the inputs of issue 26 (lone surrogates, numeric strings beyond int64, deep nesting, many keys)."""
from __future__ import annotations

import gzip
import io
import json
import math
import random
import subprocess
import sys
import warnings
from typing import Any

import msgspec
import numpy as np
import pandas as pd
import pytest
from realdata import REAL_TRACE_FILES, real_trace

from neuron_profiler.importers.kineto import extract, load_kineto_builder
from neuron_profiler.importers.kineto.build import build_trace
from neuron_profiler.importers.kineto.decode import decode_document, event_list_type, replace_lone_surrogates
from neuron_profiler.importers.kineto.links import enclosing_operator
from neuron_profiler.importers.kineto.read import load_document
from neuron_profiler.trace import TABLES, NotATraceError, TraceFormatError, read_trace

GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.0}


def _oracle(raw: bytes) -> tuple[dict[str, Any], list[Any]]:
    """The stdlib's parse of a Kineto text, its events converted to the decoder's structs (lone surrogate
    escapes read as U+FFFD, as the decoder does: ``replace_lone_surrogates`` has its own test)."""
    doc = json.loads(replace_lone_surrogates(raw))
    if isinstance(doc, list):
        doc = {"traceEvents": doc}
    events = doc.pop("traceEvents")
    return doc, msgspec.convert(events, event_list_type(doc))


def _same(a: Any, b: Any, path: str = "") -> None:
    """Deep equality of extraction results (arrays element-wise, NaN equal to NaN)."""
    if isinstance(a, extract.IdColumn):
        a, b = a.raw, b.raw
    if isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, path
        if a.dtype.kind == "f":
            np.testing.assert_array_equal(a, b, err_msg=path)
        else:
            assert a.tolist() == b.tolist(), path
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


def _columns(events: list[Any], text: bytes | None) -> tuple[dict[str, Any], extract.EventColumns]:
    ev = extract.EventColumns()
    for i in range(0, max(len(events), 1), 5000):
        ev.add(events[i:i + 5000], text)
    return ev.finish(), ev


def _assert_decode_agrees(raw: bytes) -> dict[str, Any]:
    """The decoder and the stdlib give the same document, events and extracted columns."""
    doc, events, _text = decode_document(raw, "t")
    want_doc, want = _oracle(raw)
    _same(doc, want_doc, "doc")
    got_cols, got_ev = _columns(events, raw)
    want_cols, want_ev = _columns(want, raw)
    _same(got_cols, want_cols, "finish()")
    for attr in ("n_events", "n_instants", "n_counters", "skipped", "skipped_memory", "skipped_counters",
                 "coll_args", "bad_flows", "inexact_ts", "ctr"):
        _same(getattr(got_ev, attr), getattr(want_ev, attr), attr)
    return got_cols


@pytest.mark.parametrize("rel", REAL_TRACE_FILES, ids=lambda r: r.split("/")[-1][:28])
def test_the_decoder_reads_every_real_trace_as_the_stdlib_does(rel):
    raw = gzip.decompress(real_trace(rel).read_bytes()) if rel.endswith(".gz") else real_trace(rel).read_bytes()
    doc, events, _text = decode_document(raw, rel)
    want_doc, want = _oracle(raw)
    assert doc == want_doc and events == want and len(events) > 0


@pytest.mark.parametrize("rel", [
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",  # indented by 4, memory instants
    "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",  # one line, NCCL collectives
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",  # MTIA, flows only
])
def test_import_equals_the_build_from_the_stdlib_parse(rel):
    src = real_trace(rel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = build_trace(load_document(src), str(src))
        got = load_kineto_builder(src)
    assert got.rows("host_ops") > 0
    for t in TABLES:
        pd.testing.assert_frame_equal(got.table(t), want.table(t), obj=t)
    assert got.footer_metadata == want.footer_metadata


def _tricky(i: int) -> dict[str, Any]:
    """An event whose text has "}, {", "]" and "traceEvents" inside strings and nested values."""
    return dict(GOOD, name=f"}}, {{op {i} ]", args={"nested": [{"a": i}, {"b": [1, {"c": "}, {"}]}],
                                                   "traceEvents": [1], "ts": 3})


@pytest.mark.parametrize("indent", [None, 1, 4])
def test_tricky_text_decodes_as_the_stdlib_reads_it(indent):
    events = [_tricky(i) if i % 10 == 0 else dict(GOOD, name=f"e{i}") for i in range(300)]
    info = [f"INFO:... [Profiler = MTIAActivityProfiler] step {k}] done]" for k in range(50)]
    raw = json.dumps({"schemaVersion": 1, "meta": {"traceEvents": [1, 2]}, "traceEvents": events, "INFO": info,
                      "traceName": "t]x"}, indent=indent).encode()
    cols = _assert_decode_agrees(raw)
    doc = decode_document(raw, "t")[0]
    assert doc["INFO"] == info and doc["meta"] == {"traceEvents": [1, 2]} and len(cols["start_ts"]) == 300


def test_a_bare_event_list_and_duplicate_keys_read_as_the_stdlib_does():
    raw = b'[{"ph":"X","ph":"i","name":"[memory]","ts":1,"pid":1,"args":{"a":1,"a":2}}, 3, "x", [1], null]'
    doc, events, _t = decode_document(raw, "t")
    assert doc == {} and events == _oracle(raw)[1] and events[0].ph == "i" and events[0].args == {"a": 2}


_ODD_VALUES = [None, True, -1, -0.5, float("nan"), float("inf"), 2**70, "12", "9" * 30, 4e15 + 1, 9e12,
               2.0**43 + 0.25, [1], {"a": 1}, 1.5, 0, 17, "XX", "", "\ud800"]


def _mutated(events: list[dict[str, Any]], rng: random.Random) -> list[Any]:
    out: list[Any] = []
    for e in events:
        e = dict(e)
        r = rng.random()
        if r < 0.04:
            e.pop(rng.choice(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args"]), None)
        elif r < 0.10:
            e[rng.choice(["ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id"])] = rng.choice(_ODD_VALUES)
        elif r < 0.11:
            out.append(rng.choice([[], 3, "x", None]))
        out.append(e)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_mutated_real_events_decode_and_extract_as_from_the_stdlib(seed):
    """Real events with missing keys and odd values (bools, NaN, huge, numeric strings, lone surrogates, float
    epoch timestamps): the decoder's structs give what the stdlib's parse gives, field for field."""
    rng = random.Random(seed)
    rel = REAL_TRACE_FILES[seed % len(REAL_TRACE_FILES)]
    events = load_document(real_trace(rel))["traceEvents"]
    start = rng.randrange(0, max(len(events) - 2000, 1))
    window = [e for e in events[:100] + events[start:start + 2000] if isinstance(e, dict)]
    for evs in (window, _mutated(window, rng)):
        _assert_decode_agrees(json.dumps({"traceEvents": evs}).encode())


def test_python_frame_ids_are_int64_links_or_none():
    """A python_function row's "Python id" / "Python parent id" is a link only when it is an int64 (not null, a
    numeric string, a float, a bool or an int beyond int64)."""
    values = [b"5", b"null", b'"5"', b"5.0", b"true", b"9223372036854775808", b"-9223372036854775808", b"1e2",
              b"-3", b"[1]"]
    events = b",".join(b'{"ph":"X","cat":"python_function","name":"f","pid":1,"tid":1,"ts":%d,"dur":1,'
                       b'"args":{"Python id":%s,"Python parent id":%s}}' % (i, v, values[-1 - i])
                       for i, v in enumerate(values))
    text = b'[{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":0,"dur":1},' + events + b"]"
    cols = _assert_decode_agrees(text)
    no = extract.NO_FRAME_ID
    ids = [5, no, no, no, no, no, no, no, -3, no]
    assert cols["frames"].tolist() == [[i + 1, ids[i], ids[-1 - i]] for i in range(len(values))]


def test_nan_in_the_first_and_last_event_and_invalid_json(tmp_path):
    events = [dict(GOOD, name=f"e{i}") for i in range(2000)]
    text = json.dumps({"traceEvents": events}, indent=1)
    text = text.replace('"ts": 10.5', '"ts": NaN', 1)[::-1].replace('"ts": 10.5'[::-1], '"ts": NaN'[::-1], 1)[::-1]
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.warns(UserWarning, match="2 ts or dur out of range"):
        b = load_kineto_builder(p)
    assert b.rows("host_ops") == 1998
    p.write_text(json.dumps({"traceEvents": events}, indent=1)[:-2000] + "]}")
    with pytest.raises(NotATraceError, match="not valid JSON"):
        load_kineto_builder(p)


# ------------------------------------------------------------------------------------ issue 26
@pytest.mark.parametrize("text, want", [
    (rb'"\ud800"', '"\ufffd"'), (rb'"a\udfffb"', '"a\ufffdb"'), (rb'"\ud83d\ude00"', '"\U0001F600"'),
    (rb'"\ude00\ud83d"', '"\ufffd\ufffd"'), (rb'"\\ud800"', '"\\\\ud800"'), (rb'"\\\ud800"', '"\\\\\ufffd"'),
    (rb'"\\ud800\udc00"', '"\\\\ud800\ufffd"'), (rb'"\ud800\u0041"', '"\ufffdA"'),
])
def test_lone_surrogate_escapes_read_as_the_replacement_character(text, want):
    assert json.loads(replace_lone_surrogates(text)) == json.loads(want)


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neuron_profiler.cli", *args], capture_output=True, text=True,
                          timeout=120, check=False)


def test_a_lone_surrogate_in_an_unknown_cat_imports_without_a_traceback(tmp_path):
    """Issue 26: an 85-byte file whose unknown ``cat`` holds a lone surrogate gave a TypeError traceback."""
    raw = b'{"traceEvents":[{"ph":"X","cat":"\\ud800","name":"n","pid":1,"tid":1,"ts":1,"dur":1}]}'
    assert len(raw) <= 85
    p = tmp_path / "s.json"
    p.write_bytes(raw)
    with pytest.warns(UserWarning, match="unknown categories"):
        b = load_kineto_builder(p)
    assert b.table("host_ops")["category"].astype(str).tolist() == ["\ufffd"]
    r = _run_cli("import", str(p), "-o", str(tmp_path / "s.nprof"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("where", ["flow id", "int arg"])
def test_numeric_strings_beyond_int64_are_no_ids(tmp_path, where):
    """Issue 26: a flow id or an int arg that is a numeric string beyond int64 raised OverflowError."""
    big = '"' + "9" * 25 + '"'
    ev = [dict(GOOD, args={"External id": 3, "correlation": 5}),
          {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 11, "dur": 1,
           "args": {"correlation": 5, "device": 0, "stream": 7}},
          {"ph": "s", "cat": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 10.5},
          {"ph": "f", "cat": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 11, "bp": "e"}]
    text = json.dumps({"traceEvents": ev})
    text = text.replace('"id": 5', f'"id": {big}', 1) if where == "flow id" else \
        text.replace('"External id": 3', f'"External id": {big}')
    p = tmp_path / "b.json"
    p.write_text(text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(p)
    assert b.rows("host_ops") == 1 and b.rows("instructions") == 1
    assert extract.int_column(["9" * 25, "-" + "9" * 19, "12", " 7 ", "x"]).tolist() == [-1, -1, 12, 7, -1]


@pytest.mark.parametrize("depth", [1, 253, 254, 255, 300, 900])
def test_args_nested_deep_are_kept(tmp_path, depth):
    """Issue 26: args nested 255 deep or more were dropped with no warning (254 deep on the C path)."""
    nested = "[" * depth + "1" + "]" * depth
    p = tmp_path / "d.json"
    p.write_text('{"traceEvents":[{"ph":"X","cat":"cpu_op","name":"n","pid":1,"tid":1,"ts":1,"dur":1,'
                 f'"args":{{"deep":{nested}}}}}]}}')
    args = load_kineto_builder(p).table("host_ops")["args"].astype(str).tolist()
    assert args == ['{"deep":' + nested + "}"]


def test_nesting_beyond_what_a_parser_walks_is_one_line(tmp_path):
    p = tmp_path / "d.json"
    p.write_text('{"traceEvents":[{"ph":"X","args":' + "[" * 100_000 + "]" * 100_000 + "}]}")
    with pytest.raises(NotATraceError, match="nested too deeply"):
        load_kineto_builder(p)
    r = _run_cli("import", str(p), "-o", str(tmp_path / "d.nprof"))
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_one_event_with_many_args_keys_keeps_them_all(tmp_path):
    n = 50_000
    args = {f"k{i}": i for i in range(n)}
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": [dict(GOOD, args=args)]}))
    text = load_kineto_builder(p).table("host_ops")["args"].astype(str).tolist()[0]
    assert json.loads(text) == args


def test_a_4gb_sparse_file_is_refused_before_it_is_read(tmp_path):
    """Issue 26: a 4 GB sparse file starting with ``{"traceEvents":[`` was read whole (4.3 GB RSS)."""
    import resource

    p = tmp_path / "sparse.json"
    with open(p, "wb") as f:
        f.write(b'{"traceEvents":[')
        f.truncate(4 << 30)  # sparse: no disk used
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    r = _run_cli("import", str(p), "-o", str(tmp_path / "s.nprof"))
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert r.returncode == 2 and "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "4,294,967,296 bytes" in r.stderr and "memory" in r.stderr
    assert peak_mb < 256 or before / 1024 >= 256  # (an earlier child may have been larger)


def test_a_gzip_text_beyond_the_memory_budget_stops_while_it_inflates(tmp_path, monkeypatch):
    from neuron_profiler.importers.kineto import read

    p = tmp_path / "z.json.gz"
    p.write_bytes(gzip.compress(b'{"traceEvents":[' + b" " * (8 << 20) + b"]}"))
    monkeypatch.setattr(read, "available_memory", lambda: 6 * (1 << 20))  # a 1 MB text budget at 6x
    with pytest.raises(TraceFormatError, match="inflates to more than 1,048,576 bytes.*memory"):
        read.read_bytes(p)
    monkeypatch.setattr(read, "available_memory", lambda: None)  # unknown: no check
    assert len(read.read_bytes(p)) == (8 << 20) + 18


# ------------------------------------------------------------------------------------ links
def _enclosing_by_stack(is_op, hp, ht, start, dur):
    """Reference: one stack sweep per thread over rows sorted by (start, longest first)."""
    n = len(start)
    res = [-1] * n
    if n == 0:
        return np.asarray(res, dtype=np.int64)
    thread = hp * (int(ht.max()) + 1) + ht
    end = start + dur
    stack, cur = [], None
    for r in np.lexsort((-dur, start, thread)).tolist():
        if thread[r] != cur:
            cur, stack = thread[r], []
        while stack and stack[-1][0] < end[r]:
            stack.pop()
        res[r] = stack[-1][1] if stack else -1
        stack.append((end[r], r if is_op[r] else res[r]))
    return np.asarray(res, dtype=np.int64)


def test_enclosing_operator_matches_a_stack_sweep():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(0, 80))
        hp, ht = rng.integers(0, 3, n), rng.integers(0, 3, n)
        start, dur, is_op = rng.integers(0, 40, n), rng.integers(0, 20, n), rng.random(n) < 0.5
        np.testing.assert_array_equal(enclosing_operator(is_op, hp, ht, start, dur),
                                      _enclosing_by_stack(is_op, hp, ht, start, dur))


def test_collective_counts_that_look_like_digits_are_no_counts(tmp_path):
    """str.isdigit() holds for "²" and "--5".lstrip("-"), which int() refuses: a ValueError traceback before."""
    from neuron_profiler.importers.kineto.collectives import _int

    assert [_int(v) for v in ["12", " 7", "-3", "\u00b2", "1\u00b2", "--5", "-", "9" * 25]] == [12, 7, -3, -1, -1,
                                                                                             -1, -1, -1]
    ev = [dict(GOOD, name="record_param_comms", args={"External id": 3, "Collective name": "allreduce",
                                                     "In msg nelems": "\u00b2", "Out msg nelems": "--5",
                                                     "Group size": "\u00b2", "dtype": "Float"})]
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(p)
    assert b.rows("collectives") == 1 and b.table("collectives")["group_size"].tolist() == [-1]


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1" + "0" * 400])
def test_our_own_export_with_non_finite_or_huge_column_values_imports(tmp_path, value):
    """A re-imported Chrome export (``roundtrip``) whose int / float columns hold NaN, Infinity or an int
    beyond float range: those columns take their defaults (a ValueError / OverflowError traceback before)."""
    from neuron_profiler.importers.kineto import import_kineto

    out = import_kineto(real_trace("kineto/docs_traces/after_fix_trace.json"), tmp_path / "a.nprof", progress=False)
    r = _run_cli("convert", str(out), "--to", "chrome", "-o", str(tmp_path / "c.json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "c.json").read_text())
    marked = 0
    for e in doc["traceEvents"]:
        a = e.get("args")
        if isinstance(a, dict) and "nprof.table" in a:
            for k in [k for k in a if not k.startswith("nprof.")]:
                a[k] = "__X__"
                marked += 1
    assert marked > 10
    (tmp_path / "bad.json").write_text(json.dumps(doc).replace('"__X__"', value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(tmp_path / "bad.json")
    assert b.rows("host_ops") == read_trace(out).row_counts["host_ops"]


@pytest.mark.parametrize("pid", [[1, 2], {"a": 1}, 1.5, None, True])
def test_a_counter_event_whose_pid_is_not_an_id_imports(tmp_path, pid):
    """Found by bench/fuzz_kineto.py (input 82,526 of 100,000): a ph "C" event whose pid is a list gave
    ``TypeError: unhashable type: 'list'`` in the track table; the pid is keyed by its repr, as for memory."""
    ev = [GOOD, {"ph": "C", "name": "util", "pid": pid, "tid": 0, "ts": 11, "args": {"value": 3}}]
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = load_kineto_builder(p)
    assert b.table("counters")["value"].tolist() == [3.0]
    r = _run_cli("import", str(p), "-o", str(tmp_path / "c.nprof"))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_the_one_pass_decode_of_a_kineto_document_equals_the_two_pass_decode():
    """A document holding only Kineto's top-level keys is decoded in one pass (``KINETO_TOP_KEYS``); one key of
    its own sends it through the two-pass decode. Both give the stdlib's document and events; epoch ts with
    ns decimals stay exact (a float64 cannot hold them: re-read from the text) although the one pass returns
    the whole text ("ts" keys before the events and inside args are skipped by the alignment)."""
    from neuron_profiler.importers.kineto.decode import KINETO_TOP_KEYS

    ev = ",".join(f'{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 1, "tid": 1, '
                  f'"ts": 1669783687464{181 + i}.{123 + i}, "dur": 2, "args": {{"ts": 5, "External id": {i}}}}}'
                  for i in range(50))
    head = '{"schemaVersion": 1, "metadata": {"ts": 1.5, "x": [1, 2]}, '
    tail = ', "INFO": ["a"], "traceName": "t", "displayTimeUnit": "ms"}'
    one = (head + f'"traceEvents": [{ev}]' + tail).encode()
    two = (head + '"my_own_key": {"traceEvents": []}, ' + f'"traceEvents": [{ev}]' + tail).encode()
    assert {"schemaVersion", "metadata", "INFO", "traceName", "displayTimeUnit"} <= set(KINETO_TOP_KEYS)
    got_one, got_two = decode_document(one, "t"), decode_document(two, "t")
    assert got_one[2] is one and bytes(got_two[2]).startswith(b"[{")  # one pass: the whole text; two: the events'
    assert got_one[0] == _oracle(one)[0] and got_two[0] == _oracle(two)[0] and "my_own_key" in got_two[0]
    assert got_one[1] == got_two[1] == _oracle(one)[1] and len(got_one[1]) == 50
    cols_one, _ = _columns(got_one[1], one)
    cols_two, _ = _columns(got_two[1], bytes(got_two[2]))
    _same(cols_one, cols_two)
    assert cols_one["start_ts"].tolist() == [1669783687464181123 + 1001 * i for i in range(50)]  # by hand


class _Pieces(io.BytesIO):
    """A text read as ``decode.Chunked`` reads a file, but in pieces of at most ``most`` bytes (a reader may
    return fewer bytes than asked): every cut of the text between pieces is tried somewhere."""

    def __init__(self, raw: bytes, most: int) -> None:
        super().__init__(raw)
        self.most = most

    def readinto(self, b: Any) -> int:
        with memoryview(b) as view:
            return super().readinto(view[:self.most])


def _chunked_or_whole(raw: bytes, size: int, piece: int = 1 << 30) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(document, extracted columns, "chunked" / "whole") as ``api._read_events`` reads ``raw`` with chunks of
    ``size`` bytes, the text read in pieces of at most ``piece`` bytes: chunk by chunk when ``document_chunks``
    can, else whole (``decode_document``)."""
    from neuron_profiler.importers.kineto.decode import document_chunks

    chunked = document_chunks(_Pieces(raw, piece), size)
    if chunked is not None:
        ev = extract.extract_chunked(chunked)
        if ev is not None:
            return chunked.doc, ev.finish(), "chunked"
    doc, events, text = decode_document(raw, "t")
    return doc, extract.extract_events(events, text).finish(), "whole"


@pytest.mark.parametrize("rel", [
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",  # deviceProperties (objects) after the events
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",  # INFO / ERROR lists after
    "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",  # one line, no space between elements
])
@pytest.mark.parametrize("size,piece", [(1, 1 << 30), (3000, 4099), (200_000, 1 << 30), (200_000, 65_537)])
def test_a_real_trace_read_a_chunk_at_a_time_equals_the_whole_read(rel, size, piece):
    raw = gzip.decompress(real_trace(rel).read_bytes())
    doc, cols, how = _chunked_or_whole(raw, size, piece)
    want_doc, want_events, text = decode_document(raw, rel)
    assert how == "chunked" and list(doc) == list(_oracle(raw)[0]) and doc == want_doc
    _same(cols, extract.extract_events(want_events, text).finish())


def test_cuts_inside_strings_and_nested_values_and_odd_keys_read_as_the_whole_text():
    """Every cut the chunks may try: inside a string holding "}, {", between nested objects of args, a
    top-level "traceEvents" found first inside another key, a key "e" after the events, objects after them,
    a lone surrogate in a late event: each reads as the whole text (or is read whole)."""
    nested = {"nested": [{"a": 1}, {"b": [{"c": "}, {"}]}], "s": "x}, {y", "ts": 3}
    events = [dict(GOOD, name=f"}}, {{op {i}", ts=10.5 + i, args=nested if i % 3 else {"External id": i})
              for i in range(400)]
    docs = [
        {"schemaVersion": 1, "traceEvents": events, "deviceProperties": [{"id": 0}, {"id": 1}]},
        {"meta": {"traceEvents": [{"ph": "X"}, {"ph": "i"}]}, "traceEvents": events, "traceName": "t"},
        {"traceEvents": events, "e": [1]},
        {"traceEvents": events[:1]},
        {"traceEvents": []},
    ]
    texts = [json.dumps(d, indent=ind).encode() for d in docs for ind in (None, 2)]
    texts.append(json.dumps(docs[0]).encode().replace(b'"op 399', b'"op \\ud800 399'))  # lone surrogate
    texts.append(json.dumps(docs[0]).encode() + b" x")  # trailing garbage: the whole read's error
    for raw in texts:
        for size, piece in ((1, 1 << 30), (500, 7), (7000, 1 << 30), (7000, 1000)):
            try:
                want_doc, want_events, text = decode_document(raw, "t")
            except NotATraceError:
                with pytest.raises(NotATraceError):
                    _chunked_or_whole(raw, size, piece)
                continue
            doc, cols, _how = _chunked_or_whole(raw, size, piece)
            assert doc == want_doc
            _same(cols, extract.extract_events(want_events, text).finish())
    assert [_chunked_or_whole(texts[i], 500)[2] for i in (0, 1, 2, 4, 6, 8)] == [
        "chunked", "chunked", "whole", "whole", "chunked", "chunked"]  # nested "traceEvents" first, own "e" key


def test_a_text_read_in_pieces_checks_utf8_across_the_cuts_and_grows_for_large_elements():
    """Names in several scripts, their UTF-8 bytes cut between pieces anywhere: the chunked read equals the
    whole one. A byte that is not UTF-8, early or in the last piece, or a sequence the text ends inside: the
    chunked read gives up and the whole read's error (its message) comes back. An element larger than the
    buffer (a 600 kB args string) is read whole by growing the buffer."""
    names = ["é", "中文", "😀", "aé中😀"]
    events = [dict(GOOD, name=f"{names[i % 4]} op{i}", ts=10.5 + i, args={"s": names[i % 3] * 3},
                   note=f"<{names[i % 4]}{i}>") for i in range(300)]  # "note": a key the decoder skips unread
    raw = json.dumps({"schemaVersion": 1, "traceEvents": events}, ensure_ascii=False).encode()
    want_doc, want_events, text = decode_document(raw, "t")
    want = extract.extract_events(want_events, text).finish()
    for piece in (1, 2, 3, 5, 4096):
        doc, cols, how = _chunked_or_whole(raw, 700, piece)
        assert how == "chunked" and doc == want_doc
        _same(cols, want)
    for bad in (raw.replace("<中文1>".encode(), b"<\xff\xfe>"), raw.replace("<😀298>".encode(), b"<\xc3298>"),
                raw.replace("<aé中😀151>".encode(), "<aé中😀151>".encode()[:-6] + b">")):
        with pytest.raises(NotATraceError) as whole:
            decode_document(bad, "t")
        for piece in (3, 4096):
            with pytest.raises(NotATraceError) as chunked:
                _chunked_or_whole(bad, 700, piece)
            assert str(chunked.value) == str(whole.value)
    big = [dict(GOOD, ts=1.5 + i, args={"s": "x" * (600_000 if i == 40 else 10)}) for i in range(100)]
    raw = json.dumps({"traceEvents": big, "traceName": "t"}).encode()
    want_doc, want_events, text = decode_document(raw, "t")
    doc, cols, how = _chunked_or_whole(raw, 300, 1000)
    assert how == "chunked" and doc == want_doc
    _same(cols, extract.extract_events(want_events, text).finish())


def test_a_chunked_read_decides_exact_timestamps_for_the_whole_trace_as_the_whole_read_does():
    """Sub-ns ts texts round by decimal arithmetic when the trace's ts are re-read from the text (a float ts
    beyond 2**43 us somewhere), by float64 otherwise ("4.0025" us: 4002 ns against 4003 ns): a chunked read makes
    that choice for the whole trace, as the whole read does (reading the text whole when a later chunk
    first needs it)."""

    def ev(ts: str, i: int) -> str:
        return f'{{"ph": "X", "cat": "cpu_op", "name": "op{i}", "pid": 1, "tid": 1, "ts": {ts}, "dur": 1}}'

    small = [ev("4.0025", i) for i in range(300)]
    epoch = [ev(f"1669783687464{i:03d}.5", i) for i in range(300)]
    for events, how in ((small + epoch, "whole"), (epoch + small, "chunked"), (small, "chunked")):
        raw = ('{"schemaVersion": 1, "traceEvents": [' + ",\n".join(events) + "]}").encode()
        doc, cols, got_how = _chunked_or_whole(raw, 2000)
        want_doc, want_events, text = decode_document(raw, "t")
        want = extract.extract_events(want_events, text).finish()
        assert got_how == how and doc == want_doc
        _same(cols, want)
        exact = len(events) == 600
        assert want["start_ts"][events.index(small[1])] == (4002 if exact else 4003)  # decimal vs float64
