"""Tensor-list arguments of host ops (``aten::cat``, ``aten::_foreach_*``, ``aten::_fused_adamw_``): their shapes
and element dtypes, which torch.profiler's ``record_shapes`` leaves out.

Kineto writes a TensorList argument as ``[]`` in ``Input Dims`` and ``"TensorList"`` in ``Input type``. Its
shapes are in the event's structured input shapes (``_KinetoEvent.structured_input_shapes()``, recorded with
``record_shapes`` on CPU, meta and fake tensors alike); they are written into ``input_shapes`` as a list of
shapes (``[[[3, 4], [5, 4]], []]``), the form the op model reads.

The element dtype is recorded nowhere by Kineto. It is taken, in this order, from

1. the dry-run mode's record of the call (:mod:`neuron_profiler.capture.dryrun` records the dtypes of the
   tensor lists passed to list ops while it is active), keyed by the list's shapes;
2. the op's own children: on CPU, meta and fake tensors a ``_foreach_*`` op runs one per-tensor op per list
   element (``aten::add_`` of ``[[3, 4], []]``, ``["float", "Scalar"]``), whose dtype is the list's;

and is written in place of "TensorList" (``"c10::BFloat16"``). A list whose dtype is found nowhere keeps
"TensorList": the op model then knows its FLOPs, not its bytes, and says so.
"""
from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

from neuron_profiler.hardware import normalize_dtype

__all__ = ["list_shapes", "type_tensor_lists", "shapes_key", "ListDtypes", "EMPTY_LIST"]

#: dtypes recorded per tensor list, keyed by :func:`shapes_key` of the list (first recorded first)
ListDtypes = dict[tuple, collections.deque]


def _is_shape(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in x)


def shapes_key(shapes: Iterable[Any]) -> tuple:
    """Hashable key of a list of shapes (``[[3, 4], [5]]`` -> ``((3, 4), (5,))``)."""
    return tuple(tuple(int(d) for d in s) for s in shapes)


#: the type written for a tensor list recorded as empty (Kineto's "TensorList" with ``[]`` means "not recorded")
EMPTY_LIST = "TensorList(empty)"


def list_shapes(event: Any, shapes: list, dtypes: list) -> tuple[list, list]:
    """(shapes, dtypes): Kineto's ``Input Dims`` with each TensorList argument's shapes filled in from the
    event's structured input shapes, and an empty list's type written as :data:`EMPTY_LIST`; unchanged where
    the structured shapes are not recorded."""
    try:
        structured = event.structured_input_shapes()
    except (RuntimeError, TypeError, ValueError):  # not recorded for this event: keep what Kineto wrote
        return shapes, dtypes
    out, types = list(shapes), list(dtypes)
    for i, dt in enumerate(dtypes):
        if dt != "TensorList" or i >= len(structured) or i >= len(out):
            continue
        lst = structured[i]
        if isinstance(lst, list) and not lst:
            types[i] = EMPTY_LIST
        elif isinstance(lst, list) and all(_is_shape(s) for s in lst):
            out[i] = [list(s) for s in lst]
    return out, types


def _child_dtype(ops: list[dict[str, Any]], at: int, wanted: set[tuple]) -> str | None:
    """Dtype of the first op nested in ``ops[at]`` (same thread, inside its span) with a tensor argument of
    one of the ``wanted`` shapes."""
    op = ops[at]
    end, tid = op["start_ts"] + op["duration_ns"], op["tid"]
    for j in range(at + 1, len(ops)):
        c = ops[j]
        if c["start_ts"] > end:
            break
        if c["tid"] != tid or c["start_ts"] + c["duration_ns"] > end:
            continue
        for shp, dt in zip(c["op_shapes"], c["op_dtypes"]):
            if isinstance(dt, str) and normalize_dtype(dt) and _is_shape(shp) and tuple(shp) in wanted:
                return dt
    return None


def type_tensor_lists(ops: list[dict[str, Any]], recorded: ListDtypes | None = None) -> None:
    """Replace "TensorList" in each op's ``op_dtypes`` by the list's element dtype where it is known (``ops``
    sorted by start; ``recorded``: dtypes from the dry-run mode, consumed in call order where calls of the
    same shapes had different dtypes; a fake-tensor run records one call as nested ops of the same name)."""
    recorded = recorded or {}
    for i, op in enumerate(ops):
        dts = op["op_dtypes"]
        if "TensorList" not in dts:
            continue
        for a, dt in enumerate(dts):
            shp = op["op_shapes"][a] if a < len(op["op_shapes"]) else None
            if dt != "TensorList" or not isinstance(shp, list) or not shp or not all(_is_shape(s) for s in shp):
                continue
            key = shapes_key(shp)
            queue = recorded.get(key)
            found = None
            if queue:  # one dtype for every call of these shapes: no need to pair calls with records
                found = queue[0] if len(set(queue)) == 1 else queue.popleft()
            if found is None:
                found = _child_dtype(ops, i, {tuple(s) for s in shp})
            if found:
                dts[a] = found
