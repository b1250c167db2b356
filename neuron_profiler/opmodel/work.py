"""The op model: device work (FLOPs, bytes, GEMM geometry) of one framework op signature from its recorded
shapes. The project's one model of work from shapes, shared by capture, the simulated runtime and analysis.
Torch-free and pure Python; callers evaluate it once per distinct (name, shapes, dtypes) signature.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from neuron_profiler.hardware import dtype_size_bytes

from .classes import classify
from .conv import conv_backward_mask, conv_backward_passes, conv_geometry
from .inductor import inductor_work, is_inductor_kernel
from .lists import is_list_op, list_op_work
from .losses import LOSS_OPS, loss_work
from .pooling import is_pool_op, pool_work
from .quant import QUANT_OPS, quant_work
from .reductions import REDUCE_DIM_POS, reduced_elems
from .shapes import Tensor, parse_json_list, tensor_args, unrecorded_tensor_list
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


def lower_signature(name: str, shapes_s: str, dtypes_s: str, flops_col: int = 0,
                    concrete: list | None = None, out_shape: tuple[int, ...] | None = None) -> OpWork:
    """Device work of one op signature; ``cls == "none"`` when it produces none (non-compute op,
    no tensor inputs, or unparsable shapes).

    This is the project's one model of an op's FLOPs and bytes from its recorded shapes (Kineto
    ``Input Dims`` / ``Input type`` as JSON; ``concrete``: Kineto's ``Concrete Inputs`` strings). Capture
    (the ``flops`` column) and analysis (FLOPs of imported GPU ops) call it rather than re-deriving them.
    ``out_shape``: the op's output shape where other records of the trace tell it (a convolution's backward
    or consumer), used where the op's own record cannot give it (a convolution without its stride)."""
    if is_inductor_kernel(name):
        return _inductor(name, shapes_s, dtypes_s, concrete)
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
    if base in _DROPOUT and _eval_mode(concrete):
        return OpWork("none", note=f"{base} with train=False (or p=0) is the identity: no device work")
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
    ts, out_arg = _split_out_arg(base, ts)
    inputs = [t for t in ts if t is not None]
    dtype = inputs[0].dtype
    w = OpWork(cls, dtype=dtype, inputs=inputs, backward=base.endswith("backward"))
    size = dtype_size_bytes(dtype) or 4
    if cls in ("matmul", "conv"):
        why = _gemm_work(w, base, ts, flops_col, concrete, len(shapes), out_shape)
        if why:
            return _unknown(why)
    elif cls == "attention":
        why = _attention_work(w, inputs)
        if why:
            return _unknown(why)
    else:
        _elementwise(w, base, cls, inputs)
        if cls == "reduce" and base in REDUCE_DIM_POS:
            out_elems, why = reduced_elems(base, shapes, dtypes, ts, concrete)
            if out_arg is not None:
                out_elems, why = out_arg.numel, ""
            elif out_elems is None and out_shape:
                out_elems, why = math.prod(out_shape), f"{base}: output size from the op that consumes it"
            w.out_elems = out_elems if out_elems is not None else 0
            w.note = why
    if flops_col and flops_col > 0:
        w.flops, w.flops_known = int(flops_col), True
    if base in _BOOL_OUT and not short.endswith("_"):  # comparisons write bool (1 byte) elements
        size = 1
    w.out_bytes = int(w.out_elems * size)
    tr = traffic(base, cls, short.endswith("_") and not short.endswith("__"), ts, w.out_elems, size, concrete)
    w.read_bytes, w.write_bytes, w.bytes_known = tr.read_bytes, tr.write_bytes, tr.known
    w.note = "; ".join(x for x in (w.note, tr.note) if x)
    if cls == "conv" and w.backward and len(inputs) >= 3:
        _conv_backward_traffic(w, inputs, concrete)
    if cls == "reduce" and base in REDUCE_DIM_POS and w.out_elems == 0:
        w.bytes_known = False
    _say_unknowns(w, name, base)
    if w.flops >= _MAX_FLOPS or w.in_bytes + w.out_bytes >= _MAX_BYTES:  # garbage sizes: no device work
        return _unknown("implausible sizes (corrupt record)")
    return w


#: positional arity of elementwise ops' functional forms: one more tensor argument of the output's shape is
#: the ``out=`` tensor (``clamp_min.out(self, min, out)``), written, not read
_ARITY = {"clamp_min": 2, "clamp_max": 2, "clamp": 3, "add": 3, "sub": 3, "mul": 2, "div": 2, "relu": 1, "gelu": 2,
          "silu": 1, "sigmoid": 1, "tanh": 1, "exp": 1, "log": 1, "neg": 1, "sqrt": 1, "rsqrt": 1, "abs": 1,
          "pow": 2, "where": 3, "maximum": 2, "minimum": 2, "reciprocal": 1, "sin": 1, "cos": 1, "erf": 1,
          "square": 1, "sign": 1, "floor": 1, "ceil": 1, "round": 1, "eq": 2, "ne": 2, "lt": 2, "le": 2, "gt": 2,
          "ge": 2, "mul_": 2, "addcmul": 4, "addcdiv": 4, "lerp": 3, "threshold_backward": 3, "hardtanh": 3,
          "leaky_relu": 2, "sum": 4, "mean": 4, "amax": 3, "amin": 3, "prod": 4, "mm": 2, "bmm": 2, "matmul": 2,
          "addmm": 5, "baddbmm": 5, "addbmm": 5, "addmv": 5, "mv": 2, "dot": 2}


