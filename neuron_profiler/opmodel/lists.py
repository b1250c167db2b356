"""Ops over tensor lists: ``aten::cat`` / ``aten::stack`` and the ``aten::_foreach_*`` family (optimizer steps).

Rules (``N`` = elements of the op's first tensor list, summed over its tensors):

* ``cat`` / ``stack``: 0 FLOPs; every input is read once and the output (as many elements) written once:
  read = write = N elements.
* ``_foreach_<op>``: ``<op>`` applied elementwise to every tensor of the list: FLOPs =
  ``FLOPS_PER_ELEMENT[<op>]`` x N (unknown when ``<op>`` has no per-element count); bytes = every tensor
  argument read (each list, and a tensor operand such as the step of ``_foreach_mul_.Tensor``) + one list
  of N elements written (the in-place ops write their first list, the out-of-place ones a new list of the
  same shapes); ``_foreach_norm`` writes one value per tensor. Scalar and ScalarList operands move nothing.
* fused optimizers (``_fused_adamw_``, ``_fused_adam_``, ``_fused_sgd_``, ``_fused_adagrad_``; arguments
  params, grads, state lists..., state_steps): one pass over every element of the parameters: FLOPs =
  ``FUSED_FLOPS_PER_ELEMENT`` x N; bytes = every list read, and every list but the gradients and the
  (0-dim) step counters written back. Adam(W): decay p·(1 - lr·wd) 1, m = lerp(m, g) 2, v = b2·v + (1 -
  b2)·g² 3, sqrt(v)/c2 + eps 3, p -= s·m/denominator 3: 12 (``_fused_adam_`` adds the decay to the
  gradient instead: the same count); SGD with momentum: decay 2, buf = μ·buf + g 2, p -= lr·buf 2: 6;
  Adagrad: decay 2, sum += g² 2, p -= lr·g / (sqrt(sum) + eps) 4: 8.

Kineto writes a tensor list as ``[]`` with type "TensorList"; capture (``capture.tensor_lists``) writes its
shapes (``[[3, 4], [3, 4]]``) and, where it finds it, its elements' dtype in place of "TensorList". Bytes
are known only where every list's dtype is known; otherwise they are unknown with that reason (FLOPs stay
known: they do not depend on the dtype). A record with ``[]`` for a tensor list is unknown altogether
(:func:`~neuron_profiler.opmodel.shapes.unrecorded_tensor_list`, checked by the caller).
"""
from __future__ import annotations

from dataclasses import dataclass

from neuron_profiler.hardware import dtype_size_bytes

from .shapes import Tensor
from .traffic import FLOPS_PER_ELEMENT

__all__ = ["ListWork", "is_list_op", "list_op_work", "FUSED_FLOPS_PER_ELEMENT"]

_CAT = {"cat", "_cat", "stack", "concat", "concatenate", "hstack", "vstack"}
# per-element FLOPs of foreach ops whose base op is not an entry of FLOPS_PER_ELEMENT
_FOREACH_EXTRA = {"copy": 0, "maximum": 1, "minimum": 1, "norm": 2}
#: FLOPs per parameter element of the fused optimizer steps (see the module docstring)
FUSED_FLOPS_PER_ELEMENT = {"_fused_adamw": 12, "_fused_adam": 12, "_fused_sgd": 6, "_fused_adagrad": 8}


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
    return base in _CAT or base.startswith("_foreach_") or base in FUSED_FLOPS_PER_ELEMENT


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
    if base in FUSED_FLOPS_PER_ELEMENT:
        return _fused_work(base, tensors, dtype_note)
    op = base[len("_foreach_"):]
    per = FLOPS_PER_ELEMENT.get(op, _FOREACH_EXTRA.get(op))
    flops_note = "" if per is not None else f"{base}: no FLOP count per element for {op!r}"
    out = first.count if op == "norm" else n
    known = all(t.dtype_known for t in tensors)
    read = sum(t.nbytes for t in tensors)
    write = out * _elem(first)
    note = "; ".join(x for x in (flops_note, "" if known else dtype_note) if x)
    return ListWork((per or 0) * n, per is not None, read, write, known, out, note)


def _fused_work(base: str, tensors: list[Tensor], dtype_note: str) -> ListWork:
    """A fused optimizer step over ``tensors`` (params, grads, state lists..., 0-dim step counters)."""
    first = tensors[0]
    n = first.numel
    known = all(t.dtype_known for t in tensors)
    written = [t for i, t in enumerate(tensors) if i != 1 and t.shape != () and t.numel == n]
    return ListWork(FUSED_FLOPS_PER_ELEMENT[base] * n, True, sum(t.nbytes for t in tensors),
                    sum(t.nbytes for t in written), known, n, "" if known else dtype_note)
