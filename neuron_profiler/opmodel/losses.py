"""Losses that pick one input element per target (``nll_loss`` and its forward / 2d / backward ops), torch-free.

Rules (N = target elements; ``self`` is [N, C], [C] or [N, C, d...]):

* ``nll_loss_forward(self, target, weight?, reduction, ignore_index)`` (and ``nll_loss``, ``nll_loss_nd``,
  ``nll_loss2d_forward``): N FLOPs (one add of -self[i, target[i]] x weight per target); reads the targets,
  the N picked elements of ``self`` (not all N x C) and N weights when a weight is given; writes the loss (N
  elements with ``reduction`` 0 = none, else 1) and total_weight (1). ``reduction`` is an int in Concrete
  Inputs: without it the written size is unknown.
* ``nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)``: N
  FLOPs; reads grad_output, the targets, total_weight (and N weights), writes the N picked elements of
  grad_input. Zeroing grad_input is an op of its own (``aten::zero_``), priced on its own.
"""
from __future__ import annotations

from neuron_profiler.hardware import dtype_size_bytes

from .shapes import Tensor
from .traffic import Traffic

__all__ = ["LOSS_OPS", "loss_work"]

LOSS_OPS = ("nll_loss", "nll_loss_nd", "nll_loss_forward", "nll_loss2d_forward", "nll_loss2d", "nll_loss_backward",
            "nll_loss2d_backward")


def _size(t: Tensor) -> int:
    return dtype_size_bytes(t.dtype) or 4


def loss_work(base: str, ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, Traffic]:
    """(FLOPs, FLOPs known, traffic) of one of :data:`LOSS_OPS` from its positional arguments."""
    backward = base.endswith("_backward")
    off = 1 if backward else 0  # backward: (grad_output, self, target, weight, reduction, ignore_index, tw)
    x = ts[off] if len(ts) > off else None
    target = ts[off + 1] if len(ts) > off + 1 else None
    weight = ts[off + 2] if len(ts) > off + 2 else None
    if x is None or target is None:
        return 0, False, Traffic(0, 0, False, f"{base}: input and target shapes not recorded")
    n = target.numel
    picked = n * _size(x) + (n * _size(weight) if weight is not None else 0)
    if backward:
        go, tw = ts[0], ts[6] if len(ts) > 6 else None
        weights = n * _size(weight) if weight is not None else 0
        read = target.nbytes + weights + sum(t.nbytes for t in (go, tw) if t is not None)
        return n, True, Traffic(read, n * _size(x))
    reduction = concrete[off + 3] if concrete and len(concrete) > off + 3 else ""
    if str(reduction).strip() not in ("0", "1", "2"):
        return n, True, Traffic(0, 0, False, f"{base}: reduction not recorded (no Concrete Inputs), so the "
                                             "size of the loss it writes is unknown")
    out = n if str(reduction).strip() == "0" else 1
    return n, True, Traffic(target.nbytes + picked, (out + 1) * _size(x))
