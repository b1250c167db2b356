"""The compiled per-event passes of the Kineto importer (``_fastextract``) against their oracle, the Python
path (``NEURON_PROFILER_PURE_PYTHON``'s path), and its JSON text against orjson's.

The Python path is the specification: every test runs both on the same input and compares everything
``EventColumns`` keeps. CI (``.ci/run``) fails when the extension did not build, so these never all skip there.
"""
from __future__ import annotations

import copy
import math
import random
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realdata import REAL_TRACE_FILES, real_trace

from neuron_profiler.importers.kineto import args as kargs
from neuron_profiler.importers.kineto import extract
from neuron_profiler.importers.kineto.read import load_document

compiled = extract.compiled
pytestmark = pytest.mark.skipif(compiled is None, reason="the C extension _fastextract is not built")


def _columns(events: list[Any], use_compiled: bool, monkeypatch: pytest.MonkeyPatch,
             **add: Any) -> tuple[dict[str, Any], extract.EventColumns]:
    monkeypatch.setattr(extract, "compiled", compiled if use_compiled else None)
    if "text" in add:  # the exact path writes int ns into the events it re-reads: each run gets its own
        events = copy.deepcopy(events)
    ev = extract.EventColumns()
    for i in range(0, max(len(events), 1), 5000):
        ev.add(events[i:i + 5000], **add)
    out = ev.finish()
    monkeypatch.setattr(extract, "compiled", compiled)
    return out, ev


def _same(a: Any, b: Any, path: str = "") -> None:
    """Deep equality of the extraction results (arrays element-wise, NaN equal to NaN)."""
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


def _assert_paths_agree(events: list[Any], monkeypatch: pytest.MonkeyPatch, **add: Any) -> dict[str, Any]:
    """Both paths' ``finish()`` and kept attributes are equal; returns the compiled path's columns."""
    fast, ev_fast = _columns(events, True, monkeypatch, **add)
    slow, ev_slow = _columns(events, False, monkeypatch, **add)
    _same(fast, slow, "finish()")
    for attr in ("n_events", "n_instants", "n_counters", "skipped", "skipped_memory", "skipped_counters",
                 "coll_args", "bad_flows", "inexact_ts", "meta", "ctr"):
        _same(getattr(ev_fast, attr), getattr(ev_slow, attr), attr)
    return fast


@pytest.mark.parametrize("rel", REAL_TRACE_FILES, ids=lambda r: r.split("/")[-1][:28])
def test_compiled_and_python_paths_agree_on_every_real_trace(rel, monkeypatch):
    events = load_document(real_trace(rel))["traceEvents"]
    cols = _assert_paths_agree(events, monkeypatch)
    assert len(cols["start_ts"]) > 0


# ------------------------------------------------------------------------------------ JSON text vs orjson
_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=12)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**65, 2**65), st.floats(allow_nan=True,
                     allow_infinity=True), _text)
_json = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(_text, kids, max_size=4),
                     max_leaves=20)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_json)
def test_json_text_is_orjsons_or_left_to_the_fallback(value):
    """Every value the encoder writes is byte-equal to orjson's text; a value it leaves (None) is one orjson
    refuses too (ints beyond 64 bits, lone surrogates)."""
    try:
        expected: bytes | None = orjson.dumps(value)
    except TypeError:
        expected = None
    assert compiled.dumps(value) == expected


@pytest.mark.parametrize("value, text", [
    (1e-5, b"0.00001"), (2.5e-05, b"0.000025"), (1.5e-07, b"1.5e-7"), (1e16, b"1e+16"), (-0.0, b"-0.0"),
    (float("nan"), b"null"), (float("-inf"), b"null"), (2**64 - 1, b"18446744073709551615"),
    ("\x01\x1f\x7f\u2028\u00e9\"\\\n", b'"\\u0001\\u001f\x7f\xe2\x80\xa8\xc3\xa9\\"\\\\\\n"'),
])
def test_json_text_by_hand(value, text):
    assert compiled.dumps(value) == text


