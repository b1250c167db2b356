"""The Kineto importer's fast paths against their oracles: the args text against msgspec's encoding of the
same dict (and the stdlib's parse of it back), ``factorize`` against ``pd.factorize``, ``IdKeys`` against the
equality of the ids it keys."""
from __future__ import annotations

import json
import math

import msgspec
import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from neuron_profiler.importers.kineto.args import HOST_DROP, _args_text
from neuron_profiler.importers.kineto.events import factorize
from neuron_profiler.importers.kineto.extract import IdKeys

_KEYS = st.text(alphabet=st.sampled_from('ab%"\\\n é{}'), min_size=1, max_size=6)
_INTS = st.one_of(st.integers(min_value=-(2**64), max_value=2**64), st.none())


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(_KEYS, min_size=2, max_size=4, unique=True), data=st.data())
def test_args_text_of_int_or_null_dicts_is_what_the_encoder_writes(keys: list[str], data: st.DataObject) -> None:
    """Int / null values (the %-template's fast path, ints beyond 64 bits included) give the encoder's text of
    each dict, which the stdlib parses back to the dict."""
    rows = data.draw(st.lists(st.tuples(*[_INTS] * len(keys)), min_size=1, max_size=12))
    ga = [dict(zip(keys, r)) for r in rows]
    got = _args_text(ga, tuple(keys), HOST_DROP)
    assert got == [msgspec.json.encode(g).decode() for g in ga]
    assert [json.loads(t) for t in got] == ga


_ONE_KEY_VALUES = st.one_of(st.lists(st.one_of(st.text(max_size=3), _INTS), max_size=4), _INTS,
                            st.floats(allow_nan=False, allow_infinity=False), st.booleans(), st.text(max_size=4))


@settings(max_examples=200, deadline=None)
@given(key=_KEYS, values=st.lists(_ONE_KEY_VALUES, min_size=1, max_size=10))
def test_args_text_of_one_key_dicts_is_what_the_encoder_writes(key: str, values: list) -> None:
    """One kept key whose values are lists (a cpu_op's "Concrete Inputs"), floats, bools, big ints: each text is
    the encoder's text of that event's args without "External id", which the stdlib parses back to it."""
    ga = [{"External id": 1, key: v} for v in values]
    got = _args_text(ga, ("External id", key), HOST_DROP)
    assert got == [msgspec.json.encode({key: v}).decode() for v in values]
    for t, v in zip(got, values):
        back = json.loads(t)[key]
        assert back == v and type(back) is type(v) or isinstance(v, float) and math.isnan(v)


_ANY_VALUES = st.one_of(_INTS, st.floats(allow_nan=False), st.booleans(), st.text(alphabet='a[],{}"\\ ', max_size=4),
                      st.lists(st.one_of(_INTS, st.text(max_size=2)), max_size=3),
                      st.dictionaries(st.sampled_from(["x", "y,"]), _INTS, max_size=2))


@settings(max_examples=300, deadline=None)
@given(first=st.sampled_from([0, None, "a", 1.5]), rows=st.lists(st.tuples(_ANY_VALUES, _ANY_VALUES), max_size=8))
def test_args_text_of_two_kept_keys_is_what_the_encoder_writes(first: object, rows: list) -> None:
    """Two kept keys (a python frame's ids: the pairs' lines rewritten) with values whose text may hold the
    ``[``, ``,`` and ``]`` the rewrite replaces (strings, lists, objects): each text is the encoder's text."""
    keys = ("Python parent id", "Ev Idx", "Python id")
    ga = [dict(zip(keys, (a, 7, b))) for a, b in [(first, first), *rows]]
    got = _args_text(ga, keys, HOST_DROP)
    assert got == [msgspec.json.encode({"Python parent id": g["Python parent id"], "Python id": g["Python id"]})
                   .decode() for g in ga]


@settings(max_examples=200, deadline=None)
@given(n_kept=st.integers(1, 3), rows=st.lists(st.tuples(_ANY_VALUES, _ANY_VALUES, _ANY_VALUES), min_size=1,
                                                 max_size=6))
def test_args_text_of_few_kept_list_values_is_what_the_encoder_writes(n_kept: int, rows: list) -> None:
    """A cpu_op's args (lists; most keys dropped: the kept ones encoded a column at a time and joined, or the
    dicts copied without the dropped ones): each text is the encoder's text of the kept keys, in order."""
    kept = ["Concrete Inputs", "Input Strides", "a%s"][:n_kept]
    keys = ("External id", kept[0], "Input Dims", "Record function id", *kept[1:], "Input type", "Ev Idx")
    ga = [dict(zip(keys, (1, [r[0]], [2], 3, *r[1:n_kept], "t", 4))) for r in rows]
    got = _args_text(ga, keys, HOST_DROP)
    assert got == [msgspec.json.encode({k: g[k] for k in kept}).decode() for g in ga]


