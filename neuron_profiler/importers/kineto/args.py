"""The columns read from the args dicts of complete events (``args_columns``), and the JSON text helpers of the
importer.

What is read: the ``INT_ARGS`` int64 columns, the ``JSON_ARGS`` text columns, ``args`` (the JSON text without the
keys the row class drops, "" when nothing is left) and the rows whose args hold collective metadata.
"""
from __future__ import annotations

from itertools import chain, compress, count, islice, repeat
from operator import is_, is_not, itemgetter
from typing import Any

import msgspec
import numpy as np

from neuron_profiler.importers.kineto.events import DEVICE_ANNOTATION_CATEGORIES, DEVICE_CATEGORIES, int_column

_ENCODER = msgspec.json.Encoder()
#: what an args value may fail to encode with: a str holding a lone surrogate (not from ``decode``, which
#: replaces them), a type JSON has no form for
_ENCODE_ERRORS = (TypeError, ValueError, msgspec.EncodeError)


def dumps(v: Any) -> str:
    """Compact JSON text of ``v`` (msgspec's encoding: floats in their shortest round-trip form)."""
    return _ENCODER.encode(v).decode()


def safe_dumps(v: Any) -> str:
    """``dumps(v)``, or "" when ``v`` cannot be encoded."""
    try:
        return dumps(v)
    except _ENCODE_ERRORS:
        return ""


def safe_dumps_all(values: Any) -> list[str]:
    """``[safe_dumps(v) for v in values]`` in one call: msgspec encodes them as JSON lines (a JSON text holds
    no raw newline), one decode and one split give the texts. The args of events with distinct args are
    encoded so, ~20k per 200k events."""
    values = values if isinstance(values, list) else list(values)
    try:
        return _ENCODER.encode_lines(values).decode().split("\n")[:-1]
    except _ENCODE_ERRORS:  # one value cannot be encoded: "" for it, as safe_dumps
        return [safe_dumps(v) for v in values]


#: row classes of complete events
HOST, DEVICE, ANNOTATION, TRACE = 0, 1, 2, 3
CLASS_OF_CAT = {**{c: DEVICE for c in DEVICE_CATEGORIES}, **{c: ANNOTATION for c in DEVICE_ANNOTATION_CATEGORIES},
          "Trace": TRACE}
MISSING_STREAM = -(2**62)  # args.stream absent (an explicit -1 is kept)

#: args stored in their own columns, or Kineto-internal per-event ids ("Ev Idx" = position in Kineto's event
#: list, "Record function id"): left out of the ``args`` JSON so that equal args give equal (interned) strings
HOST_DROP = frozenset({"External id", "correlation", "Sequence number", "Input Dims", "Input type", "flops",
                       "Ev Idx", "Record function id"})
INSTR_DROP = frozenset({"External id", "correlation", "Ev Idx"})
_DROP = {HOST: HOST_DROP, ANNOTATION: HOST_DROP, DEVICE: INSTR_DROP}
EMPTY_ARGS: dict[str, Any] = {}
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1  # ints written by the %-template (others by the encoder)


