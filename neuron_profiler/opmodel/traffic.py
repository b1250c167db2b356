"""What an op moves and computes beyond matrix work: bytes read and written, and FLOPs of elementwise,
normalisation and reduction ops (torch-free, pure Python).

The rules count the memory an op *moves*, not the size of every tensor it touches:

* views, allocations and metadata ops move nothing;
* an in-place update of part of a tensor (``index_put_``, ``index_copy_``, ``scatter_``, ``copy_`` of a
  slice, ...) reads its sources and writes the updated part, not the whole destination (a KV-cache
  ``index_put_`` writes one token's slice, not the cache);
* gathers (``embedding``, ``index_select``, ``gather``) read the rows they fetch, not the whole table;
* matmul / convolution / attention read their operands and write their output;
* everything else reads its tensor inputs and writes one output the size of the broadcast result.

Where the traffic depends on the data (``nonzero``, ``masked_select``, ``unique``, ...) or the op is not
modelled, :func:`traffic` says so (``known=False`` and a reason) instead of guessing.
"""
from __future__ import annotations

from dataclasses import dataclass

from neuron_profiler.hardware import dtype_size_bytes

from .shapes import Tensor, concrete_int

__all__ = ["Traffic", "traffic", "elementwise_flops", "FLOPS_PER_ELEMENT"]

#: FLOPs per element of elementwise / normalisation / softmax / reduction ops (aten base names, in-place "_"
#: stripped), times the larger of the input and output element counts. fvcore and torch.utils.flop_counter
#: count matrix work only; these are the per-element costs of the textbook formulas, one FLOP per add, mul,
#: compare, select or transcendental call (gelu's tanh form ~8, softmax exp+sum+div ~5):
#:
#: * comparisons, logical and bitwise ops, select (``where``, ``masked_fill``), rounding, sign, abs: 1;
#:   ``clamp`` with both bounds 2; ``nan_to_num`` (3 tests and a select) 4; ``logit`` log(x / (1 - x)) 3;
#: * reductions: one add / compare per input element (``sum``, ``mean``, ``amax``, ``all``, ...);
#:   ``var`` / ``std`` two passes (sum; subtract, square, add) 4; ``logsumexp`` (max; subtract, exp, add) 4;
#: * backward of elementwise ops, per element of the gradient: ``threshold_backward`` (relu) a select 1,
#:   ``sigmoid_backward`` g·y·(1 - y) 3, ``tanh_backward`` g·(1 - y²) 3, ``silu_backward``
#:   g·s·(1 + x·(1 - s)) with s = sigmoid(x) 9, ``gelu_backward`` g·(Φ(x) + x·φ(x)), Φ and φ 4 each, 11,
#:   ``logit_backward`` g / (x·(1 - x)) 3, ``_softmax_backward_data`` y·(g - Σ g·y) 4,
#:   ``_log_softmax_backward_data`` g - exp(y)·Σ g 4;
#: * ``native_layer_norm_backward``: x̂ = (x - μ)·rstd 2, g·w 1, the two row sums Σ g·w and Σ g·w·x̂ 3,
#:   dx = rstd·(g·w - mean - x̂·mean2) 4, dγ += g·x̂ and dβ += g 3: 13;
#: * batch norm (``cudnn_batch_norm``, ``miopen_batch_norm``, ``_native_batch_norm_legit``) as
#:   ``native_batch_norm`` 4, ``native_group_norm`` as layer norm 5; their backward: x̂ = (x - μ)·rstd 2, the two
#:   channel sums Σ g and Σ g·x̂ (which are also dβ and dγ) 3, dx = γ·rstd·(g - Σ g/N - x̂·Σ g·x̂/N) 4: 9
#:   (``native_group_norm_backward`` 13, as layer norm's); RMS norm backward (``_fused_rms_norm_backward``):
#:   x̂ = x·rstd 1, g·w 1, Σ g·w·x̂ 2, dx = rstd·(g·w - x̂·mean) 3, dw += g·x̂ 2: 9;
#: * losses' and activations' backward per gradient element: ``mse_loss_backward`` 2·(x - y)·g/N 3,
#:   ``l1_loss_backward`` sign(x - y)·g/N 3, ``smooth_l1_loss_backward`` 4, ``binary_cross_entropy_with_logits
#:   _backward`` (σ(x) - y)·g 5, ``hardtanh_backward`` / ``leaky_relu_backward`` a select 1, ``elu_backward`` 3,
#:   ``hardswish_backward`` 3, ``hardsigmoid_backward`` 2, ``softplus_backward`` 4, ``mish_backward`` 9,
#:   ``native_dropout_backward`` g·mask·scale 1;
#: * ``embedding_dense_backward``: one add per gradient element (rows accumulated into the weight gradient);
#: * losses: ``binary_cross_entropy_with_logits`` (1 - y)·x + log(1 + exp(-x)) and the mean 8,
#:   ``mse_loss`` (sub, square, add) 3, ``l1_loss`` (sub, abs, add) 3.
FLOPS_PER_ELEMENT = {"add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "relu": 1, "gelu": 8, "silu": 4, "tanh": 4,
                     "sigmoid": 4, "exp": 1, "neg": 1, "rsqrt": 1, "sqrt": 1, "pow": 1, "addcmul": 2, "addcdiv": 2,
                     "lerp": 2, "softmax": 5, "_softmax": 5, "log_softmax": 5, "_log_softmax": 5, "layer_norm": 5,
                     "native_layer_norm": 5, "rms_norm": 4, "_fused_rms_norm": 4, "batch_norm": 4,
                     "native_batch_norm": 4, "dropout": 1, "native_dropout": 1, "mean": 1, "sum": 1,
                     # comparisons, logic, select, rounding, simple unary ops
                     "eq": 1, "ne": 1, "lt": 1, "le": 1, "gt": 1, "ge": 1, "logical_and": 1, "logical_or": 1,
                     "logical_xor": 1, "logical_not": 1, "bitwise_and": 1, "bitwise_or": 1, "bitwise_xor": 1,
                     "bitwise_not": 1, "where": 1, "masked_fill": 1, "abs": 1, "sign": 1, "floor": 1, "ceil": 1,
                     "round": 1, "trunc": 1, "reciprocal": 1, "square": 1, "log": 1, "log2": 1, "log10": 1,
                     "log1p": 1, "exp2": 1, "expm1": 1, "sin": 1, "cos": 1, "erf": 1, "clamp_min": 1,
                     "clamp_max": 1, "clamp": 2, "maximum": 1, "minimum": 1, "nan_to_num": 4, "logit": 3,
                     # reductions
                     "amax": 1, "amin": 1, "max": 1, "min": 1, "argmax": 1, "argmin": 1, "all": 1, "any": 1,
                     "prod": 1, "count_nonzero": 1, "cumsum": 1, "cumprod": 1, "var": 4, "std": 4, "var_mean": 4,
                     "std_mean": 4, "logsumexp": 4,
                     # backward of elementwise ops
                     "threshold_backward": 1, "sigmoid_backward": 3, "tanh_backward": 3, "silu_backward": 9,
                     "gelu_backward": 11, "logit_backward": 3, "_softmax_backward_data": 4,
                     "_log_softmax_backward_data": 4, "native_layer_norm_backward": 13,
                     "cudnn_batch_norm": 4, "miopen_batch_norm": 4, "_native_batch_norm_legit": 4,
                     "_native_batch_norm_legit_no_training": 4, "native_group_norm": 5, "group_norm": 5,
                     "native_batch_norm_backward": 9, "cudnn_batch_norm_backward": 9, "miopen_batch_norm_backward": 9,
                     "native_group_norm_backward": 13, "_fused_rms_norm_backward": 9, "rms_norm_backward": 9,
                     "mse_loss_backward": 3, "l1_loss_backward": 3, "smooth_l1_loss_backward": 4,
                     "binary_cross_entropy_with_logits_backward": 5, "hardtanh_backward": 1,
                     "leaky_relu_backward": 1, "elu_backward": 3, "hardswish_backward": 3, "hardsigmoid_backward": 2,
                     "softplus_backward": 4, "native_dropout_backward": 1, "mish_backward": 9,
                     # scatter-add of each gradient row into the weight gradient
                     "embedding_dense_backward": 1, "embedding_backward": 1,
                     # losses
                     "binary_cross_entropy_with_logits": 8, "mse_loss": 3, "l1_loss": 3}