def test_args_text_drops_the_columns_it_stores_elsewhere() -> None:
    ga = [{"External id": 7, "Python id": 3, "Python parent id": 1}]
    assert _args_text(ga, tuple(ga[0]), HOST_DROP) == ['{"Python id":3,"Python parent id":1}']


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.integers(-5, 5), st.sampled_from(["a", "b", "5", ""])), max_size=90),
       as_int=st.booleans())
def test_factorize_matches_pandas(values: list, as_int: bool) -> None:
    arr = np.asarray([v for v in values if type(v) is int], dtype=np.int64) if as_int else \
        np.asarray(values + [None], dtype=object)[:-1]
    codes, uniq = factorize(arr)
    want_codes, want_uniq = pd.factorize(arr)
    assert codes.tolist() == want_codes.tolist()
    assert list(uniq) == list(want_uniq)


def test_factorize_above_the_dict_threshold_is_pandas_order_too() -> None:
    arr = np.random.default_rng(0).integers(0, 50, 10_000)
    codes, uniq = factorize(arr)
    want_codes, want_uniq = pd.factorize(arr)
    assert np.array_equal(codes, want_codes) and np.array_equal(uniq, want_uniq)


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.one_of(st.integers(-(2**63), 2**64), st.sampled_from(["Spans", "1", True, 1.0, None])),
                       max_size=30))
def test_id_keys_are_equal_exactly_when_the_ids_are(values: list) -> None:
    keys = IdKeys().keys(values).tolist()
    norm = [v if type(v) in (int, str) else repr(v) for v in values]
    for i in range(len(values)):
        for j in range(len(values)):
            same = norm[i] == norm[j] and type(norm[i]) is type(norm[j])
            assert (keys[i] == keys[j]) == same, (values[i], values[j])


_ARG_KEYS = st.sampled_from(["External id", "correlation", "Sequence number", "flops", "bytes", "device", "stream",
                             "Input Dims", "Input type", "Collective name", "Ev Idx", "Record function id", "grid",
                             "name", "\u00e9t\u00e9"])
_ARG_VALUES = st.one_of(st.none(), st.booleans(), st.integers(-(2**65), 2**65), st.floats(allow_nan=False),
                        st.text(max_size=4), st.sampled_from(["12", " 7 ", "x", "9" * 30, "-3"]),
                        st.lists(st.integers(-5, 5), max_size=3))


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(st.dictionaries(_ARG_KEYS, _ARG_VALUES, max_size=6), st.sampled_from([0, 1, 2, 3])),
                     min_size=1, max_size=14))
def test_args_columns_match_a_row_by_row_oracle(rows: list) -> None:
    """``args_columns`` (events grouped by key tuple, groups of mixed row classes split, shared texts) against
    the row-by-row definition: each row's args text is the encoder's text of its args without the keys its
    class drops ("" when none is left, none for a "Trace" row), its int columns ``int_column`` of the value."""
    from neuron_profiler.importers.kineto import args as ka
    from neuron_profiler.importers.kineto.events import int_column

    args, cls = [a for a, _c in rows], np.array([c for _a, c in rows], dtype=np.int8)
    got = ka.args_columns(args, cls)
    for i, (a, c) in enumerate(rows):
        drop = ka._DROP.get(c)
        kept = {k: v for k, v in a.items() if drop is not None and k not in drop}
        assert got["args"][i] == (msgspec.json.encode(kept).decode() if kept else ""), (a, c)
        for col, (key, default) in ka.INT_ARGS.items():
            want = int_column([a[key]], default)[0] if key in a else default
            assert got[col][i] == want, (col, a)
        for col, key in ka.JSON_ARGS.items():  # the value's text; "" when absent or null
            assert got[col][i] == ("" if a.get(key) is None else msgspec.json.encode(a[key]).decode()), (col, a)
    assert got["coll"].tolist() == [i for i, (a, _c) in enumerate(rows) if "Collective name" in a]


def _groups_oracle(args: list) -> list:
    """(key tuple, rows) per distinct key tuple, in order of first appearance."""
    out: dict = {}
    for i, a in enumerate(args):
        out.setdefault(tuple(a), []).append(i)
    return list(out.items())


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.sampled_from([(), ("a",), ("b",), ("a", "b"), ("b", "a")]), min_size=1, max_size=30))
def test_groups_are_the_rows_of_each_key_tuple(keys: list) -> None:
    """``_groups``: each distinct key tuple (order counts) once, in order of first appearance, with its rows
    ascending and their very dicts."""
    from neuron_profiler.importers.kineto.args import _groups

    args = [dict.fromkeys(k, i) for i, k in enumerate(keys)]
    got = _groups(args)
    assert [(k, r.tolist()) for k, r, _ga in got] == _groups_oracle(args)
    assert all(all(g is args[i] for g, i in zip(ga, r.tolist())) for _k, r, ga in got)


