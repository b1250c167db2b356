"""Ops over tensor lists: ``aten::cat`` / ``aten::stack`` and the ``aten::_foreach_*`` family (optimizer steps).

Rules (``N`` = elements of the op's first tensor list, summed over its tensors):

* ``cat`` / ``stack``: 0 FLOPs; every input is read once and the output (as many elements) written once:
  read = write = N elements.
* ``_foreach_<op>``: ``<op>`` applied elementwise to every tensor of the list: FLOPs =
  ``FLOPS_PER_ELEMENT[<op>]`` x N (unknown when ``<op>`` has no per-element count); bytes = every tensor
  argument read (each list, and a tensor operand such as the step of ``_foreach_mul_.Tensor``) + one list
  of N elements written (the in-place ops write their first list, the out-of-place ones a new list of the
  same shapes); ``_foreach_norm`` writes one value per tensor. Scalar and ScalarList operands move nothing.

Kineto records a tensor list's shapes (``[[3, 4], [3, 4]]``) but writes its type as "TensorList", not its
elements' dtype, so bytes are known only where every list's dtype is known; otherwise they are unknown
with that reason (FLOPs stay known: they do not depend on the dtype). Older Kineto writes ``[]`` for a
tensor list: such a record is unknown altogether (:func:`~neuron_profiler.opmodel.shapes
.unrecorded_tensor_list`, checked by the caller).
"""
from __future__ import annotations

from dataclasses import dataclass

from neuron_profiler.hardware import dtype_size_bytes

from .shapes import Tensor
from .traffic import FLOPS_PER_ELEMENT

__all__ = ["ListWork", "is_list_op", "list_op_work"]

_CAT = {"cat", "_cat", "stack", "concat", "concatenate", "hstack", "vstack"}
# per-element FLOPs of foreach ops whose base op is not an entry of FLOPS_PER_ELEMENT
_FOREACH_EXTRA = {"copy": 0, "maximum": 1, "minimum": 1, "norm": 2}


@dataclass(frozen=True)
class ListWork:
    """FLOPs and bytes of a tensor-list op; ``*_known`` False and ``note`` say why when not derivable."""

    flops: int
    flops_known: bool
    read_bytes: int
    write_bytes: int
    bytes_known: bool
    out_elems: int
    note: str = ""


def is_list_op(base: str) -> bool:
    """True for the ops this module prices (``base``: aten name without namespace, overload and "_")."""
    return base in _CAT or base.startswith("_foreach_")


def _elem(t: Tensor) -> int:
    return dtype_size_bytes(t.dtype) or 4


def list_op_work(base: str, tensors: list[Tensor]) -> ListWork:
    """Work of ``cat`` / ``stack`` / ``_foreach_*`` from its tensor arguments (lists summed into one)."""
    first = tensors[0]
    n = first.numel
    dtype_note = (f"{base}: the element dtype of its tensor list is not recorded (Kineto writes 'TensorList'),"
                  " so its bytes are unknown")
    if base in _CAT:
        size = _elem(first)
        return ListWork(0, True, n * size, n * size, first.dtype_known, n, "" if first.dtype_known else dtype_note)
    op = base[len("_foreach_"):]
    per = FLOPS_PER_ELEMENT.get(op, _FOREACH_EXTRA.get(op))
    flops_note = "" if per is not None else f"{base}: no FLOP count per element for {op!r}"
    out = first.count if op == "norm" else n
    known = all(t.dtype_known for t in tensors)
    read = sum(t.nbytes for t in tensors)
    write = out * _elem(first)
    note = "; ".join(x for x in (flops_note, "" if known else dtype_note) if x)
    return ListWork((per or 0) * n, per is not None, read, write, known, out, note)
