"""Dry runs (meta tensors, FakeTensorMode) recorded as the device would run them.

Two modes, pushed by the capture session for the windows of a dry run (:func:`dry_run_kind` says which):

* :class:`ListDtypeRecorder` (meta and fake): a dispatch mode that records the element dtype of every
  tensor list passed to an op (``aten::cat``, ``aten::_foreach_*``, ``aten::_fused_adamw_``), which Kineto
  does not record (:mod:`neuron_profiler.capture.tensor_lists` writes them into the trace), and records each
  dtype conversion as an ``aten::copy_`` from the source dtype, as a CPU run does (a cast kernel).
* :class:`MetaAsDevice` (meta only): ``torch.autocast`` has no effect on meta tensors (their dispatch keys
  have no autocast key), and ``scaled_dot_product_attention`` on meta takes the math path (a dozen ops)
  where a device, and FakeTensorMode, run one fused attention kernel. This function mode applies, on meta
  tensors inside an enabled ``torch.autocast`` region, the casts CPU autocast makes (the op lists of
  ``torch/testing/_internal/autocast_test_lists.py``, AutocastCPUTestLists: ``torch_16``/``nn_16`` run in the
  autocast dtype, ``nn_fp32``/``torch_fp32`` and ``cross_entropy`` in float32, as CPU autocast runs them),
  and routes attention
  to the kernel ``torch._fused_sdp_choice`` picks for CPU tensors of the same shapes, so a meta dry run
  records the kernels and dtypes a fake-tensor (and a CPU) run records. Each call it changes is one
  ``neuron::dry_run <op>`` host range around its casts and the op (CPU autocast records its wrapper op
  around them), which the simulator costs as the program's call. ``torch.compile`` on meta tensors
  is not supported (said once, and kept in the trace's ``capture_problems``): use fake tensors.

The casts are made above autograd (``Tensor.to``), as autocast makes them, so the backward pass runs in the
dtypes the real run's backward uses.
"""
from __future__ import annotations

import collections
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from neuron_profiler.capture.report import notice
from neuron_profiler.capture.tensor_lists import ListDtypes, shapes_key
from neuron_profiler.compile.backend import kineto_dtype
from neuron_profiler.eventnames import DRY_RUN_CALL_PREFIX

__all__ = ["dry_run_kind", "ListDtypeRecorder", "MetaAsDevice"]


def dry_run_kind() -> str:
    """"fake" under an active FakeTensorMode, "meta" when the default device is meta (``with
    torch.device("meta")``), else "" (a run on real tensors)."""
    try:
        if torch._C._get_dispatch_mode(torch._C._TorchDispatchModeKey.FAKE) is not None:
            return "fake"
    except (AttributeError, RuntimeError):  # an older torch without infra mode keys
        pass
    try:
        return "meta" if torch.get_default_device().type == "meta" else ""
    except (AttributeError, RuntimeError):
        return ""


class ListDtypeRecorder(TorchDispatchMode):
    """Records ``shapes_key(list) -> element dtype`` (Kineto spelling) of tensor lists passed to ops, and runs
    a dtype conversion (``aten::_to_copy``) as a CPU run records it: an allocation and an ``aten::copy_``
    from the source dtype (fake tensors would record ``prims::convert_element_type``, which hides it)."""

    #: higher-order operators (torch.compile's functionalized RNG of a recomputed region,
    #: ``run_and_save_rng_state``) pass through to the modes below (FakeTensorMode has their rules)
    supports_higher_order_operators = True

    def __init__(self) -> None:
        super().__init__()
        self.dtypes: ListDtypes = collections.defaultdict(collections.deque)

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        """Off while ``torch.compile`` traces and compiles (compiled graphs record their own shapes and
        dtypes), so the mode never makes Dynamo fall back to eager."""
        return True

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        for a in args:
            if isinstance(a, (list, tuple)) and a and isinstance(a[0], torch.Tensor):
                self.dtypes[shapes_key(t.shape for t in a)].append(kineto_dtype(a[0].dtype))
        if func is torch.ops.aten._to_copy.default and args and _is_cast(args[0], kwargs):
            # as a CPU or meta run records it: the allocation and a copy_ from the source dtype
            x = args[0]
            out = torch.empty_like(x, dtype=kwargs["dtype"], device=kwargs.get("device") or x.device,
                                   memory_format=kwargs.get("memory_format") or torch.preserve_format)
            return out.copy_(x)
        return func(*args, **kwargs)


def _is_cast(x: Any, kwargs: dict) -> bool:
    """A dtype conversion on this device, with no layout / pinning change (``_to_copy`` arguments)."""
    if not isinstance(x, torch.Tensor) or kwargs.get("dtype") in (None, x.dtype):
        return False
    dev = kwargs.get("device")
    return (dev is None or torch.device(dev) == x.device) and kwargs.get("layout") in (None, x.layout) \
        and not kwargs.get("pin_memory")


def _autocast_dtype() -> torch.dtype | None:
    """The dtype of the enabled autocast region (CPU or CUDA autocast), else None."""
    for dev in ("cpu", "cuda"):
        try:
            if torch.is_autocast_enabled(dev):
                return torch.get_autocast_dtype(dev)
        except (RuntimeError, TypeError, AttributeError):  # device type unknown to this torch
            continue
    return None