def test_groups_of_more_rows_than_int16_holds() -> None:
    """Group ids are first rows: above 2**15 rows they are sorted as int64 (no int16 wrap merging groups)."""
    from neuron_profiler.importers.kineto.args import _groups

    keys = [("a",)] * 2**15 + [("b",), ("a",)] + [("c",)] * 3 + [("b",)] * 2**16 + [("d",)]
    args = [dict.fromkeys(k, 0) for k in keys]
    assert [(k, r.tolist()) for k, r, _ga in _groups(args)] == _groups_oracle(args)


_FRAME_VALUES = st.one_of(st.integers(-(2**64), 2**64), st.sampled_from([-(2**63), 2**63 - 1, 2**63, True, False]),
                          st.none(), st.floats(allow_nan=False), st.text(max_size=3))


@settings(max_examples=300, deadline=None)
@given(values=st.lists(_FRAME_VALUES, max_size=20))
def test_frame_ids_in_one_pass_are_the_per_value_ids(values: list) -> None:
    """``_frame_ids`` (numpy when every value is an int) gives each value's ``_frame_id``: the int when it is
    an int64 above ``NO_FRAME_ID``, else ``NO_FRAME_ID`` (bools, floats, strings, None, ints beyond int64)."""
    from neuron_profiler.importers.kineto.extract import NO_FRAME_ID, _frame_id, _frame_ids

    want = [v if type(v) is int and NO_FRAME_ID < v < 2**63 else NO_FRAME_ID for v in values]
    assert _frame_ids(values).tolist() == want == [_frame_id(v) for v in values]


_PHASES = st.sampled_from(["X", "s", "f", "t", "M", "i", "I", "C"])


@settings(max_examples=300, deadline=None)
@given(phases=st.lists(st.tuples(_PHASES, st.sampled_from([0, 1.5, 2.0**43 + 0.5, None])), max_size=40))
def test_split_by_sorted_phase_codes_is_the_per_event_split(phases: list) -> None:
    """The fast ``split_events`` (events gathered by a stable sort of their phase codes) against the per-event
    path: the same complete-event columns and the very same events in each group, in file order, and the same
    need for exact timestamps (a float ts >= 2^43 us on an event whose ts is read)."""
    from neuron_profiler.importers.kineto import events as ke
    from neuron_profiler.importers.kineto.decode import Event

    evs = [Event(ph=ph, cat="cpu_op", name=f"e{i}", pid=1, tid=2, ts=ts if ph != "X" or ts is not None else 3,
                 dur=1, id=i, args={"External id": i}) for i, (ph, ts) in enumerate(phases)]
    fast, slow = ke.split_events(evs), ke._split_slow(evs)
    assert [list(c) for c in fast.x_cols] == [list(c) for c in slow.x_cols]
    for group in ("flows", "meta", "instants", "counters"):
        f, w = getattr(fast, group), getattr(slow, group)
        assert len(f) == len(w) and all(a is b for a, b in zip(f, w)), group
    assert fast.skipped == slow.skipped
    # a metadata event's ts is never read: the per-event path ignores it, the fast one may count it (both then
    # give the same columns, re-read or not)
    big_meta = any(ph == "M" and ts == 2.0**43 + 0.5 for ph, ts in phases)
    assert fast.big_float_ts == slow.big_float_ts or (big_meta and fast.big_float_ts)


def test_thread_order_of_rows_in_host_table_order_is_the_full_lexsort() -> None:
    """``links._thread_order``: rows already by start then longest first (the host table) are sorted by thread
    alone (a radix sort of 16-bit codes, or a stable sort of wider ones); any other order by the full lexsort."""
    from neuron_profiler.importers.kineto.links import _thread_order

    rng = np.random.default_rng(11)
    for i in range(600):
        n = int(rng.integers(1, 120))
        thread = rng.integers(0, [1, 4, 70_000][i % 3], n).astype(np.int64)
        start, dur = rng.integers(0, 30, n).astype(np.int64), rng.integers(0, 6, n).astype(np.int64)
        if i % 2:  # the host table's order: ties of start and duration stay in row order
            o = np.lexsort((-dur, start))
            thread, start, dur = thread[o], start[o], dur[o]
        np.testing.assert_array_equal(_thread_order(thread, start, dur), np.lexsort((-dur, start, thread)))


@settings(max_examples=100, deadline=None)
@given(kinds=st.lists(st.booleans(), min_size=1, max_size=8))
def test_fields_are_the_structs_fields_whatever_struct_types_mix(kinds: list) -> None:
    """``events.fields`` (the structs' tuples in one flat list, a strided slice per field) gives each struct's
    own field, for ``Event`` lists, ``ExportEvent`` lists (3 more fields each) and lists mixing the two."""
    from neuron_profiler.importers.kineto.decode import Event, ExportEvent
    from neuron_profiler.importers.kineto.events import fields

    events = [(ExportEvent if export else Event)(ph="X", cat=f"c{i}", name=i, ts=i * 1.5, dur=None, args={"i": i})
              for i, export in enumerate(kinds)]
    names = ("ph", "cat", "name", "pid", "ts", "dur", "id", "args")
    got = fields(events, *names)
    assert got == [[getattr(e, n) for e in events] for n in names]