# in-place partial updates: (positions of the source tensors among the tensor arguments)
_PARTIAL_UPDATE = {"index_put", "_index_put_impl", "index_copy", "index_add", "index_fill", "scatter", "scatter_add",
                   "scatter_reduce", "put", "masked_scatter", "_unsafe_index_put"}
_SLICE_UPDATE = {"slice_scatter", "select_scatter", "diagonal_scatter", "as_strided_scatter"}
_GATHER = {"embedding", "index_select", "gather", "take", "take_along_dim", "_embedding_bag", "embedding_bag",
           "_unsafe_index", "index"}
# output size depends on the data
_DATA_DEPENDENT = {"nonzero", "masked_select", "unique", "_unique2", "unique_consecutive", "nonzero_static",
                   "argwhere", "repeat_interleave"}


@dataclass(frozen=True)
class Traffic:
    """Bytes an op reads and writes; ``known`` False (and ``note`` says why) when they cannot be derived."""

    read_bytes: int
    write_bytes: int
    known: bool = True
    note: str = ""


_UNKNOWN = Traffic(0, 0, False, "")


def _bytes(t: Tensor | None) -> int:
    return t.nbytes if t is not None else 0


def traffic(base: str, cls: str, inplace: bool, ts: list[Tensor | None], out_elems: int, out_size: int,
            concrete: list | None = None) -> Traffic:
    """Bytes moved by one op (``base`` = aten base name without namespace, overload and trailing "_";
    ``inplace`` = the recorded name ended in "_"; ``ts`` = its positional arguments as tensors or None;
    ``out_elems`` / ``out_size`` = elements and bytes per element of its output as the op model sizes it;
    ``concrete`` = Kineto's "Concrete Inputs" strings, for scalar arguments such as a gather's ``dim``)."""
    tensors = [t for t in ts if t is not None]
    if not tensors:
        return Traffic(0, 0, False, "no tensor arguments recorded")
    if base in _DATA_DEPENDENT:
        return Traffic(sum(t.nbytes for t in tensors), 0, False, f"{base}: output size depends on the data")
    if cls in ("matmul", "conv", "attention"):
        return Traffic(sum(t.nbytes for t in tensors), out_elems * out_size)
    if base in _PARTIAL_UPDATE and inplace or base in _SLICE_UPDATE:
        return _partial_update(base, tensors)
    if base == "copy" and inplace:  # copy_(dst, src): read src, write dst (dst is the view being written)
        dst = tensors[0]
        src = tensors[1] if len(tensors) > 1 else dst
        return Traffic(src.nbytes, dst.nbytes)
    if base in ("fill", "zero", "normal", "uniform", "bernoulli", "random") and inplace:
        return Traffic(sum(t.nbytes for t in tensors[1:]), tensors[0].nbytes)
    if base in _GATHER:
        return _gather(base, ts, tensors, concrete)
    if inplace and cls in ("vector", "scalar", "copy", "gpsimd", "fill"):  # x.op_(y): read x and y, write x
        return Traffic(sum(t.nbytes for t in tensors), tensors[0].nbytes)
    if cls == "reduce":
        return Traffic(sum(t.nbytes for t in tensors), out_elems * out_size)
    if cls == "none":
        return Traffic(0, 0)
    return Traffic(sum(t.nbytes for t in tensors), out_elems * out_size)