def _conv_backward_traffic(w: OpWork, inputs: list[Tensor], concrete: list | None) -> None:
    """``convolution_backward(grad_output, input, weight)`` runs one GEMM per gradient its output_mask asks
    for, each reading grad_output: grad input reads the weight and writes the input's size, grad weight reads
    the input and writes the weight's size (both when the mask is not recorded)."""
    go, x, wt = inputs[0], inputs[1], inputs[2]
    mask = conv_backward_mask(concrete)
    w.read_bytes = go.nbytes * (mask[0] + mask[1]) + wt.nbytes * mask[0] + x.nbytes * mask[1]
    w.write_bytes = x.nbytes * mask[0] + wt.nbytes * mask[1]


def _inductor(name: str, shapes_s: str, dtypes_s: str, concrete: list | None) -> OpWork:
    """An Inductor Triton kernel launch priced from its buffers and the ops its name lists
    (:mod:`~neuron_profiler.opmodel.inductor`); class "vector" (elementwise / reduction work)."""
    shapes = parse_json_list(shapes_s)
    if shapes is None:
        return _unknown("no input shapes recorded")
    try:
        ts = tensor_args(shapes, parse_json_list(dtypes_s) or [])
    except (TypeError, ValueError, OverflowError):
        return _unknown("unparsable input shapes")
    flops, known, nbytes, dtype, note = inductor_work(name, ts, concrete)
    inputs = [t for t in ts if t is not None]
    if not inputs:
        return _unknown("no tensor inputs recorded")
    return OpWork("vector", dtype=dtype or "float32", flops=flops, flops_known=known, inputs=inputs,
                  read_bytes=nbytes, write_bytes=0, note=note, elems=max(t.numel for t in inputs))


def _split_out_arg(base: str, ts: list[Tensor | None]) -> tuple[list[Tensor | None], Tensor | None]:
    """The record without its ``out=`` tensor, and that tensor (None when the op has none): an ``.out``
    overload records one argument more than the functional form, a tensor, last."""
    n = _ARITY.get(base)
    if n is None or len(ts) != n + 1 or ts[-1] is None or not ts[-1].shape:
        return ts, None
    return ts[:-1], ts[-1]


def _gemm_work(w: OpWork, base: str, ts: list[Tensor | None], flops_col: int, concrete: list | None,
               nargs: int = 0, out_shape: tuple[int, ...] | None = None) -> str:
    """GEMM geometry, FLOPs and output elements of a matmul or convolution into ``w`` (a convolution as its
    implicit GEMM; its backward as one forward-sized GEMM per gradient computed); a cube GEMM of ``flops_col``
    FLOPs when the shapes give none. Returns why the op is unknown, "" when priced."""
    note = ""
    if w.cls == "matmul":
        geo = _mm_geometry(base, ts)
    else:
        geo, note = conv_geometry(base, ts, nargs, concrete, out_shape)
    if geo is None or min(geo) <= 0:
        if flops_col <= 0:
            return note or f"{w.cls} shapes do not give a valid GEMM"
        k = int(max(1, round((flops_col / 2) ** (1 / 3))))  # a cube GEMM with those FLOPs
        geo = (1, k, k, k)
    batch, m, k, n = geo
    w.gemm = geo
    passes = 1
    if w.cls == "conv" and w.backward:
        passes, why = conv_backward_passes(concrete)
        note = "; ".join(x for x in (note, why) if x)
    w.flops = 2 * batch * m * k * n * passes
    w.out_elems = batch * m * n
    w.note = note
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


_DROPOUT = {"dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout", "native_dropout"}


def _eval_mode(concrete: list | None) -> bool:
    """A dropout's Concrete Inputs ``(input, p, train)`` say it does nothing: train False, or p 0."""
    if not concrete or len(concrete) < 3:
        return False
    train = str(concrete[2]).strip().lower()
    try:
        p_zero = float(str(concrete[1]).strip()) == 0.0
    except ValueError:
        p_zero = False
    return train in ("false", "0") or p_zero


def wants_concrete(name: str) -> bool:
    """True when the op model reads this op's Kineto "Concrete Inputs" (scalar arguments such as a
    convolution's stride, a gather's dim, ``diff``'s n): callers pass them only for these ops."""
    if classify(name) == "conv" or is_inductor_kernel(name):
        return True
    base = name.split("::", 1)[-1].split(".", 1)[0].rstrip("_")
    return base in ("index_select", *SPARSE_OPS, *LOSS_OPS, *QUANT_OPS, *REDUCE_DIM_POS, *_DROPOUT) or is_pool_op(base)


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
