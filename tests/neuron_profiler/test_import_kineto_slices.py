"""The fast import paths give the same trace as the plain ones: JSON parsed slice by slice vs as a whole,
events extracted in chunks vs at once, the vectorized enclosing-operator search vs a stack sweep."""
from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pandas as pd
import pytest
from realdata import real_trace

from neuron_profiler.importers.kineto import api, load_kineto_builder
from neuron_profiler.importers.kineto import split as ks
from neuron_profiler.importers.kineto.build import build_trace
from neuron_profiler.importers.kineto.links import enclosing_operator
from neuron_profiler.importers.kineto.read import load_document
from neuron_profiler.trace import TABLES, NotATraceError

GOOD = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.0}


def _tables(b):
    return {t: b.table(t) for t in TABLES}


def _assert_same(b1, b2):
    for t, df in _tables(b1).items():
        pd.testing.assert_frame_equal(df, b2.table(t), obj=t)
    assert b1.footer_metadata == b2.footer_metadata
    h1, h2 = b1.header, b2.header
    h1.created_unix_ns = h2.created_unix_ns = 0
    assert h1 == h2


@pytest.mark.parametrize("rel", [
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",  # indented by 4, memory instants
    "HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz",  # one line, NCCL collectives
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",  # MTIA, flows only
])
def test_sliced_import_equals_whole_document_import(rel, monkeypatch):
    src = real_trace(rel)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = build_trace(load_document(src), str(src))
        monkeypatch.setattr(ks, "SLICE_BYTES", 20_000)  # many slices, some cut inside events and merged
        monkeypatch.setattr(api, "_WHOLE_PARSE_BYTES", 0)  # small texts are otherwise parsed at once
        raw = gzip.decompress(src.read_bytes())
        assert len(ks.split_document(raw, 20_000)[1]) > 20
        sliced = load_kineto_builder(src)
    assert whole.rows("host_ops") > 0
    _assert_same(whole, sliced)


def _doc_text(events, indent=None, tail=None):
    doc = {"schemaVersion": 1, "traceEvents": events, "traceName": "t]x"}
    doc.update(tail or {})
    return json.dumps(doc, indent=indent)


def _tricky(i):
    """An event whose text has "}, {", "]" and "traceEvents" inside strings and nested values."""
    return dict(GOOD, name=f"}}, {{op {i} ]", args={"nested": [{"a": i}, {"b": [1, {"c": "}, {"}]}],
                                                   "traceEvents": [1]})


@pytest.mark.parametrize("indent", [None, 1, 4])
def test_split_document_is_exact_on_tricky_text(indent):
    events = [_tricky(i) if i % 10 == 0 else dict(GOOD, name=f"e{i}") for i in range(600)]
    raw = _doc_text(events, indent, {"after": [[1], {"k": "]"}]}).encode()
    doc, ranges = ks.split_document(raw, slice_bytes=500)
    assert len(ranges) > 10 and doc["after"] == [[1], {"k": "]"}] and doc["traceName"] == "t]x"
    got = [e for part in ks.iter_slices(raw, ranges) for e in part]
    assert got == json.loads(raw)["traceEvents"]


def test_text_too_tricky_to_slice_is_parsed_whole(tmp_path, monkeypatch):
    events = [dict(GOOD, args={"list": [{"a": k} for k in range(100)]}) for _ in range(100)]  # "}, {" x 100
    raw = _doc_text(events, 1).encode()
    split = ks.split_document(raw, slice_bytes=300)  # None: the array's end lies beyond every cut tried
    if split is not None:
        with pytest.raises(ks.SliceError):
            list(ks.iter_slices(raw, split[1]))
    p = tmp_path / "t.json"
    p.write_bytes(raw)
    monkeypatch.setattr(ks, "SLICE_BYTES", 300)
    monkeypatch.setattr(api, "_WHOLE_PARSE_BYTES", 0)
    sliced = load_kineto_builder(p)
    _assert_same(build_trace(load_document(p), str(p)), sliced)
    assert sliced.rows("host_ops") == 100


def test_keys_after_the_events_full_of_brackets_still_slice():
    """Kineto writes log lists (INFO, ERROR) after traceEvents whose lines hold "]" (the MTIA trace has
    hundreds): the array's end is still found, so the fast slice parser is used."""
    info = [f"INFO:... [Profiler = MTIAActivityProfiler] step {k}] done]" for k in range(200)]
    raw = json.dumps({"schemaVersion": 1, "traceEvents": [GOOD] * 300, "INFO": info, "ERROR": ["x]"],
                      "traceName": "t"}).encode()
    doc, ranges = ks.split_document(raw, slice_bytes=300)
    assert doc["INFO"] == info and doc["traceName"] == "t"
    assert sum(len(e) for e in ks.iter_slices(raw, ranges)) == 300 and len(ranges) > 10


def test_split_document_refuses_nested_or_missing_events():
    nested = json.dumps({"meta": {"traceEvents": [1, 2]}, "traceEvents": [GOOD]}).encode()
    assert ks.split_document(nested) is None
    assert ks.split_document(json.dumps([GOOD]).encode()) is None
    assert ks.split_document(b'{"traceEvents": {"a": 1}}') is None


def test_nan_in_a_later_slice_and_invalid_json(tmp_path):
    events = [dict(GOOD, name=f"e{i}") for i in range(2000)]
    text = _doc_text(events, 1).replace('"ts": 10.5', '"ts": NaN', 1)[::-1].replace(
        '"ts": 10.5'[::-1], '"ts": NaN'[::-1], 1)[::-1]  # NaN in the first and in the last event
    p = tmp_path / "t.json"
    p.write_text(text)
    with pytest.warns(UserWarning, match="2 ts or dur out of range"):
        b = load_kineto_builder(p)
    assert b.rows("host_ops") == 1998
    p.write_text(_doc_text(events, 1)[:-2000] + "]}")
    with pytest.raises(NotATraceError, match="not valid JSON"):
        load_kineto_builder(p)


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


def test_small_texts_parsed_at_once_equal_the_sliced_import(monkeypatch):
    """Texts up to 2 MB are parsed by one orjson call; the result equals the sliced import."""
    src = real_trace("HolisticTraceAnalysis/trace_filter/sampled_rank-0.json.gz")
    assert len(gzip.decompress(src.read_bytes())) <= api._WHOLE_PARSE_BYTES
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = load_kineto_builder(src)
        monkeypatch.setattr(api, "_WHOLE_PARSE_BYTES", 0)
        sliced = load_kineto_builder(src)
    _assert_same(whole, sliced)