def test_deep_values_and_unencodable_ones_go_to_the_fallback():
    deep: Any = 1
    for _ in range(80):
        deep = [deep]
    assert compiled.dumps(deep) is None
    assert compiled.dumps(2**64) is None and compiled.dumps("\ud800") is None


# ------------------------------------------------------------------------------------ args columns
_arg_keys = st.sampled_from(["External id", "correlation", "Sequence number", "flops", "bytes", "device",
                             "stream", "Input Dims", "Input type", "Collective name", "Ev Idx",
                             "Record function id", "grid", "Concrete Inputs", "name", "\u00e9t\u00e9"])
_arg_values = st.one_of(_scalars, st.sampled_from(["12", " 7 ", "1_000", "x", "9" * 30, "-3", 2**62, -2**62,
                                                   2**62 - 1, 1 - 2**62, 2.0**62, -(2.0**62), 2**63]),
                        st.lists(st.one_of(st.integers(-5, 5), _text), max_size=3),
                        st.lists(st.lists(st.integers(0, 4096), max_size=3), max_size=3))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.dictionaries(_arg_keys, _arg_values, max_size=6), st.sampled_from([0, 1, 2, 3])),
                min_size=1, max_size=12))
def test_args_columns_agree_with_the_python_path(rows):
    args, cls = [a for a, _c in rows], np.array([c for _a, c in rows], dtype=np.int8)
    try:
        slow = kargs.args_columns_py(args, cls)
    except OverflowError:  # a numeric string beyond int64: the Python path's own answer; C leaves it to it
        assert extract._args_columns_compiled(args, cls, {}) is None
        return
    fast = extract._args_columns_compiled(args, cls, {})
    if fast is None:  # only for a numeric string beyond int64 that the Python path stores
        assert any(isinstance(v, str) and v.strip().lstrip("+-").replace("_", "").isdigit()
                   and abs(int(v)) >= 2**63 for a in args for v in a.values())
        return
    _same(fast, slow, "args_columns")


# ------------------------------------------------------------------------------------ odd events
_ODD_VALUES = [None, True, -1, -0.5, float("nan"), float("inf"), 2**70, "12", 4e15 + 1, 9e12, 2.0**43 + 0.25,
               [1], {"a": 1}, 1.5, 0, 17, "XX", ""]


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


_FIELDS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args", "id")


