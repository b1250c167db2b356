"""Convolutions as implicit GEMMs (torch-free): the geometry of a forward or backward convolution from its
recorded shapes, and the stride / padding / dilation from Kineto's "Concrete Inputs".

A convolution's FLOPs depend on its *output* size, which the record does not hold: it follows from the input
size and the stride, padding and dilation, which Kineto keeps only in "Concrete Inputs" (ScalarList values).
Where those are absent, the output shape must come from elsewhere in the trace (``out_shape``: the
grad_output of the op's backward, or the input of the op that consumes it); without it the FLOPs are unknown
and the reason says so; stride 1 is never assumed for a record that lists the stride argument.
"""
from __future__ import annotations

import json
import math

from .shapes import Tensor, concrete_flag

__all__ = ["conv_geometry", "conv_backward_passes", "conv_backward_mask", "CONV_ARG_POS"]

#: positions of (stride, padding, dilation) among a conv op's arguments (aten signatures); the default is
#: ``convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)``
CONV_ARG_POS = {
    "mkldnn_convolution": (4, 3, 5), "cudnn_convolution": (3, 2, 4), "miopen_convolution": (4, 3, 5),
    "miopen_depthwise_convolution": (4, 3, 5), "cudnn_convolution_transpose": (4, 2, 5),
    "miopen_convolution_transpose": (5, 3, 6), "conv_transpose1d": (3, 4, 7), "conv_transpose2d": (3, 4, 7),
    "conv_transpose3d": (3, 4, 7), "slow_conv2d_forward": (4, 5, 99), "_slow_conv2d_forward": (4, 5, 99),
    "thnn_conv2d": (4, 5, 99),
}
Geometry = tuple[int, int, int, int]


def _vec(concrete: list, i: int, nsp: int) -> list[int] | None:
    """ScalarList argument ``i`` of Concrete Inputs as ``nsp`` ints; None when absent or malformed."""
    try:
        v = json.loads(concrete[i]) if i < len(concrete) and concrete[i] else None
    except (ValueError, TypeError):
        return None
    if isinstance(v, int) and not isinstance(v, bool):
        v = [v] * nsp
    if isinstance(v, list) and len(v) == 1 and nsp > 1:
        v = v * nsp
    if not isinstance(v, list) or len(v) != nsp or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
        return None
    return [int(d) for d in v]


def _out_spatial(base: str, x: tuple[int, ...], w: tuple[int, ...], nargs: int, concrete: list | None,
                 out_shape: tuple[int, ...] | None) -> tuple[list[int] | None, bool, str]:
    """(output spatial dims or None, transposed, note) of a forward convolution."""
    nsp = len(x) - 2
    transposed = "transpose" in base or (base in ("convolution", "_convolution") and concrete_flag(concrete, 6))
    ps, pp, pd_ = CONV_ARG_POS.get(base, (3, 4, 5))
    stride = _vec(concrete, ps, nsp) if concrete else None
    padding = _vec(concrete, pp, nsp) if concrete else None
    dilation = [1] * nsp if pd_ >= 99 else (_vec(concrete, pd_, nsp) if concrete else None)
    if stride and padding is not None and dilation and min(stride) > 0 and min(dilation) > 0:
        out = []
        for i in range(nsp):
            k = w[2 + i]
            if transposed:
                o = (x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + 1
            else:
                o = (x[2 + i] + 2 * padding[i] - dilation[i] * (k - 1) - 1) // stride[i] + 1
            out.append(o)
        return (out, transposed, "") if min(out) > 0 else (None, transposed, f"{base}: stride, padding and "
                                                                             "dilation give an empty output")
    if out_shape is not None and len(out_shape) == len(x) and out_shape[0] == x[0] and min(out_shape) > 0:
        return list(out_shape[2:]), transposed, f"{base}: output size from the trace's other records (stride " \
                                                "and padding not recorded)"
    if nargs <= 3 and not concrete:  # a record listing no stride / padding arguments at all: torch's call
        return [x[2 + i] for i in range(nsp)], transposed, f"{base}: no stride or padding arguments in the " \
                                                           "record: assumed stride 1, same padding"
    return None, transposed, (f"{base}: stride and padding not recorded (no Concrete Inputs) and no other "
                              "record gives the output size: FLOPs unknown")


def conv_geometry(base: str, ts: list[Tensor | None], nargs: int, concrete: list | None,
                  out_shape: tuple[int, ...] | None = None) -> tuple[Geometry | None, str]:
    """(implicit GEMM (batch, M, K, N) or None, note) of a convolution record.

    Forward: M = N·out spatial, K = Cin/groups·kernel, N = Cout. Backward (``convolution_backward(grad_output,
    input, weight, ...)``): the forward's geometry, from grad_output (the forward's output) and the weight."""
    t = [x for x in ts if x is not None]
    if base.endswith("_backward"):
        if len(t) < 3:
            return None, f"{base}: grad_output, input and weight shapes not all recorded"
        go, w = t[0].shape, t[2].shape
        if len(go) < 3 or len(w) != len(go):
            return None, f"{base}: grad_output and weight shapes disagree"
        return (1, go[0] * math.prod(go[2:]), math.prod(w[1:]), w[0]), ""
    if len(t) < 2:
        return None, f"{base}: input and weight shapes not recorded"
    x, w = t[0].shape, t[1].shape
    if len(x) < 3 or len(w) != len(x):
        return None, f"{base}: input and weight shapes disagree"
    out, transposed, note = _out_spatial(base, x, w, nargs, concrete, out_shape)
    if out is None:
        return None, note
    if transposed:  # weight [Cin, Cout/groups, k...]: GEMM K = Cin (per group) * k
        groups = max(1, x[1] // max(w[0], 1))
        return (1, x[0] * math.prod(out), w[0] * math.prod(w[2:]) // groups, w[1]), note
    return (1, x[0] * math.prod(out), math.prod(w[1:]), w[0]), note


def conv_backward_mask(concrete: list | None) -> tuple[int, int]:
    """(grad input computed, grad weight computed) from ``convolution_backward``'s ``output_mask`` (argument 10
    of Concrete Inputs); (1, 1) when it is not recorded."""
    if concrete and len(concrete) > 10:
        try:
            mask = json.loads(str(concrete[10]).replace("True", "true").replace("False", "false"))
        except ValueError:
            mask = None
        if isinstance(mask, list) and len(mask) >= 2:
            return int(bool(mask[0])), int(bool(mask[1]))
    return 1, 1


def conv_backward_passes(concrete: list | None) -> tuple[int, str]:
    """How many forward-sized GEMMs ``convolution_backward`` runs: grad input and grad weight (2) unless its
    ``output_mask`` says one of them is not computed (the first layer computes no grad input). Without the
    mask both are assumed, and the note says so."""
    mask = conv_backward_mask(concrete)
    if concrete and len(concrete) > 10:
        return mask[0] + mask[1], ""
    return 2, "convolution_backward: output_mask not recorded: grad input and grad weight assumed"
