"""Op classes: which device work a framework op name stands for (torch-free, pure Python).

``classify("aten::addmm") == "matmul"``; views, allocations, metadata and host-only ops are "none".
"""
from __future__ import annotations

from functools import lru_cache

__all__ = ["classify", "known_no_work", "is_composite", "COMPUTE_CLASSES", "TENSOR_ENGINE_CLASSES"]

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
         "as_strided", "empty", "empty_strided", "empty_permuted", "empty_like", "new_empty", "new_empty_strided",
         "detach",
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
         "t_", "transpose_", "as_strided_", "_unsafe_split", "split_copy", "rand", "randn", "randint",
         # host-only checks and queries: they read metadata (shapes, strides, storage), never tensor data
         "_debug_has_internal_overlap", "_fused_sdp_choice", "_assert_async", "_assert_scalar",
         "_assert_tensor_metadata", "_functional_assert_async", "_functional_assert_scalar", "sym_constrain_range",
         "sym_constrain_range_for_size", "_functional_sym_constrain_range",
         "_functional_sym_constrain_range_for_size", "is_contiguous", "is_set_to", "is_floating_point",
         "is_complex", "is_signed", "is_inference", "is_leaf", "_nnz", "_has_same_storage_numel", "can_cast",
         "promote_types", "_shape_as_tensor", "_make_dep_token", "_propagate_xla_data", "_print",
         "_use_cudnn_ctc_loss", "_use_cudnn_rnn_flatten_weight", "_chunk_grad_outputs_efficient_attention",
         "_validate_sparse_coo_tensor_args", "_validate_sparse_compressed_tensor_args",
         "_validate_compressed_sparse_indices", "data", "_is_zerotensor", "_check_tensor",
         "sym_is_contiguous"}

# composite ops outside the matmuls: torch runs them as other aten ops (CompositeImplicitAutograd; on CPU,
# meta and fake tensors also ``_fused_rms_norm``), so their work is their ops' (a dry run that decomposes one
# of those ops further must not make the composite one kernel)
_COMPOSITE = {"rms_norm", "_fused_rms_norm", "layer_norm", "group_norm", "instance_norm", "batch_norm",
              "cross_entropy_loss", "nll_loss", "nll_loss_nd", "dropout", "feature_dropout", "alpha_dropout",
              "feature_alpha_dropout", "softmax", "log_softmax", "type_as", "pad", "cosine_similarity",
              "pairwise_distance", "square"}

#: classes that run on the matrix (Tensor) engine
TENSOR_ENGINE_CLASSES = ("matmul", "conv", "attention")
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




@lru_cache(maxsize=8192)
def known_no_work(name: str) -> bool:
    """True when the op is *known* to produce no device work of its own: a namespaced view, allocation,
    metadata or host-only op (``aten::view``, ``aten::empty``, ``record_param_comms``, ...). False for compute
    classes and for names the op model does not know (annotations, Triton launchers, custom ops): when such
    a name launches device work, that work is unknown, not zero."""
    if not isinstance(name, str) or "::" not in name or classify(name) != "none":
        return False
    ns, base = name.split("::", 1)
    if ns in ("_c10d_functional", "c10d_functional", "c10d"):
        return True
    base = base.split(".", 1)[0]
    if base.endswith("_") and not base.endswith("__"):
        base = base[:-1]
    return ns in _NAMESPACES and base in _NONE


@lru_cache(maxsize=8192)
def is_composite(name: str) -> bool:
    """True for an aten op outside the matmuls that torch runs as other aten ops on every backend
    (``aten::rms_norm`` -> ``pow``, ``mean``, ``rsqrt``, ``mul``; ``aten::cross_entropy_loss`` ->
    ``log_softmax``, ``nll_loss``): its device work is that of its ops."""
    if not isinstance(name, str) or not name.startswith("aten::"):
        return False
    base = name[len("aten::"):].split(".", 1)[0]
    return base in _COMPOSITE