def _partial_update(base: str, tensors: list[Tensor]) -> Traffic:
    """``dst.index_put_(indices, values)`` and friends: read the sources (indices, values), write as many
    destination elements as the sources carry (read them too when the update accumulates)."""
    dst, src = tensors[0], tensors[1:]
    if not src:
        return Traffic(0, 0, False, f"{base}: no source tensor recorded")
    values = src[-1]  # index_put_(self, indices, values) / index_copy_(self, dim, index, source) / scatter_(..., src)
    elem = dtype_size_bytes(dst.dtype) or 4
    written = min(values.numel, dst.numel) * elem
    if base in ("index_fill", "masked_scatter") or (base == "scatter" and len(src) == 1):
        # index_fill_(dim, index, value): the filled rows are not in the shapes (index length x row size)
        idx = src[0]
        row = dst.numel // max(dst.shape[0], 1) if dst.shape else 1
        written = min(idx.numel * row, dst.numel) * elem
    accumulate = base in ("index_add", "scatter_add", "scatter_reduce", "put")
    read = sum(t.nbytes for t in src) + (written if accumulate else 0)
    return Traffic(read, written, True, f"{base}: writes the updated elements, not the whole destination")


def _gather(base: str, ts: list[Tensor | None], tensors: list[Tensor], concrete: list | None) -> Traffic:
    """Gathers read the indices and the rows they fetch, and write those rows (not the whole table)."""
    src = tensors[0]
    if len(tensors) < 2:
        return Traffic(src.nbytes, 0, False, f"{base}: no index tensor recorded")
    idx = tensors[1]
    elem = dtype_size_bytes(src.dtype) or 4
    note = ""
    if base == "embedding":  # embedding(weight[V, D], indices)
        rows = idx.numel * (src.shape[-1] if len(src.shape) >= 2 else 1)
    elif base in ("gather", "take", "take_along_dim"):
        rows = idx.numel
    elif base == "index_select":  # index_select(self, dim, index): index.numel slices along dim
        dim = concrete_int(concrete, 1)
        if dim is None:
            dim, note = 0, "index_select: dim not recorded, assumed 0"
        dim = dim % len(src.shape) if src.shape else 0
        rows = idx.numel * (src.numel // max(src.shape[dim], 1) if src.shape else 1)
    elif base in ("index", "_unsafe_index"):  # x[idx]: assumed one index tensor on dim 0
        rows = idx.numel * (src.numel // max(src.shape[0], 1) if src.shape else 1)
        note = f"{base}: assumed one index tensor on dim 0"
    else:  # embedding_bag: how many bags it writes is not in the shapes
        return Traffic(idx.nbytes + idx.numel * (src.shape[-1] if src.shape else 1) * elem, 0, False,
                       f"{base}: bag count not recorded")
    rows = min(rows, max(src.numel, idx.numel))
    return Traffic(idx.nbytes + rows * elem, rows * elem, True, note)


def elementwise_flops(base: str, cls: str, elems: int, out_elems: int) -> tuple[int, bool]:
    """(FLOPs, known) of a non-matrix op: ``FLOPS_PER_ELEMENT`` x elements for the listed ops; 0 (known) for
    ops that move data without arithmetic (copies, fills, gathers, views); (0, False) otherwise."""
    per = FLOPS_PER_ELEMENT.get(base)
    if per is not None:
        return per * max(elems, out_elems), True
    if cls in ("copy", "fill", "none") or base in _GATHER or base in _PARTIAL_UPDATE or base in _SLICE_UPDATE:
        return 0, True
    return 0, False