@pytest.mark.parametrize("rel", [REAL_TRACE_FILES[i] for i in (2, 4, 7, 8)], ids=lambda r: r.split("/")[-1][:20])
def test_paths_agree_when_one_event_has_one_odd_field(rel, monkeypatch):
    """One field of one event (a complete event, a flow half, a metadata or an instant event) removed or set to
    an odd value in an otherwise clean slice: a slice the compiled pass takes must give what the Python path
    gives, so a value it accepts and the Python path reads differently (a null flow id...) shows here."""
    events = load_document(real_trace(rel))["traceEvents"]
    window = [e for e in events[:60] + events[len(events) // 2:len(events) // 2 + 240] if isinstance(e, dict)]
    by_ph = {}
    for i, e in enumerate(window):
        by_ph.setdefault(e.get("ph"), i)
    for i in by_ph.values():
        for field in _FIELDS:
            for value in [...] + _ODD_VALUES:
                picked = list(window)
                e = picked[i] = dict(picked[i])
                if value is ...:
                    e.pop(field, None)
                else:
                    e[field] = value
                _assert_paths_agree(picked, monkeypatch)


@pytest.mark.parametrize("seed", range(12))
def test_paths_agree_on_mutated_real_events(seed, monkeypatch):
    """Real events with missing keys and odd values (bools, NaN, negative, huge, strings, float epoch
    timestamps): whatever the Python path keeps, skips or counts, the compiled path gives the same."""
    rng = random.Random(seed)
    rel = REAL_TRACE_FILES[seed % len(REAL_TRACE_FILES)]
    events = load_document(real_trace(rel))["traceEvents"]
    start = rng.randrange(0, max(len(events) - 3000, 1))
    window = [e for e in events[:100] + events[start:start + 3000] if isinstance(e, dict)]
    for rate in (0.0, 1.0):  # unmutated slices take the compiled path, mutated ones mostly the Python one
        picked = _mutated(window, rng) if rate else window
        _assert_paths_agree(picked, monkeypatch)
    _assert_paths_agree(window, monkeypatch, float_ts_checked=True)


def test_epoch_float_timestamps_take_the_exact_path(monkeypatch):
    """A float ts too large for float64 to keep its ns (epoch microseconds, no baseTimeNanoseconds) sends the
    slice to the exact re-read from the text, on both paths: the ns come from the digits."""
    text = (b'[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1700000000123456.789,"dur":1.5,'
            b'"args":{"stream":7}},{"ph":"M","name":"thread_name","pid":0,"tid":7,"args":{"name":"s"}}]')
    events = orjson.loads(text)
    cols = _assert_paths_agree(events, monkeypatch, text=text)
    assert cols["start_ts"].tolist() == [1700000000123456789] and cols["duration_ns"].tolist() == [1500]
    # the large float is on a flow only: the complete events' integer ts are exact either way
    text = (b'[{"ph":"X","cat":"cpu_op","name":"op","pid":0,"tid":1,"ts":1700000000123455,"dur":3,"args":{}},'
            b'{"ph":"s","cat":"ac2g","id":4,"pid":0,"tid":1,"ts":1700000000123455.123}]')
    cols = _assert_paths_agree(orjson.loads(text), monkeypatch, text=text)
    assert cols["flows"]["ts"].tolist() == [1700000000123455123]


# ------------------------------------------------------------------------------------ the scan of the text
def _read(src, use_compiled: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], Any]:
    from neuron_profiler.importers.kineto import api

    monkeypatch.setattr(extract, "compiled", compiled if use_compiled else None)
    doc, ev = api._read_events(src, lambda _s: None)
    monkeypatch.setattr(extract, "compiled", compiled)
    return doc, ev


@pytest.mark.parametrize("rel", REAL_TRACE_FILES, ids=lambda r: r.split("/")[-1][:28])
def test_the_scan_of_the_text_gives_what_the_parse_gives_on_every_real_trace(rel, monkeypatch):
    """The importer's read of a real trace, with the compiled scan of the text (slice by slice, or the whole
    events array of a small file) against the orjson parse and the Python passes: the same document and columns."""
    doc_fast, fast = _read(real_trace(rel), True, monkeypatch)
    doc_slow, slow = _read(real_trace(rel), False, monkeypatch)
    assert doc_fast == doc_slow
    for attr in ("n_events", "n_instants", "n_counters", "skipped", "coll_args", "bad_flows",
                 "inexact_ts", "meta", "ctr"):
        _same(getattr(fast, attr), getattr(slow, attr), attr)
    _same(fast.finish(), slow.finish(), "finish()")


def _scan_or_parse(text: bytes, use_scan: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """The columns of a JSON array of events: by the scan (which must take it), or by orjson + the Python path."""
    ev = extract.EventColumns()
    if use_scan:
        start = text.index(b"[") + 1
        end = ev.add_text(text, start, len(text), array=True)
        assert end == text.rindex(b"]")
    else:
        monkeypatch.setattr(extract, "compiled", None)
        doc = orjson.loads(text)
        ev.add(doc["traceEvents"] if isinstance(doc, dict) else doc, text)
        monkeypatch.setattr(extract, "compiled", compiled)
    return ev.finish(), ev.coll_args, ev.meta, ev.n_events


_kineto_keys = st.sampled_from(["External id", "correlation", "Input Dims", "Input type", "Concrete Inputs",
                                "Collective name", "stream", "device", "flops", "grid", "occupancy", "Python id",
                                "Python parent id", "\u00e9\u00e8", "a\"b", "tab\tkey"])
_plain_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # what JSON text can hold
_nested = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**64 - 1), st.floats(allow_nan=False,
                                 allow_infinity=False), _plain_text),
                       lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_plain_text, kids, max_size=3),
                       max_leaves=8)