def _cast(x: Any, dtype: torch.dtype) -> Any:
    """``x`` (or the tensors of a list/tuple) cast to ``dtype`` where it is a floating meta tensor of another
    dtype (float64 excluded, as autocast excludes it)."""
    if isinstance(x, torch.Tensor):
        if x.is_meta and x.is_floating_point() and x.dtype not in (dtype, torch.float64):
            return x.to(dtype)
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    return x


def _any_meta(args: Any, kwargs: dict) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor) and a.is_meta:
            return True
        if isinstance(a, (list, tuple)) and any(isinstance(v, torch.Tensor) and v.is_meta for v in a):
            return True
    return False


_LOW = {F.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.__rmatmul__, torch.mm,
        torch.Tensor.mm, torch.bmm, torch.Tensor.bmm, torch.baddbmm, torch.Tensor.baddbmm, torch.addmm,
        torch.Tensor.addmm, torch.addbmm, torch.Tensor.addbmm, torch.einsum, torch.conv1d, torch.conv2d,
        torch.conv3d, torch.conv_transpose1d, torch.conv_transpose2d, torch.conv_transpose3d, torch.prelu,
        F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d, F.prelu}
_FP32 = {F.cross_entropy, F.nll_loss, F.binary_cross_entropy, F.binary_cross_entropy_with_logits, F.mse_loss, F.l1_loss,
         F.smooth_l1_loss, F.huber_loss, F.poisson_nll_loss, F.cosine_embedding_loss, F.hinge_embedding_loss,
         F.margin_ranking_loss, F.triplet_margin_loss, F.multilabel_margin_loss, F.soft_margin_loss,
         F.multi_margin_loss, F.avg_pool3d}


def _stand_in(t: Any) -> Any:
    """A CPU tensor of ``t``'s shape and dtype over one row of storage (``t`` if not a tensor)."""
    if not isinstance(t, torch.Tensor):
        return t
    return torch.empty(t.shape[-1], dtype=t.dtype, device="cpu").as_strided(t.shape, (0,) * (t.dim() - 1) + (1,))


def _sdp_choice(q: Any, k: Any, v: Any, attn_mask: Any, dropout_p: float, is_causal: bool,
                scale: float | None) -> int:
    """The kernel ``torch._fused_sdp_choice`` picks for CPU tensors of these shapes and dtypes, computed
    with the profiler's records off on this thread: the stand-in tensors and the choice are the dry run's
    bookkeeping, not ops of the program (the fused kernel records its own ``_fused_sdp_choice`` where the
    program makes it)."""
    torch.autograd._enable_record_function(False)
    try:
        return torch._fused_sdp_choice(_stand_in(q), _stand_in(k), _stand_in(v), _stand_in(attn_mask), dropout_p,
                                       is_causal, scale=scale)
    finally:  # the mode runs inside a profiler window, where record functions are on
        torch.autograd._enable_record_function(True)


def _sdpa(q: Any, k: Any, v: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
          scale: float | None = None, enable_gqa: bool = False) -> Any:
    """Attention on meta tensors through the kernel CPU tensors of these shapes would take."""
    if not all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k, v)) or enable_gqa:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    from torch.nn.attention import SDPBackend
    if _sdp_choice(q, k, v, attn_mask, dropout_p, is_causal, scale) == SDPBackend.FLASH_ATTENTION.value:
        return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q, k, v, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)[0]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                          scale=scale)


COMPILED_META = ("torch.compile on meta tensors is not a dry run of the compiled step (autocast and the fused "
                 "attention do not apply inside its graphs, and graph breaks appear): use FakeTensorMode for "
                 "compiled dry runs")


class MetaAsDevice(TorchFunctionMode):
    """Autocast casts and the fused attention kernel on meta tensors (see the module docstring). Inside
    ``torch.compile`` tracing it does nothing; ``compiled_meta`` says a graph was compiled from meta tensors
    (reported once, with :data:`COMPILED_META`)."""

    def __init__(self) -> None:
        super().__init__()
        self.compiled_meta = False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if torch.compiler.is_compiling():  # graphs are traced on fake tensors of the meta device
            if not self.compiled_meta and _any_meta(args, kwargs):
                self.compiled_meta = True
                notice(COMPILED_META)
            return func(*args, **kwargs)
        if func not in _LOW and func not in _FP32 and func is not F.scaled_dot_product_attention:
            return func(*args, **kwargs)
        if not _any_meta(args, kwargs):
            return func(*args, **kwargs)
        dtype = _autocast_dtype()
        if dtype is None and func is not F.scaled_dot_product_attention:
            return func(*args, **kwargs)
        # one range for the program's call, the casts and the op inside it, as CPU autocast records its wrapper
        with torch.profiler.record_function(DRY_RUN_CALL_PREFIX + getattr(func, "__name__", "op")):
            if func is F.scaled_dot_product_attention:
                if dtype is not None:
                    args, kwargs = _cast(args, dtype), {k: _cast(v, dtype) for k, v in kwargs.items()}
                return _sdpa(*args, **kwargs)
            to = dtype if func in _LOW and dtype is not None else torch.float32
            return func(*_cast(args, to), **{k: _cast(v, to) for k, v in kwargs.items()})
