"""FLOPs of matrix-engine aten ops from their recorded input shapes (a multiply-add counts 2 FLOPs).

Only leaf ops get a count (``aten::mm``, ``aten::addmm``, ``aten::bmm``, ``aten::baddbmm``,
``aten::convolution``) so that sums over a trace do not double count ``aten::linear``/``aten::matmul``.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

MATMUL_OPS = {"aten::mm": (0, 1), "aten::addmm": (1, 2), "aten::bmm": (0, 1), "aten::baddbmm": (1, 2)}


def _dims(shape: Any) -> "list[int] | None":
    if isinstance(shape, (list, tuple)) and all(isinstance(d, int) for d in shape):
        return list(shape)
    return None


def matmul_flops(a: Sequence[int], b: Sequence[int]) -> int:
    """2*M*N*K (times the batch) for ``a @ b`` with ``a = [..., M, K]`` and ``b = [..., K, N]``; 0 if malformed."""
    if len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
        return 0
    batch = math.prod(a[:-2]) if len(a) > 2 else (math.prod(b[:-2]) if len(b) > 2 else 1)
    return 2 * batch * a[-2] * a[-1] * b[-1]


def conv_flops(inp: Sequence[int], weight: Sequence[int], stride: Any = None, padding: Any = None,
               dilation: Any = None, groups: Any = None) -> int:
    """2 * N * C_out * prod(out_spatial) * (C_in/groups) * prod(kernel) for a (non-transposed) convolution."""
    if len(inp) < 3 or len(weight) != len(inp):
        return 0
    nsp = len(inp) - 2

    def _vec(v: Any, default: int) -> list[int]:
        if isinstance(v, (list, tuple)) and v and all(isinstance(x, int) for x in v):
            return list(v) * nsp if len(v) == 1 else list(v)
        if isinstance(v, int):
            return [v] * nsp
        return [default] * nsp
    s, p, d = _vec(stride, 1), _vec(padding, 0), _vec(dilation, 1)
    if len(s) != nsp or len(p) != nsp or len(d) != nsp:
        return 0
    out = [(inp[2 + i] + 2 * p[i] - d[i] * (weight[2 + i] - 1) - 1) // s[i] + 1 for i in range(nsp)]
    if any(o <= 0 for o in out):
        return 0
    return 2 * inp[0] * weight[0] * math.prod(out) * weight[1] * math.prod(weight[2:])


def op_flops(name: str, shapes: Sequence[Any], concrete: "Sequence[Any] | None" = None) -> int:
    """FLOPs of one aten op from its input shapes (``concrete`` = recorded scalar args, for conv); 0 when unknown."""
    idx = MATMUL_OPS.get(name)
    if idx is not None:
        if len(shapes) <= max(idx):
            return 0
        a, b = _dims(shapes[idx[0]]), _dims(shapes[idx[1]])
        return matmul_flops(a, b) if a is not None and b is not None else 0
    if name == "aten::convolution" and len(shapes) >= 2:
        a, w = _dims(shapes[0]), _dims(shapes[1])
        if a is None or w is None:
            return 0
        c = list(concrete) if concrete else []
        c += [None] * (9 - len(c))
        if c[6] is True:  # transposed
            return 0
        return conv_flops(a, w, c[3], c[4], c[5], c[8])
    return 0