@st.composite
def _event(draw):
    """A Kineto-like event the scan takes (it defers on others, which the parse path handles)."""
    ph = draw(st.sampled_from(["X", "X", "X", "s", "f", "t", "M", "i", "C"]))
    cats = ["ac2g", "fwdbwd"] if ph in "sft" else ["cpu_op", "kernel", "python_function", "Trace", "gpu_memcpy",
                                                  "user_annotation", "cuda_runtime", "ac2g"]
    e = {"ph": ph, "cat": draw(st.sampled_from(cats)), "name": draw(_plain_text),
         "pid": draw(st.one_of(st.integers(0, 2**40), st.sampled_from(["Spans", "p"]))),
         "tid": draw(st.integers(-5, 2**31)), "ts": draw(st.one_of(st.integers(0, 2**40), st.floats(0, 2.0**42))),
         "dur": draw(st.one_of(st.integers(0, 10**6), st.floats(0, 1e6))),
         "id": draw(st.one_of(st.integers(-5, 2**63 - 1), st.sampled_from(["12", "x", 1.5, True]))),
         "args": draw(st.dictionaries(_kineto_keys, st.one_of(_nested, st.sampled_from(["7", " 8", "x", 2**62, 1.5])),
                                      max_size=5))}
    if ph in "MiC":
        e["args"] = {"name": "n", "value": 1}
    return e


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(events=st.lists(_event(), min_size=1, max_size=8), style=st.sampled_from(["orjson", "indent", "ascii"]))
def test_the_scan_agrees_with_the_parse_on_generated_events(events, style, monkeypatch):
    """Generated Kineto-like events written compactly (orjson), indented (json) or with every non-ASCII
    character escaped (json ensure_ascii: \\uXXXX and surrogate pairs): the scan gives what the parse gives."""
    import json

    doc = {"traceEvents": events}
    text = (orjson.dumps(doc) if style == "orjson" else
            json.dumps(doc, indent=1).encode() if style == "indent" else json.dumps(doc).encode())
    _same(_scan_or_parse(text, True, monkeypatch), _scan_or_parse(text, False, monkeypatch), style)


@pytest.mark.parametrize("text", [
    b'[{"ph":"X","ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1}]',        # duplicate key
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"a":1,"a":2}}]',
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"a":{"b":1,"b":2}}}]',
    b'[{"ph":"X","cat":"c","name":"\\ud800","pid":1,"tid":1,"ts":1,"dur":1}]',             # lone surrogates
    b'[{"ph":"X","cat":"c","name":"\\udc00x","pid":1,"tid":1,"ts":1,"dur":1}]',
    b'[{"ph":"i","name":"m","pid":1,"tid":1,"s":"t","ts":1700000000123456.5}]',            # exact path too
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"v":1e999}}]',  # infinite
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"v":18446744073709551616}}]',
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1700000000123456.5,"dur":1}]',    # the exact path
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"args":{"v":01}}]',     # not JSON
    b'[{"ph":"X","cat":"c","name":"n\x01","pid":1,"tid":1,"ts":1,"dur":1}]',
    b'[{"ph":"X","cat":"c","name":"\xff","pid":1,"tid":1,"ts":1,"dur":1}]',
    b'[{"ph":"X","cat":"c","name":"n","pid":1.5,"tid":1,"ts":1,"dur":1}]',
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"other":1e999}]',  # orjson refuses it
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1,"other":' + b"9" * 400 + b'}]',  # too
    b'[{"ph":"X","cat":"c","name":"a long name \x01 with a raw control","pid":1,"tid":1,"ts":1,"dur":1}]',
    b'[{"ph":"Q","cat":"c"}]', b'[3]', b'[{"ph":"X"}]',
    b'[{"ph":"X","cat":"c","name":"n","pid":1,"tid":1,"ts":1,"dur":1},]',
])
def test_the_scan_leaves_what_it_does_not_take_as_is_to_the_parse(text):
    """Text the scan must not read (orjson reads it differently, refuses it, or the Python path decides):
    it gives None and adds nothing."""
    ev = extract.EventColumns()
    assert ev.add_text(text, 1, len(text), array=True) is None
    assert ev.n_events == 0 and ev.n_x == 0


