"""The op model: device work (FLOPs, bytes, GEMM geometry) of one framework op signature from its recorded
shapes. The project's one model of work from shapes, shared by capture, the simulated runtime and analysis.
Torch-free and pure Python; callers evaluate it once per distinct (name, shapes, dtypes) signature.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_profiler.hardware import dtype_size_bytes

from .classes import classify
from .lists import is_list_op, list_op_work
from .losses import LOSS_OPS, loss_work
from .pooling import is_pool_op, pool_work
from .quant import QUANT_OPS, quant_work
from .shapes import Tensor, concrete_flag, parse_json_list, tensor_args, unrecorded_tensor_list
from .sparse import SPARSE_OPS, sparse_work
from .traffic import Traffic, elementwise_flops, traffic

__all__ = ["OpWork", "lower_signature", "wants_concrete"]

# sizes beyond these are corrupt records (they would overflow int64 ns timelines)
_MAX_FLOPS = 2**62
_MAX_BYTES = 2**45


@dataclass
class OpWork:
    """Device work of one op signature (sizes in bytes, FLOPs with a MAC = 2).

    ``flops``: matrix FLOPs of matmul / conv / attention, FLOPs per element x elements of the elementwise,
    normalisation and reduction ops of :data:`~neuron_profiler.opmodel.traffic.FLOPS_PER_ELEMENT`, 0 for data
    movement, Kineto's recorded ``flops`` when given; ``flops_known`` is False where no formula applies.
    ``inputs`` / ``in_bytes`` / ``out_bytes`` size every tensor argument and the output (what a simulator
    stages); ``read_bytes`` / ``write_bytes`` are what the op *moves* (:func:`~neuron_profiler.opmodel.traffic
    .traffic`: an in-place slice update writes the slice, a gather reads the rows it fetches), with
    ``bytes_known`` False and ``note`` saying why when that cannot be derived from the shapes."""

    cls: str
    dtype: str = "float32"
    flops: int = 0
    inputs: list[Tensor] = field(default_factory=list)  # one entry per tensor argument (TensorList summed)
    out_elems: int = 0
    out_bytes: int = 0
    # matmul geometry of the (im2col) GEMM: M x K @ K x N, times batch
    gemm: tuple[int, int, int, int] = (0, 0, 0, 0)
    elems: int = 0  # elements touched per elementwise step (max input / broadcast output)
    backward: bool = False
    flops_known: bool = True
    read_bytes: int = 0
    write_bytes: int = 0
    bytes_known: bool = True
    note: str = ""

    @property
    def in_bytes(self) -> int:
        return sum(t.nbytes for t in self.inputs)

    @property
    def moved_bytes(self) -> int:
        """Bytes read + written (meaningful when ``bytes_known``)."""
        return self.read_bytes + self.write_bytes


def _unknown(note: str) -> OpWork:
    """No device work the simulator can stage, and no FLOPs or bytes analysis can claim."""
    return OpWork("none", flops_known=False, bytes_known=False, note=note)


def _mm_geometry(base: str, ts: list[Tensor | None]) -> tuple[int, int, int, int] | None:
    t = [x for x in ts if x is not None]
    if base in ("addmm", "addmv", "baddbmm", "addbmm", "_addmm_activation", "addr") and len(t) >= 3:
        t = t[1:]
    if len(t) < 2:
        return None
    a, b = t[0].shape, t[1].shape
    if base == "linear":  # x[..., K] @ w[N, K]^T
        if not a or len(b) not in (1, 2) or b[-1] != a[-1]:
            return None
        n = b[0] if len(b) == 2 else 1
        return 1, math.prod(a[:-1]) if len(a) > 1 else 1, a[-1], n
    if base in ("outer", "ger", "addr"):
        return 1, (a[0] if a else 1), 1, (b[0] if b else 1)
    if not a or not b:
        return None
    m = a[-2] if len(a) >= 2 else 1
    k = a[-1]
    n = b[-1] if len(b) >= 2 else 1
    if (b[-2] if len(b) >= 2 else b[0]) != k:  # inner dimensions disagree: not a valid matmul record
        return None
    batch_a, batch_b = a[:-2], b[:-2]
    nb = max(len(batch_a), len(batch_b))
    batch = 1
    for i in range(1, nb + 1):
        da = batch_a[-i] if i <= len(batch_a) else 1
        db = batch_b[-i] if i <= len(batch_b) else 1
        batch *= max(da, db)
    return batch, m, k, n


# positions of (stride, padding, dilation) among a conv op's arguments (aten signatures)
_CONV_ARG_POS = {
    "mkldnn_convolution": (4, 3, 5), "cudnn_convolution": (3, 2, 4), "miopen_convolution": (3, 2, 4),
    "cudnn_convolution_transpose": (4, 2, 5), "conv_transpose1d": (3, 4, 7), "conv_transpose2d": (3, 4, 7),
    "conv_transpose3d": (3, 4, 7), "slow_conv2d_forward": (4, 5, 99), "_slow_conv2d_forward": (4, 5, 99),
    "thnn_conv2d": (4, 5, 99),
}


def _conv_geometry(base: str, ts: list[Tensor | None], concrete: list | None) -> tuple[int, int, int, int] | None:
    backward = base.endswith("_backward")
    t = [x for x in ts if x is not None]
    if backward:  # (grad_output, input, weight): output geometry is grad_output
        if len(t) < 3:
            return None
        go, w = t[0].shape, t[2].shape
        if len(go) < 3 or len(w) != len(go):
            return None
        return 1, go[0] * math.prod(go[2:]), math.prod(w[1:]), w[0]
    if len(t) < 2:
        return None
    x, w = t[0].shape, t[1].shape
    if len(x) < 3 or len(w) != len(x):
        return None
    nsp = len(x) - 2
    transposed = "transpose" in base
    stride, padding, dilation = [1] * nsp, [k // 2 for k in w[2:]], [1] * nsp
    if concrete:  # Kineto "Concrete Inputs": positional values as strings
        def vec(i: int, default: list[int]) -> list[int]:
            try:
                v = json.loads(concrete[i]) if i < len(concrete) and concrete[i] else None
            except (ValueError, TypeError):
                return default
            if isinstance(v, int):
                v = [v] * nsp
            return [int(d) for d in v] if isinstance(v, list) and len(v) == nsp else default
        ps, pp, pd_ = _CONV_ARG_POS.get(base, (3, 4, 5))
        stride, padding, dilation = vec(ps, stride), vec(pp, padding), vec(pd_, dilation)
        if base in ("convolution", "_convolution") and concrete_flag(concrete, 6):
            transposed = True
    out_sp = []
    for i in range(nsp):
        k = w[2 + i]
        if transposed:
            o = (x[2 + i] - 1) * stride[i] - 2 * padding[i] + dilation[i] * (k - 1) + 1
        else:
            o = (x[2 + i] + 2 * padding[i] - dilation[i] * (k - 1) - 1) // stride[i] + 1
        out_sp.append(max(o, 1))
    if transposed:  # weight [Cin, Cout/groups, k...]: GEMM K = Cin (per group) * k
        return 1, x[0] * math.prod(out_sp), w[0] * math.prod(w[2:]) // max(1, x[1] // max(w[0], 1)), w[1]
    return 1, x[0] * math.prod(out_sp), math.prod(w[1:]), w[0]


def lower_signature(name: str, shapes_s: str, dtypes_s: str, flops_col: int = 0,
                    concrete: list | None = None) -> OpWork:
    """Device work of one op signature; ``cls == "none"`` when it produces none (non-compute op,
    no tensor inputs, or unparsable shapes).

    This is the project's one model of an op's FLOPs and bytes from its recorded shapes (Kineto
    ``Input Dims`` / ``Input type`` as JSON; ``concrete``: Kineto's ``Concrete Inputs`` strings). Capture
    (the ``flops`` column) and analysis (FLOPs of imported GPU ops) call it rather than re-deriving them."""
    cls = classify(name)
    if cls == "none":
        return OpWork("none")  # views, allocations, metadata, host-only: no FLOPs, no bytes (known)
    shapes = parse_json_list(shapes_s)
    if shapes is None:
        return _unknown("no input shapes recorded" if not shapes_s or shapes_s in ("[]", "") else
                        "unparsable input shapes")
    dtypes = parse_json_list(dtypes_s) or []
    try:
        ts = tensor_args(shapes, dtypes)
    except (TypeError, ValueError, OverflowError):
        return _unknown("unparsable input shapes")
    short = name.split("::", 1)[1].split(".", 1)[0] if "::" in name else name
    base = short.rstrip("_")
    if unrecorded_tensor_list(shapes, dtypes):
        return _unknown(f"{base}: its tensor-list argument is recorded without shapes (this Kineto writes [] "
                        "for a TensorList)")
    inputs = [t for t in ts if t is not None]
    if inputs and all(t.numel == 0 for t in inputs):
        return OpWork("none")  # every tensor argument has no elements: nothing to do, known
    if not inputs or sum(t.nbytes for t in inputs) <= 0:
        return _unknown("no tensor inputs recorded")
    if is_list_op(base):
        return _list_op(cls, base, inputs, flops_col)
    rule = _rule(base)
    if rule is not None:
        return _rule_op(rule, cls, base, ts, inputs, flops_col, concrete)
    dtype = inputs[0].dtype
    w = OpWork(cls, dtype=dtype, inputs=inputs, backward=base.endswith("backward"))
    size = dtype_size_bytes(dtype) or 4
    if cls in ("matmul", "conv"):
        why = _gemm_work(w, base, ts, flops_col, concrete)
        if why:
            return _unknown(why)
    elif cls == "attention":
        why = _attention_work(w, inputs)
        if why:
            return _unknown(why)
    else:
        _elementwise(w, base, cls, inputs)
    if flops_col and flops_col > 0:
        w.flops, w.flops_known = int(flops_col), True
    if base in _BOOL_OUT and not short.endswith("_"):  # comparisons write bool (1 byte) elements
        size = 1
    w.out_bytes = int(w.out_elems * size)
    tr = traffic(base, cls, short.endswith("_") and not short.endswith("__"), ts, w.out_elems, size, concrete)
    w.read_bytes, w.write_bytes, w.bytes_known, w.note = tr.read_bytes, tr.write_bytes, tr.known, tr.note
    _say_unknowns(w, name, base)
    if w.flops >= _MAX_FLOPS or w.in_bytes + w.out_bytes >= _MAX_BYTES:  # garbage sizes: no device work
        return _unknown("implausible sizes (corrupt record)")
    return w


def _gemm_work(w: OpWork, base: str, ts: list[Tensor | None], flops_col: int, concrete: list | None) -> str:
    """GEMM geometry, FLOPs and output elements of a matmul or convolution into ``w`` (a convolution as its
    implicit GEMM, doubled for backward); a cube GEMM of ``flops_col`` FLOPs when the shapes give none.
    Returns why the op is unknown, "" when priced."""
    geo = _mm_geometry(base, ts) if w.cls == "matmul" else _conv_geometry(base, ts, concrete)
    if geo is None or min(geo) <= 0:
        if flops_col <= 0:
            return f"{w.cls} shapes do not give a valid GEMM"
        k = int(max(1, round((flops_col / 2) ** (1 / 3))))  # a cube GEMM with those FLOPs
        geo = (1, k, k, k)
    batch, m, k, n = geo
    w.gemm = geo
    w.flops = 2 * batch * m * k * n * (2 if w.cls == "conv" and w.backward else 1)
    w.out_elems = batch * m * n
    return ""


def _attention_work(w: OpWork, inputs: list[Tensor]) -> str:
    """FLOPs of scaled-dot-product attention from its query and key shapes (QK^T and PV: 4·BH·Lq·S·D, x2.5
    for backward) into ``w``; returns why the op is unknown, "" when priced."""
    t4 = [t for t in inputs if len(t.shape) >= 3]
    lead = 1 if w.backward and len(t4) >= 4 else 0  # backward: (grad_out, q, k, v, ...)
    q = t4[lead] if len(t4) > lead else None
    kk = t4[lead + 1] if len(t4) > lead + 1 else None
    if q is None or kk is None:
        return "attention without query and key shapes"
    bh = math.prod(q.shape[:-2])
    lq, d, s = q.shape[-2], q.shape[-1], kk.shape[-2]
    w.gemm = (bh, lq, d, s)
    w.flops = int(4 * bh * lq * s * d * (2.5 if w.backward else 1))
    w.elems = bh * lq * s
    w.out_elems = bh * lq * d
    return ""


def _say_unknowns(w: OpWork, name: str, base: str) -> None:
    """A library op without a rule of its own (fbgemm, torchvision, ...) is unknown: the "elementwise over
    its arguments" default does not describe it (a table lookup reads rows, not the table). Elsewhere, a
    missing FLOP count is said in the note."""
    ns = name.split("::", 1)[0]
    if ns not in ("aten", "prims") and w.cls not in ("matmul", "conv", "attention"):
        w.flops_known = w.bytes_known = False
        w.note = f"{name}: no op model for this {ns} op (only its argument sizes are recorded)"
    elif not w.flops_known:
        w.note = "; ".join(x for x in (w.note, f"{base}: no FLOP count per element for this op") if x)


def _list_op(cls: str, base: str, inputs: list[Tensor], flops_col: int) -> OpWork:
    """``cat`` / ``stack`` / ``_foreach_*`` (:mod:`~neuron_profiler.opmodel.lists`)."""
    lw = list_op_work(base, inputs)
    first = inputs[0]
    w = OpWork(cls, dtype=first.dtype, flops=lw.flops, inputs=inputs, out_elems=lw.out_elems,
               out_bytes=lw.out_elems * (dtype_size_bytes(first.dtype) or 4), elems=sum(t.numel for t in inputs),
               flops_known=lw.flops_known, read_bytes=lw.read_bytes, write_bytes=lw.write_bytes,
               bytes_known=lw.bytes_known, note=lw.note)
    if flops_col > 0:
        w.flops, w.flops_known = int(flops_col), True
    if w.flops >= _MAX_FLOPS or w.in_bytes + w.out_bytes >= _MAX_BYTES:
        return _unknown("implausible sizes (corrupt record)")
    return w


# ops with a rule module of their own: (base) -> rule(base, tensor args, concrete) -> (FLOPs, FLOPs known, Traffic)
_Rule = Callable[[str, list[Tensor | None], list | None], tuple[int, bool, Traffic]]
_RULES: dict[str, _Rule] = {**{b: sparse_work for b in SPARSE_OPS}, **{b: quant_work for b in QUANT_OPS},
          **{b: loss_work for b in LOSS_OPS}}


def _rule(base: str) -> _Rule | None:
    return _RULES.get(base) or (pool_work if is_pool_op(base) else None)


def _rule_op(rule: _Rule, cls: str, base: str, ts: list[Tensor | None], inputs: list[Tensor], flops_col: int,
             concrete: list | None) -> OpWork:
    """Ops priced by a rule module (:mod:`~neuron_profiler.opmodel.sparse`, ``.quant``, ``.losses``,
    ``.pooling``): the module's FLOPs and traffic; the output sized by what it writes."""
    flops, fk, tr = rule(base, ts, concrete)
    size = dtype_size_bytes(inputs[0].dtype) or 4
    elems = max(t.numel for t in inputs)
    # what a simulator stages: the bytes written where known, else (as for any op) one output the size of
    # the largest argument; read_bytes / write_bytes / bytes_known keep what is known
    out = tr.write_bytes if tr.known and tr.write_bytes > 0 else elems * size
    w = OpWork(cls, dtype=inputs[0].dtype, flops=flops, inputs=inputs, out_elems=max(out // size, 1),
               out_bytes=out, elems=elems, flops_known=fk,
               read_bytes=tr.read_bytes, write_bytes=tr.write_bytes, bytes_known=tr.known, note=tr.note,
               backward=base.endswith("backward"))
    if flops_col > 0:
        w.flops, w.flops_known = int(flops_col), True
    if not w.flops_known and not w.note:
        w.note = f"{base}: FLOPs not derivable from the record"
    if w.flops >= _MAX_FLOPS or w.in_bytes + w.out_bytes >= _MAX_BYTES:
        return _unknown("implausible sizes (corrupt record)")
    return w


def wants_concrete(name: str) -> bool:
    """True when the op model reads this op's Kineto "Concrete Inputs" (scalar arguments such as a
    convolution's stride, a gather's dim, ``diff``'s n): callers pass them only for these ops."""
    if classify(name) == "conv":
        return True
    base = name.split("::", 1)[-1].split(".", 1)[0].rstrip("_")
    return base in ("index_select", *SPARSE_OPS, *LOSS_OPS, *QUANT_OPS) or is_pool_op(base)


# ops whose output is bool whatever their inputs' dtype
_BOOL_OUT = {"eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan",
             "isinf", "isfinite", "isneginf", "isposinf", "all", "any"}


def _elementwise(w: OpWork, base: str, cls: str, inputs: list[Tensor]) -> None:
    """Elements and FLOPs of a non-matrix op (reduction, foreach, gather or elementwise)."""
    first = inputs[0]
    w.elems = max(t.numel for t in inputs)
    if cls == "reduce":
        last = first.shape[-1] if first.shape else 1
        w.out_elems = max(1, first.numel // max(last, 1))
    elif base.startswith(("_foreach_", "_fused_")):
        w.out_elems = first.numel
        w.elems = sum(t.numel for t in inputs)
    elif cls in ("gpsimd",) and base in ("embedding", "index_select", "gather", "take"):
        idx = inputs[1] if len(inputs) > 1 else first
        width = first.shape[-1] if base == "embedding" and first.shape else 1
        w.out_elems = idx.numel * width
        w.elems = w.out_elems
    else:
        w.out_elems = w.elems
    w.flops, w.flops_known = elementwise_flops(base, cls, w.elems, w.out_elems)