def objects(values: list[Any]) -> np.ndarray:
    """Object array holding the very objects of ``values`` (no conversion to a numpy string dtype)."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _empty_texts(n: int) -> np.ndarray:
    """An object array of ``n`` "" (``np.full(n, "", dtype=object)`` casts a numpy string array, 3x slower)."""
    arr = np.empty(n, dtype=object)
    arr.fill("")
    return arr


def _json_or_empty(values: list[Any]) -> np.ndarray:
    """The JSON text of each value ("" for None) as an object array."""
    if type(None) not in set(map(type, values)):  # not ``None in values``: a compare with None per value
        return objects(safe_dumps_all(values))
    keep = np.fromiter(map(is_not, values, repeat(None)), dtype=bool, count=len(values))
    out = _empty_texts(len(values))
    out[keep] = safe_dumps_all(list(compress(values, keep.tolist())))
    return out


#: int columns read from args: column -> (args key, default)
INT_ARGS = {"corr": ("correlation", -1), "ext": ("External id", -1), "seq": ("Sequence number", -1),
             "flops": ("flops", 0), "bytes": ("bytes", 0), "device": ("device", -1),
             "stream": ("stream", MISSING_STREAM)}
_INT_DEFAULTS = np.array([[d] for _k, d in INT_ARGS.values()], dtype=np.int64)
#: JSON text columns read from args: column -> args key
JSON_ARGS = {"input_shapes": "Input Dims", "input_dtypes": "Input type"}


def _args_text(ga: list[dict[str, Any]], keys: tuple[str, ...], drop: frozenset[str]) -> list[str] | None:
    """The args JSON of a group of events sharing the key tuple ``keys`` (None: all empty)."""
    kept = tuple(k for k in keys if k not in drop)
    if not kept:
        return None
    if len(kept) == 1:
        vals = list(map(itemgetter(kept[0]), ga))
        if set(map(type, vals)) <= {int, str}:  # not bool/float: 1 == True == 1.0 would share a text
            enc = {v: safe_dumps({kept[0]: v}) for v in set(vals)}
            return list(map(enc.__getitem__, vals))
        return _one_key_texts(kept[0], vals)
    if not set(map(type, ga[0].values())) <= _SCALARS:  # e.g. a kernel's grid list: no text is shared and the
        return _texts_without(ga, keys, drop)            # int template does not apply (any path: the same texts)
    if len(kept) == 2:  # a python frame's ids: no text is shared, the pairs' lines become the texts
        texts = _pair_texts(kept, ga)
        if texts is not None:
            return texts
    vals = list(map(itemgetter(*kept), ga))
    try:
        uniq = dict.fromkeys(vals)  # TypeError: a list or dict value (e.g. a kernel's grid)
    except TypeError:
        uniq = None
    if uniq is not None and len(uniq) * 2 <= len(vals):
        # equal value tuples share one text, unless 1 / 1.0 / True could be confused (they hash alike: the types
        # of every value, not only of the kept tuples, since (False,) and (0,) are one key)
        types = set(map(type, chain.from_iterable(vals)))
        if bool not in types and not (int in types and float in types):
            enc = {u: safe_dumps(dict(zip(kept, u))) for u in uniq}
            return list(map(enc.__getitem__, vals))
    texts = _int_args_text(kept, vals)
    return texts if texts is not None else _texts_without(ga, keys, drop)


_SCALARS = frozenset({int, str, float, bool, type(None)})


def _texts_without(ga: list[dict[str, Any]], keys: tuple[str, ...], drop: frozenset[str]) -> list[str]:
    """The JSON texts of the args dicts of one key tuple ``keys`` without the keys in ``drop``: the dicts
    themselves encoded when nothing is dropped; else, when fewer keys are kept than dropped (a cpu_op keeps 2
    of 7), the kept values encoded a column at a time and joined (``_column_texts``); else copies without the
    dropped keys encoded (a copy and a delete per dropped key cost half of building the dict again)."""
    dropped = [k for k in keys if k in drop]
    if not dropped:
        return safe_dumps_all(ga)
    if len(dropped) > len(keys) - len(dropped):
        texts = _column_texts(tuple(k for k in keys if k not in drop), ga)
        if texts is not None:
            return texts
    copies = list(map(dict.copy, ga))
    for k in dropped:
        list(map(dict.pop, copies, repeat(k)))
    return safe_dumps_all(copies)


def _column_texts(kept: tuple[str, ...], ga: list[dict[str, Any]]) -> list[str] | None:
    """The texts of the dicts ``ga`` reduced to the keys ``kept`` (in that order): each key's values encoded as
    JSON lines in one call, the texts joined from the fixed key parts and one line of each column. None when
    a value cannot be encoded (``safe_dumps`` decides per dict)."""
    parts: list[Any] = []
    try:
        for i, k in enumerate(kept):
            parts.append(repeat(("," if i else "{") + dumps(k) + ":"))
            parts.append(_ENCODER.encode_lines(list(map(itemgetter(k), ga))).decode().split("\n"))
    except _ENCODE_ERRORS:
        return None
    parts.append(repeat("}"))
    return list(islice(map("".join, zip(*parts)), len(ga)))  # each column's split ends with an empty line


def _one_key_texts(key: str, vals: list[Any]) -> list[str]:
    """``[safe_dumps({key: v}) for v in vals]`` in C-level passes: the values encoded as JSON lines in one call
    (lists such as a cpu_op's "Concrete Inputs" cannot be shared through a dict), each inside the object's
    fixed text: one ``str.replace`` of the line breaks (JSON text holds none of its own) wraps every line."""
    head = "{" + dumps(key) + ":"
    try:
        body = _ENCODER.encode_lines(vals).decode()
        return (head + body[:-1].replace("\n", "}\n" + head) + "}").split("\n") if body else []
    except _ENCODE_ERRORS:  # one value cannot be encoded: "" for it, as safe_dumps
        return [safe_dumps({key: v}) for v in vals]


def _int_args_text(kept: tuple[str, ...], vals: list[tuple[Any, ...]]) -> list[str] | None:
    """The args texts of value tuples that are ints (and a few None: a root frame's ``Python parent id``), as
    the encoder writes them, through one %-template; None when other values are present."""
    if not set(map(type, vals[0])) <= _INT_NONE:  # the first tuple says it: no flattening of the group
        return None
    flat = list(chain.from_iterable(vals))
    types = set(map(type, flat))
    if not types <= _INT_NONE or int not in types:
        return None
    nulls: list[int] = []
    if type(None) in types:  # the rows holding a None (zeroed in ``flat`` for the range check)
        at = list(compress(count(), map(is_, flat, repeat(None))))
        for i in at:
            flat[i] = 0
        nulls = sorted({i // len(kept) for i in at})
    if not _I64_MIN <= min(flat) <= max(flat) <= _I64_MAX:
        return None
    tmpl = "{" + ",".join(f"{dumps(k).replace('%', '%%')}:%d" for k in kept) + "}"
    if not nulls:
        return list(map(tmpl.__mod__, vals))
    zeroed = list(vals)
    for i in nulls:
        zeroed[i] = (0,) * len(kept)
    out = list(map(tmpl.__mod__, zeroed))
    for i in nulls:  # rows holding a None: encoded one by one
        out[i] = safe_dumps(dict(zip(kept, vals[i])))
    return out


_INT_NONE = frozenset({int, type(None)})


def _pair_texts(kept: tuple[str, ...], ga: list[dict[str, Any]]) -> list[str] | None:
    """The texts of the dicts ``ga`` reduced to two keys (a python frame's ids) without a call per row: the
    encoder writes each pair of values as a line ``[a,b]`` (from a ``zip`` of the two keys' values, whose one
    tuple is reused row after row), three replaces over all lines turn them into ``{"k0":a,"k1":b}``, one split
    cuts them. That holds when no value's text holds a ``[``, ``,`` or ``]`` (ints, floats, null, most strings),
    which the counts of those in the lines tell: one of each per line. None otherwise (or when the keys hold
    one, or a value cannot be encoded)."""
    k0, k1 = dumps(kept[0]), dumps(kept[1])
    if any(c in k0 + k1 for c in "[],"):
        return None
    try:
        body = _ENCODER.encode_lines(zip(map(itemgetter(kept[0]), ga), map(itemgetter(kept[1]), ga))).decode()
    except (*_ENCODE_ERRORS, OverflowError):  # e.g. an int beyond uint64: the caller's path decides
        return None
    n = len(ga)
    if not body.count("[") == body.count(",") == body.count("]") == n:
        return None
    return body.replace("[", "{" + k0 + ":").replace(",", "," + k1 + ":").replace("]", "}").split("\n")[:-1]


def _groups(args: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], np.ndarray, list[dict[str, Any]]]]:
    """(key tuple, rows, args dicts) per distinct key tuple of ``args``, rows ascending: one C-level pass
    gives every event its group id (``dict.setdefault``: the row where the key tuple first appears, so the ids
    ascend in the dict's order), numpy sorts the rows by group, and one gather puts the dicts in that order."""
    index: dict[tuple[str, ...], int] = {}
    gid = np.fromiter(map(index.setdefault, map(tuple, args), count()), dtype=np.int64, count=len(args))
    if len(index) == 1:
        return [(next(iter(index)), np.arange(len(args), dtype=np.int64), args)]
    # int16 ids when they fit: numpy's stable sort of 16-bit ints is a radix sort (timsort for int64)
    order = np.argsort(gid.astype(np.int16) if len(args) <= 2**15 else gid, kind="stable")
    ordered = list(map(args.__getitem__, order.tolist()))
    sizes = np.bincount(gid)
    ends = sizes[sizes > 0].cumsum().tolist()
    return [(keys, order[a:b], ordered[a:b]) for keys, a, b in zip(index, [0, *ends], ends)]


def args_columns(args: list[dict[str, Any]], cls: np.ndarray) -> dict[str, Any]:
    """Columns read from the args dicts of complete events of row classes ``cls``: the ``INT_ARGS`` int64
    columns, the ``JSON_ARGS`` text columns, ``args`` (JSON without the keys the row class drops, "" when
    nothing is left) and ``coll`` (rows whose args hold collective metadata).

    Events are grouped by key tuple, so a key is only looked up in the groups that have it, and a group with
    one kept int/str key is encoded once per distinct value."""
    n = len(args)
    ints = np.empty((len(INT_ARGS), n), dtype=np.int64)  # the int columns' defaults in one call: a row each
    ints[:] = _INT_DEFAULTS
    out: dict[str, Any] = dict(zip(INT_ARGS, ints))
    for c in (*JSON_ARGS, "args"):
        out[c] = _empty_texts(n)
    coll: list[np.ndarray] = []
    groups = _groups(args)
    for keys, rows, ga in groups:
        if not keys:
            continue
        present = set(keys)
        for c, (k, d) in INT_ARGS.items():
            if k in present:
                out[c][rows] = int_column(list(map(itemgetter(k), ga)), d)
        for c, k in JSON_ARGS.items():
            if k in present:
                out[c][rows] = _json_or_empty(list(map(itemgetter(k), ga)))
        if "Collective name" in present:
            coll.append(rows)
        g_cls = cls[rows]
        lo, hi = int(g_cls.min()), int(g_cls.max())
        for klass in ([lo] if lo == hi else np.unique(g_cls).tolist()):  # a group is usually of one class
            drop = _DROP.get(klass)
            if drop is None:
                continue
            if lo == hi:
                texts, sel = _args_text(ga, keys, drop), slice(None)
            else:
                mask = g_cls == klass
                texts, sel = _args_text([a for a, s in zip(ga, mask.tolist()) if s], keys, drop), mask
            if texts is not None:
                out["args"][rows[sel]] = objects(texts)
    out["coll"] = np.sort(np.concatenate(coll)) if coll else np.zeros(0, np.int64)
    return out
