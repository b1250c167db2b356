"""Pooling ops (``max_pool{1,2,3}d``, ``avg_pool{1,2,3}d``, their adaptive forms and backward), torch-free.

The window (``kernel_size``, ``stride``, ``padding``, ``dilation``, ``ceil_mode``) is a list of ints that
Kineto records in "Concrete Inputs", not in the shapes (``Input Dims`` holds ``[]`` for it). Rules:

* output size per spatial dim: ``floor_or_ceil((L + 2p - d(k - 1) - 1) / s) + 1`` (``stride`` ``[]`` means
  ``kernel_size``; ``ceil_mode`` drops a last window that would start in the padding), as aten computes it;
* FLOPs per output element: max pooling k - 1 compares, average pooling k - 1 adds and one divide = k
  (k = elements of a full window); adaptive pooling sums its real windows (start ``floor(i L / O)``, end
  ``ceil((i + 1) L / O)``), so its FLOPs are exact: the window elements (avg) or those minus the outputs (max);
* bytes: the input read once, the output written (max pooling ``_with_indices`` / adaptive max also writes
  its int64 indices);
* backward: reads grad_output (and the indices of max pooling), writes the whole grad_input (it is zeroed
  and accumulated); one add per grad_output element times its window size (avg: k; max: 1; adaptive avg:
  the window elements, from the two recorded shapes).

Without Concrete Inputs the window is unknown, and so are FLOPs (and the output bytes of the forward ops);
the note says so.
"""
from __future__ import annotations

import json
import math

from neuron_profiler.hardware import dtype_size_bytes

from .shapes import Tensor, concrete_flag
from .traffic import Traffic

__all__ = ["is_pool_op", "pool_work"]

_NO_WINDOW = "pooling window (kernel_size, stride, padding) not recorded: no Concrete Inputs"


def _nsp(base: str) -> int:
    for n in (1, 2, 3):
        if f"pool{n}d" in base:
            return n
    return 0


def is_pool_op(base: str) -> bool:
    """True for the pooling ops this module prices (aten base name without namespace, overload, "_")."""
    return _nsp(base) > 0 and base.lstrip("_").startswith(("max_pool", "avg_pool", "adaptive_avg_pool",
                                                           "adaptive_max_pool"))


def _ints(concrete: list | None, i: int, n: int) -> list[int] | None:
    """A list-of-ints Concrete Input (``'[2, 2]'``; ``'[]'`` -> []; a bare int repeated n times)."""
    if not concrete or i >= len(concrete) or not str(concrete[i]).strip():
        return None
    try:
        v = json.loads(str(concrete[i]))
    except ValueError:
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * n
    if isinstance(v, list) and all(isinstance(x, int) for x in v) and len(v) in (0, 1, n):
        return v * n if len(v) == 1 else v
    return None


def _out_len(length: int, k: int, s: int, p: int, d: int, ceil: bool) -> int:
    num = length + 2 * p - d * (k - 1) - 1
    o = (-(-num // s) if ceil else num // s) + 1
    if ceil and (o - 1) * s >= length + p:
        o -= 1
    return max(o, 0)


def _adaptive_window_elems(lengths: list[int], outs: list[int]) -> int:
    """Elements summed over all adaptive windows (per dim: sum of ceil((i+1)L/O) - floor(iL/O))."""
    total = 1
    for L, o in zip(lengths, outs):
        total *= sum(-(-((i + 1) * L) // o) - (i * L) // o for i in range(o)) if o > 0 else 0
    return total


def pool_work(base: str, ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, Traffic]:
    """(FLOPs, FLOPs known, traffic) of a pooling op from its positional arguments."""
    base = base.lstrip("_")
    n = _nsp(base)
    x = ts[0] if ts else None
    if x is None or len(x.shape) < n + 1:
        return 0, False, Traffic(0, 0, False, f"{base}: input shape not recorded")
    if base.endswith("_backward"):
        return _backward(base, n, ts, concrete)
    lead, spatial = math.prod(x.shape[:-n]), list(x.shape[-n:])
    elem = dtype_size_bytes(x.dtype) or 4
    with_idx = base.startswith("adaptive_max") or base.endswith("with_indices")
    if "adaptive" in base:
        outs = _ints(concrete, 1, n)
        if not outs or len(outs) != n:
            return 0, False, Traffic(x.nbytes, 0, False, f"{base}: output_size not recorded: no Concrete Inputs")
        out = lead * math.prod(outs)
        win = lead * _adaptive_window_elems(spatial, outs)
        flops = win if "avg" in base else win - out
    else:
        k = _ints(concrete, 1, n)
        if not k or len(k) != n:
            return 0, False, Traffic(x.nbytes, 0, False, f"{base}: {_NO_WINDOW}")
        s = _ints(concrete, 2, n) or k
        p = _ints(concrete, 3, n) or [0] * n
        d = (_ints(concrete, 4, n) or [1] * n) if base.startswith("max") else [1] * n
        ci = 5 if base.startswith("max") else 4
        ceil = concrete_flag(concrete, ci)
        out = lead * math.prod(_out_len(spatial[i], k[i], s[i], p[i], d[i], ceil) for i in range(n))
        kk = math.prod(k)
        flops = out * (kk if base.startswith("avg") else kk - 1)
    write = out * elem + (out * 8 if with_idx else 0)
    return flops, True, Traffic(x.nbytes, write, True)


def _backward(base: str, n: int, ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, Traffic]:
    """``*_pool*_backward(grad_output, self, ...)``: read grad_output (+ indices), write grad_input."""
    go, x = ts[0], ts[1] if len(ts) > 1 else None
    if go is None or x is None:
        return 0, False, Traffic(0, 0, False, f"{base}: grad_output and input shapes not recorded")
    indices = [t for t in ts[2:] if t is not None and t.dtype == "int64"] if base.startswith("max") else []
    rd = go.nbytes + sum(t.nbytes for t in indices)
    tr = Traffic(rd, x.numel * (dtype_size_bytes(go.dtype) or 4), True)
    if base.startswith(("max", "adaptive_max")):
        return go.numel, True, tr
    if "adaptive" in base:  # grad_output's spatial dims are the output size
        lead = math.prod(x.shape[:-n])
        return lead * _adaptive_window_elems(list(x.shape[-n:]), list(go.shape[-n:])), True, tr
    k = _ints(concrete, 2, n)  # avg_pool2d_backward(grad_output, self, kernel_size, ...)
    if not k or len(k) != n:
        return 0, False, Traffic(tr.read_bytes, tr.write_bytes, True, f"{base}: {_NO_WINDOW}")
    return go.numel * math.prod(k), True, tr