def test_the_scan_reads_escapes_numbers_and_nested_args_as_orjson(monkeypatch):
    text = (b'[{"ph":"X","cat":"cpu_op","name":"a\\u00e9\\ud83d\\ude00\\/\\n","pid":1,"tid":-2,"ts":2.5,'
            b'"dur":1E3,"args":{"Input Dims":[[1,2],[]],"occupancy":{"x":-0,"y":[1.50,2e-7]},"Ev Idx":3,'
            b'"stream":"7","flops":1.9}}]')
    cols = _scan_or_parse(text, True, monkeypatch)
    _same(cols, _scan_or_parse(text, False, monkeypatch), "scan")
    x = cols[0]
    assert x["name"].tolist() == ["a\u00e9\U0001F600/\n"] and x["start_ts"].tolist() == [2500]
    assert x["duration_ns"].tolist() == [1_000_000] and x["input_shapes"].tolist() == ["[[1,2],[]]"]
    assert x["args"].tolist() == ['{"occupancy":{"x":0,"y":[1.5,2e-7]},"stream":"7"}']
    assert x["stream"].tolist() == [7] and x["flops"].tolist() == [1]


@pytest.mark.parametrize("special", ['"', "\\", "\n", "\x1f", "\u00e9", "\U0001F600", "\x7f", "~"])
def test_the_scan_finds_a_special_character_at_any_position_of_a_long_string(special, monkeypatch):
    """Strings are scanned 8 bytes at a time: a quote, a backslash, a control or a non-ASCII character at every
    position of strings up to 40 characters reads as the parse reads it."""
    import json

    events = [{"ph": "X", "cat": "cpu_op", "name": "a" * i + special + "b" * (40 - i), "pid": 1, "tid": 1, "ts": i,
               "dur": 1, "args": {"k" * (i % 11): "x" * i + special}} for i in range(41)]
    for text in (orjson.dumps({"traceEvents": events}), json.dumps({"traceEvents": events}).encode()):
        _same(_scan_or_parse(text, True, monkeypatch), _scan_or_parse(text, False, monkeypatch), repr(special))


def test_the_key_bits_of_python_and_c_are_the_same():
    """``extract._key_info`` builds the dict the C passes read with the K_* bits of ``csrc/common.h``."""
    import re
    from pathlib import Path

    header = (Path(extract.__file__).parent / "csrc" / "common.h").read_text()
    bits = {name: int(v, 16) for name, v in re.findall(r"#define K_(\w+) (0x[0-9A-Fa-f]+)", header)}
    assert bits.pop("INT_MASK") == 0x0F and len(extract.INT_ARGS) < 0x0F
    assert bits == {name: getattr(extract, f"_K_{name}") for name in bits} and len(bits) == 7


