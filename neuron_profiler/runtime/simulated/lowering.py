"""Lowering of framework (host) ops to device work: op class, FLOPs, bytes and dtype from recorded shapes.

Works on the ``host_ops`` table (capture or imported Kineto ``cpu_op`` rows). Shapes and dtypes are the
JSON strings Kineto records as ``Input Dims`` / ``Input type``; unparsable or empty values yield no work.
Everything here is pure Python over the *unique* (name, shapes, dtypes) signatures; callers vectorise.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from neuron_profiler.hardware import dtype_size_bytes, normalize_dtype

__all__ = ["OpWork", "classify", "lower_signature", "leaf_compute_mask", "parse_json_list", "COMPUTE_CLASSES"]

# op class of aten base names (namespace and trailing "_" of in-place variants stripped)
_MATMUL = {"mm", "addmm", "matmul", "bmm", "baddbmm", "linear", "addbmm", "mv", "addmv", "dot", "vdot",
           "_scaled_mm", "einsum", "_addmm_activation", "_int_mm", "outer", "ger", "addr", "tensordot", "inner"}
_CONV = {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "cudnn_convolution", "mkldnn_convolution",
         "convolution_backward", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
         "cudnn_convolution_transpose", "slow_conv2d_forward", "thnn_conv2d", "_slow_conv2d_forward",
         "miopen_convolution", "convolution_overrideable", "_convolution_mode"}
_SCALAR = {"gelu", "relu", "silu", "tanh", "exp", "sigmoid", "log", "sqrt", "rsqrt", "softplus", "elu", "selu",
           "celu", "leaky_relu", "hardtanh", "hardswish", "hardsigmoid", "mish", "erf", "exp2", "expm1", "log1p",
           "log2", "reciprocal", "sin", "cos", "logsigmoid", "log_sigmoid_forward", "relu6", "prelu", "glu",
           "threshold", "square", "pow", "abs", "neg", "sign", "floor", "ceil", "round", "clamp", "clamp_min",
           "clamp_max"}
_SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax", "special_softmax"}
_NORM = {"layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm", "group_norm", "native_group_norm",
         "batch_norm", "native_batch_norm", "_batch_norm_impl_index", "cudnn_batch_norm", "instance_norm",
         "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "miopen_batch_norm"}
_ATTN = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_flash_attention_for_cpu", "_flash_attention_forward", "_efficient_attention_forward",
         "_scaled_dot_product_fused_attention_overrideable"}
_GPSIMD = {"gather", "scatter", "scatter_add", "scatter_reduce", "index", "index_put", "_index_put_impl",
           "index_select", "embedding", "embedding_backward", "embedding_dense_backward", "_embedding_bag",
           "embedding_bag", "_embedding_bag_backward", "nonzero", "topk", "sort", "argsort", "masked_select",
           "masked_scatter", "unique", "_unique2", "unique_consecutive", "index_add", "index_copy", "index_fill",
           "take", "take_along_dim", "multinomial", "randperm", "searchsorted", "bucketize", "kthvalue",
           "median", "mode", "cumsum", "cumprod", "_unsafe_index", "_unsafe_index_put", "repeat_interleave",
           "bincount", "histc", "put", "one_hot"}
_REDUCE = {"sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "norm", "linalg_vector_norm",
           "var", "std", "var_mean", "std_mean", "prod", "all", "any", "logsumexp", "nll_loss", "nll_loss_forward",
           "nll_loss2d_forward", "cross_entropy_loss", "mse_loss", "l1_loss", "smooth_l1_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "count_nonzero", "_foreach_norm"}
_COPY = {"copy", "clone", "_to_copy", "contiguous", "_copy_from", "_copy_from_and_resize", "to_copy",
         "cat", "stack", "_cat", "constant_pad_nd", "pad", "repeat", "flip", "roll", "tril", "triu",
         "index_select_backward", "_reshape_copy", "masked_fill", "where"}
_FILL = {"fill", "zero", "zeros_like", "ones_like", "full_like", "normal", "uniform", "bernoulli",
         "random", "dropout", "native_dropout", "rand_like", "randn_like"}
# ops that never produce device work (views, allocation, metadata, host-only)
_NONE = {"view", "reshape", "_reshape_alias", "_unsafe_view", "t", "transpose", "permute", "expand", "expand_as",
         "as_strided", "empty", "empty_strided", "empty_like", "new_empty", "new_empty_strided", "detach",
         "alias", "slice", "select", "unsqueeze", "squeeze", "flatten", "unflatten", "split", "split_with_sizes",
         "chunk", "unbind", "narrow", "resize", "set", "lift_fresh", "lift_fresh_copy", "item",
         "_local_scalar_dense", "is_nonzero", "size", "stride", "numpy_t", "record_param_comms", "to",
         "view_as", "result_type", "broadcast_tensors", "_has_compatible_shallow_copy_type", "is_same_size",
         "_nested_tensor_from_mask_left_aligned", "zeros", "ones", "full", "arange", "linspace", "scalar_tensor",
         "tensor", "as_tensor", "from_blob", "_pin_memory", "pin_memory", "is_pinned", "requires_grad",
         "retain_grad", "output_nr", "_version", "dim", "numel", "sym_size", "sym_stride", "sym_numel",
         "equal", "allclose", "cpu", "cuda", "record_stream", "_foreach_zero", "unfold", "movedim", "swapaxes",
         "mT", "mH", "adjoint", "real", "imag", "view_as_real", "view_as_complex", "align_to", "rename",
         "_conj", "conj", "_neg_view", "resolve_conj", "resolve_neg", "diagonal", "squeeze_", "unsqueeze_",
         "t_", "transpose_", "as_strided_", "_unsafe_split", "split_copy", "rand", "randn", "randint"}

# sizes beyond these are corrupt records (they would overflow int64 ns timelines)
_MAX_FLOPS = 2**62
_MAX_BYTES = 2**45

#: classes that produce device work
COMPUTE_CLASSES = ("matmul", "conv", "attention", "softmax", "norm", "scalar", "gpsimd", "reduce", "copy", "fill",
                   "vector")
_NAMESPACES = {"aten", "prims", "quantized", "fbgemm", "torchvision", "neuron", "xla", "torchrec", "_c10d_functional",
               "c10d_functional"}


@lru_cache(maxsize=8192)
def classify(name: str) -> str:
    """Op class of a framework op name: one of ``COMPUTE_CLASSES`` or "none".

    Only namespaced ops (``aten::mm``, ``fbgemm::...``) are lowered; annotations, python frames,
    autograd nodes (``MmBackward0``) and runtime calls are "none"."""
    if not isinstance(name, str) or "::" not in name:
        return "none"
    ns, base = name.split("::", 1)
    if ns not in _NAMESPACES or not base:
        return "none"
    base = base.split(".", 1)[0]
    if "embedding" in base or "lookup" in base and ns != "aten":
        return "gpsimd"
    if ns in ("_c10d_functional", "c10d_functional"):
        return "none"
    if base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    if base.startswith("_foreach_"):
        return "reduce" if base == "_foreach_norm" else "vector"
    if base.startswith("_fused_") and any(k in base for k in ("adam", "sgd", "lamb", "adagrad")):
        return "vector"
    for table, cls in ((_NONE, "none"), (_MATMUL, "matmul"), (_CONV, "conv"), (_ATTN, "attention"),
                       (_SOFTMAX, "softmax"), (_NORM, "norm"), (_SCALAR, "scalar"), (_GPSIMD, "gpsimd"),
                       (_REDUCE, "reduce"), (_COPY, "copy"), (_FILL, "fill")):
        if base in table:
            return cls
    stem = base[: -len("_backward")] if base.endswith("_backward") else None
    if stem is not None:
        if stem in _CONV or "conv" in stem:
            return "conv"
        if stem in _ATTN or "attention" in stem:
            return "attention"
        if stem in _NORM:
            return "norm"
        if stem in _GPSIMD:
            return "gpsimd"
        return "vector"  # activation / softmax / loss backward: tensor-tensor elementwise
    return "vector"


def parse_json_list(s: object) -> list | None:
    """JSON list from a shapes/dtypes string; None for empty or garbage."""
    if not isinstance(s, str) or not s or s[0] != "[":
        return None
    try:
        v = json.loads(s)
    except (ValueError, RecursionError):
        return None
    return v if isinstance(v, list) else None


def _is_shape(x: object) -> bool:
    return isinstance(x, list) and all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**40 for d in x)


@dataclass
class Tensor:
    shape: tuple[int, ...]
    dtype: str
    numel: int
    nbytes: int


@dataclass
class OpWork:
    """Device work of one op signature (sizes in bytes, FLOPs with a MAC = 2)."""

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

    @property
    def in_bytes(self) -> int:
        return sum(t.nbytes for t in self.inputs)


def _tensors(shapes: list, dtypes: list) -> list[Tensor | None]:
    """Positional arguments -> Tensor (TensorList summed into one) or None for non-tensors."""
    out: list[Tensor | None] = []
    for i, shp in enumerate(shapes):
        raw = dtypes[i] if i < len(dtypes) else ""
        dt = normalize_dtype(raw) if isinstance(raw, str) else ""
        if isinstance(raw, str) and raw in ("Scalar", "ScalarList", "", "None", "GenericList", "Device", "Layout",
                                            "int[]", "bool", "int") and not (isinstance(shp, list) and shp):
            out.append(None)
            continue
        if _is_shape(shp) and (dt or shp):
            numel = math.prod(shp) if shp else 1
            size = dtype_size_bytes(dt) or 4
            out.append(Tensor(tuple(shp), dt or "float32", numel, numel * size))
        elif isinstance(shp, list) and shp and all(_is_shape(s) for s in shp):  # TensorList
            numel = sum(math.prod(s) if s else 1 for s in shp)
            dt = dt if dt and raw != "TensorList" else "float32"
            out.append(Tensor(tuple(shp[0]), dt, numel, numel * (dtype_size_bytes(dt) or 4)))
        else:
            out.append(None)
    return out


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
        if base in ("convolution", "_convolution") and len(concrete) > 6 and concrete[6] in ("True", "1", "true"):
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
        return OpWork("none")
    shapes = parse_json_list(shapes_s)
    if shapes is None:
        return OpWork("none")
    dtypes = parse_json_list(dtypes_s) or []
    try:
        ts = _tensors(shapes, dtypes)
    except (TypeError, ValueError, OverflowError):
        return OpWork("none")
    inputs = [t for t in ts if t is not None]
    if not inputs or sum(t.nbytes for t in inputs) <= 0:
        return OpWork("none")
    base = name.split("::", 1)[1].split(".", 1)[0].rstrip("_") if "::" in name else name
    dtype = inputs[0].dtype
    w = OpWork(cls, dtype=dtype, inputs=inputs, backward=base.endswith("backward"))
    size = dtype_size_bytes(dtype) or 4
    if cls in ("matmul", "conv"):
        geo = _mm_geometry(base, ts) if cls == "matmul" else _conv_geometry(base, ts, concrete)
        if geo is None or min(geo) <= 0:
            if flops_col <= 0:
                return OpWork("none")
            k = int(max(1, round((flops_col / 2) ** (1 / 3))))  # a cube GEMM with those FLOPs
            geo = (1, k, k, k)
        batch, m, k, n = geo
        w.gemm = geo
        w.flops = 2 * batch * m * k * n * (2 if cls == "conv" and w.backward else 1)
        w.out_elems = batch * m * n
    elif cls == "attention":
        t4 = [t for t in inputs if len(t.shape) >= 3]
        first = 1 if w.backward and len(t4) >= 4 else 0  # backward: (grad_out, q, k, v, ...)
        q = t4[first] if len(t4) > first else None
        kk = t4[first + 1] if len(t4) > first + 1 else None
        if q is None or kk is None:
            return OpWork("none")
        bh = math.prod(q.shape[:-2])
        lq, d, s = q.shape[-2], q.shape[-1], kk.shape[-2]
        w.gemm = (bh, lq, d, s)
        w.flops = int(4 * bh * lq * s * d * (2.5 if w.backward else 1))
        w.elems = bh * lq * s
        w.out_elems = bh * lq * d
    else:
        first = inputs[0]
        w.elems = max(t.numel for t in inputs)
        if cls == "reduce":
            last = first.shape[-1] if first.shape else 1
            w.out_elems = max(1, first.numel // max(last, 1))
        elif base.startswith("_foreach_") or base.startswith("_fused_"):
            w.out_elems = first.numel
            w.elems = sum(t.numel for t in inputs)
        elif cls in ("gpsimd",) and base in ("embedding", "index_select", "gather", "take"):
            idx = inputs[1] if len(inputs) > 1 else first
            width = first.shape[-1] if base == "embedding" and first.shape else 1
            w.out_elems = idx.numel * width
            w.elems = w.out_elems
        else:
            w.out_elems = w.elems
    if flops_col and flops_col > 0:
        w.flops = int(flops_col)
    w.out_bytes = int(w.out_elems * size)
    if w.flops >= _MAX_FLOPS or w.in_bytes + w.out_bytes >= _MAX_BYTES:  # garbage sizes: no device work
        return OpWork("none")
    return w


def _innermost(track: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """True for intervals that contain no other interval of the set on the same track.

    Sorted by (track, start, -duration), a properly nested parent is immediately followed by its first
    descendant, which starts before the parent ends."""
    order = np.lexsort((-dur, start, track))
    t, s, d = track[order], start[order], dur[order]
    e = s + d
    parent = np.zeros(len(order), dtype=bool)
    same = t[1:] == t[:-1]
    parent[:-1] = same & (((s[1:] < e[:-1]) & (d[:-1] > 0)) | ((s[1:] == s[:-1]) & (e[1:] == e[:-1])))
    out = np.zeros(len(order), dtype=bool)
    out[order] = ~parent
    return out


def _inside_any(track: np.ndarray, start: np.ndarray, end: np.ndarray,
                q_track: np.ndarray, q_start: np.ndarray, q_end: np.ndarray) -> np.ndarray:
    """True for query intervals lying within some interval (track, start, end) on the same track."""
    out = np.zeros(len(q_track), dtype=bool)
    for tr in np.unique(q_track):
        m = track == tr
        if not m.any():
            continue
        o = np.argsort(start[m], kind="stable")
        st, run_end = start[m][o], np.maximum.accumulate(end[m][o])
        q = np.flatnonzero(q_track == tr)
        k = np.searchsorted(st, q_start[q], side="right") - 1
        ok = k >= 0
        out[q[ok]] = run_end[k[ok]] >= q_end[q[ok]]
    return out


def leaf_compute_mask(host_ops: pd.DataFrame, compute: np.ndarray, tensor_op: np.ndarray | None = None) -> np.ndarray:
    """Which compute ops to lower, so nested ops are lowered once (vectorised per track).

    A Tensor-engine op (``tensor_op``: matmul / conv / attention) is lowered unless it contains another
    Tensor-engine op (aten::linear -> aten::addmm: only addmm). Any other compute op is lowered when it
    contains no compute op and lies inside no Tensor-engine op (the bias ``copy_`` inside a CPU
    ``addmm`` is part of the addmm)."""
    n = len(host_ops)
    leaf = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(compute)
    if not len(idx):
        return leaf
    track = host_ops["track"].to_numpy(np.int64)
    start = host_ops["start_ts"].to_numpy(np.int64)
    dur = host_ops["duration_ns"].to_numpy(np.int64)
    leaf[idx] = _innermost(track[idx], start[idx], dur[idx])
    if tensor_op is None:
        return leaf
    tix = np.flatnonzero(compute & tensor_op)
    if len(tix):
        leaf[tix] = _innermost(track[tix], start[tix], dur[tix])
        other = np.flatnonzero(leaf & ~tensor_op)
        inside = _inside_any(track[tix], start[tix], start[tix] + dur[tix],
                             track[other], start[other], start[other] + dur[other])
        leaf[other[inside]] = False
    return leaf