def test_python_frame_ids_are_int64_links_or_none_on_both_paths(monkeypatch):
    """A python_function row's "Python id" / "Python parent id" is a link only when it is an int64 (not null, a
    numeric string, a float, a bool or an int beyond int64), read alike from the text and from the dicts."""
    values = [b"5", b"null", b'"5"', b"5.0", b"true", b"9223372036854775808", b"-9223372036854775808", b"1e2",
              b"-3", b"[1]"]
    events = b",".join(b'{"ph":"X","cat":"python_function","name":"f","pid":1,"tid":1,"ts":%d,"dur":1,'
                       b'"args":{"Python id":%s,"Python parent id":%s}}' % (i, v, values[-1 - i])
                       for i, v in enumerate(values))
    text = b'[{"ph":"X","cat":"cpu_op","name":"op","pid":1,"tid":1,"ts":0,"dur":1},' + events + b"]"
    fast, slow = _scan_or_parse(text, True, monkeypatch), _scan_or_parse(text, False, monkeypatch)
    _same(fast, slow, "frames")
    no = extract.NO_FRAME_ID
    ids = [5, no, no, no, no, no, no, no, -3, no]
    assert fast[0]["frames"].tolist() == [[i + 1, ids[i], ids[-1 - i]] for i in range(len(values))]


_factorize_values = st.one_of(
    st.lists(st.integers(-2**63, 2**63 - 1), max_size=300).map(lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.sampled_from([0, 1, -1, 2**62, -2**63, 2**63 - 1, 7]), max_size=300).map(
        lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.one_of(st.none(), st.sampled_from(["a", "b", "", "\u00e9", "1"]), st.integers(-3, 3),
                       st.integers(2**64, 2**70)), max_size=300).map(lambda v: np.array(v + [None], dtype=object)[:-1]),
    st.lists(st.one_of(st.sampled_from(["x", "y"]), st.floats(allow_nan=True), st.booleans()), max_size=50).map(
        lambda v: np.array(v + [None], dtype=object)[:-1]),  # floats / bools: pandas' rules (the C pass declines)
)


@settings(max_examples=300, deadline=None)
@given(values=_factorize_values)
def test_the_compiled_factorize_gives_pandas_codes_and_uniques(values):
    """``events.factorize`` (int64 and str / int / None arrays in C) against ``pd.factorize``: codes in order of
    first appearance, missing values (None) coded -1, the same uniques and dtypes."""
    import pandas as pd

    from neuron_profiler.importers.kineto import events

    codes, uniq = events.factorize(values)
    want_codes, want_uniq = pd.factorize(values)
    assert codes.dtype == np.int64 and codes.tolist() == want_codes.tolist()
    assert uniq.dtype == (np.int64 if values.dtype == np.int64 else object)
    want = np.asarray(want_uniq, dtype=uniq.dtype).tolist()
    got_u = uniq.tolist()
    assert [type(u) for u in got_u] == [type(u) for u in want]
    assert len(got_u) == len(want) and all(a == b or (a != a and b != b) for a, b in zip(got_u, want))
    if values.dtype == object:  # the C pass declines exactly when a value is not an exact str / int / None
        accepted = compiled.factorize_obj(values.tolist()) is not None
        assert accepted == (set(map(type, values.tolist())) <= {str, int, type(None)})


@pytest.mark.parametrize("make", [
    lambda r: np.arange(20_000, dtype=np.int64) << 32,                      # equal low halves
    lambda r: np.repeat(np.arange(-5_000, 5_000, dtype=np.int64), 3),        # runs, negatives
    lambda r: r.integers(-2**63, 2**63 - 1, 30_000, dtype=np.int64),          # nearly all distinct
    lambda r: r.choice(np.array([-2**63, 2**63 - 1, 0, -1], dtype=np.int64), 10_000),
], ids=["high-bits", "runs", "random", "extremes"])
def test_the_compiled_int64_factorize_on_large_arrays(make):
    import pandas as pd

    from neuron_profiler.importers.kineto import events

    values = make(np.random.default_rng(3))
    codes, uniq = events.factorize(values)
    want_codes, want_uniq = pd.factorize(values)
    assert codes.tolist() == want_codes.tolist() and uniq.tolist() == want_uniq.tolist()
