"""Transformer building blocks of one tensor-parallel rank, in plain ``torch.nn`` (Megatron-style sharding).

A rank of a TP group holds ``heads / tp`` attention heads and ``ffn / tp`` MLP columns: the QKV and MLP-up
projections are column-parallel, the attention output and MLP-down projections row-parallel, with an
all-reduce of the partial sums after each row-parallel projection (forward) and of the input gradient before
each column-parallel one (backward). The all-reduces are real ``torch.distributed`` calls on the TP group
(a fake process group in a dry run records them with their sizes). Key/value heads fewer than ``tp`` are
replicated (one per rank), as NeuronX Distributed does for grouped-query attention.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["TransformerConfig", "Block", "TPGroup"]


class TPGroup:
    """The tensor-parallel process group of the rank being built (``None``: no collectives, TP=1)."""

    group: dist.ProcessGroup | None = None


class _CopyToTP(torch.autograd.Function):
    """Identity forward; all-reduce of the input gradient across the TP group backward."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        if TPGroup.group is not None:
            _all_reduce(g)
        return g


class _ReduceFromTP(torch.autograd.Function):
    """All-reduce of the partial sums forward; identity backward."""

    @staticmethod
    def forward(ctx, x):
        if TPGroup.group is not None:
            _all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def _all_reduce(x: torch.Tensor) -> None:
    dist.all_reduce(x, group=TPGroup.group)


def _gather_seq(x: torch.Tensor) -> torch.Tensor:
    """All-gather of the sequence shards ([b, t/tp, h] -> [b, t, h]); the rows are laid out rank-major, which
    for b > 1 orders them differently from Megatron's [t, b, h] but moves and computes the same bytes."""
    g = TPGroup.group
    n = dist.get_world_size(g)
    b, t, h = x.shape
    out = x.new_empty(b * t * n, h)
    dist.all_gather_into_tensor(out, x.reshape(b * t, h).contiguous(), group=g)
    return out.view(b, t * n, h)


def _scatter_seq(x: torch.Tensor) -> torch.Tensor:
    """Reduce-scatter over the sequence ([b, t, h] partial sums -> [b, t/tp, h] reduced shard)."""
    g = TPGroup.group
    n = dist.get_world_size(g)
    b, t, h = x.shape
    out = x.new_empty(b * t // n, h)
    dist.reduce_scatter_tensor(out, x.reshape(b * t, h).contiguous(), group=g)
    return out.view(b, t // n, h)


# compiled dry runs: the collectives run eagerly between the compiled regions (the capture's c10d wrappers
# are not traceable by Dynamo)
_all_reduce = torch._dynamo.disable(_all_reduce)
_gather_seq = torch._dynamo.disable(_gather_seq)
_scatter_seq = torch._dynamo.disable(_scatter_seq)


class _GatherFromSP(torch.autograd.Function):
    """Sequence parallelism: all-gather forward, reduce-scatter of the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return _gather_seq(x)

    @staticmethod
    def backward(ctx, g):
        return _scatter_seq(g)


class _ScatterToSP(torch.autograd.Function):
    """Sequence parallelism: reduce-scatter forward, all-gather of the gradient backward."""

    @staticmethod
    def forward(ctx, x):
        return _scatter_seq(x)

    @staticmethod
    def backward(ctx, g):
        return _gather_seq(g)


class _ScatterToSPIn(torch.autograd.Function):
    """``_ScatterToSP`` with the reduce-scatter in ``reduce_dtype`` (NxD's ``RowParallelLinear(reduce_dtype=
    torch.float32)``: the partial sums cast up, reduce-scattered, cast back)."""

    @staticmethod
    def forward(ctx, x, reduce_dtype):
        return _scatter_seq(_fused_cast(x, reduce_dtype)).to(x.dtype)

    @staticmethod
    def backward(ctx, g):
        return _gather_seq(g), None


class _ColumnSP(torch.autograd.Function):
    """A column-parallel linear under sequence parallelism as Megatron and NxD write it
    (``LinearWithGradAccumulationAndAsyncCommunication`` / ``LinearWithAsyncCommunication``): all-gather the
    sequence shards forward, saving only the shard; in the backward all-gather them again for the weight
    gradient, and reduce-scatter the input gradient (in ``reduce_dtype`` when set: NxD 2.24's FP32 default)."""

    @staticmethod
    def forward(ctx, x, weight, bias, reduce_dtype):
        ctx.save_for_backward(x, weight)
        ctx.has_bias, ctx.reduce_dtype = bias is not None, reduce_dtype
        y = F.linear(_gather_seq(x), weight, bias)   # under autocast: in its dtype
        ctx.dtype = y.dtype
        return y

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        dt = ctx.dtype                          # the forward's matmul dtype (autocast's casts, as autograd's)
        total = _gather_seq(x)                  # the re-gather (Megatron: overlapped with the dgrad matmul)
        g = g.to(dt)
        gi = g.matmul(w.to(dt))
        gw = g.reshape(-1, g.shape[-1]).t().matmul(total.reshape(-1, total.shape[-1]).to(dt))
        gb = g.sum(dim=(0, 1)) if ctx.has_bias else None
        return _scatter_seq(_fused_cast(gi, ctx.reduce_dtype or gi.dtype)).to(x.dtype), gw, gb, None


class _GatherFromSPRe(torch.autograd.Function):
    """``_ColumnSP``'s collectives without its matmuls, for compiled dry runs: the capture's c10d calls are not
    traceable, so Dynamo runs this Function eagerly between the compiled regions and the linear stays in the
    compiled graph. Forward: all-gather of the sequence shards (saving only the shard); backward: the same
    re-gather of the input for the weight gradient (the graph's wgrad matmul reads the gathered input it
    saved, so the re-gathered copy only prices the collective) and the reduce-scatter of the input gradient
    in ``reduce_dtype`` when set, else in the matmul's dtype (under autocast its dtype, as ``_ColumnSP``'s dgrad
    matmul writes it; the graph hands back the gradient in the input's dtype). Same collectives by kind, dtype
    and bytes as ``_ColumnSP``; the re-gather runs after the graph's wgrad matmul instead of before it."""

    @staticmethod
    def forward(ctx, x, reduce_dtype):
        ctx.save_for_backward(x)
        amp = torch.is_autocast_enabled("cpu") and x.is_floating_point()
        ctx.reduce_dtype = reduce_dtype or (torch.get_autocast_dtype("cpu") if amp else None)
        return _gather_seq(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        _gather_seq(x)                          # the re-gather for the weight gradient
        rs = _scatter_seq(_fused_cast(g, ctx.reduce_dtype or g.dtype))
        return (rs if rs.dtype == x.dtype else rs.to(x.dtype)), None


def _fused_cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` (a matmul's output) in ``dtype`` with no cast op of its own: the compiled graph writes the matmul's
    FP32 PSUM result in ``dtype`` on its evacuation (MODEL: the extra store bytes of a wider dtype are not
    priced). Values are not kept (dry runs are on fake tensors)."""
    return x if x.dtype == dtype else torch.empty(x.shape, dtype=dtype, device=x.device)


def column(x: torch.Tensor, lin: nn.Linear, c: TransformerConfig) -> torch.Tensor:
    """``lin`` (column-parallel) of ``x``: under sequence parallelism ``_ColumnSP`` (the shards gathered in the
    forward and again in the backward), else the input marked for the backward all-reduce (TP > 1)."""
    if TPGroup.group is None:
        return lin(x)
    if not c.sp:
        return lin(_CopyToTP.apply(x))
    if torch.compiler.is_compiling():   # --compiled: the collectives between the compiled regions, the matmuls
        return lin(_GatherFromSPRe.apply(x, _dtype(c.tp_reduce_dtype)))   # in them (``_GatherFromSPRe``)
    return _ColumnSP.apply(x, lin.weight, lin.bias, _dtype(c.tp_reduce_dtype))


def _dtype(name: str) -> torch.dtype | None:
    return getattr(torch, name) if name else None


def _enter(x: torch.Tensor, sp: bool) -> torch.Tensor:
    """Into a column-parallel projection: gather the sequence shards (SP) or mark the backward all-reduce."""
    if TPGroup.group is None:
        return x
    return _GatherFromSP.apply(x) if sp else _CopyToTP.apply(x)


def _leave(x: torch.Tensor, c: TransformerConfig) -> torch.Tensor:
    """Out of a row-parallel projection: reduce-scatter (SP, in ``c.tp_reduce_dtype`` when set) or all-reduce
    the partial sums."""
    if TPGroup.group is None:
        return x
    if not c.sp:
        return _ReduceFromTP.apply(x)
    return _ScatterToSPIn.apply(x, _dtype(c.tp_reduce_dtype)) if c.tp_reduce_dtype else _ScatterToSP.apply(x)


@dataclass(frozen=True)
class TransformerConfig:
    """One transformer layer stack as published (full model sizes; ``tp`` divides them per rank)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    kv_heads: int = 0          # 0 = heads (multi-head attention)
    norm: str = "layer"        # "layer" or "rms"
    mlp: str = "gelu"          # "gelu" or "swiglu"
    causal: bool = True
    bias: bool = True
    tp: int = 1
    sp: bool = False           # sequence parallelism (Megatron / NxD): norms and residuals on t/tp rows
    dropout: float = 0.0       # hidden dropout (after each sublayer, before the residual add) while training
    attention: str = "fused"   # "fused": one flash-style kernel (scaled_dot_product_attention, as NxD's and
    # Megatron's attention); "eager": HF transformers' eager self-attention, separate ops over the score tensor
    # (matmul q k^T, / sqrt(d), + padding mask, softmax, dropout, matmul with v), see ``Attention.eager``
    attn_dropout: float = 0.0  # dropout of the attention probabilities ("eager" only: the fused kernel has none)
    pad_mask: bool = False     # "eager": the scores get the additive padding mask (HF's extended attention mask)
    softmax_dtype: str = ""    # "eager": the dtype the softmax computes in ("": the scores'; NxD 2.16's
    # CoreAttention: ``softmax(dtype=torch.double).to(q.dtype)``, FP32 on the device under XLA_DOWNCAST_BF16)
    tp_reduce_dtype: str = ""  # dtype of the sequence-parallel reduce-scatters ("": the activations'; NxD 2.24:
    # "float32", ``RowParallelLinear`` / ``ColumnParallelLinear(reduce_dtype=torch.float32)``)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def _norm(c: TransformerConfig) -> nn.Module:
    return nn.LayerNorm(c.hidden) if c.norm == "layer" else nn.RMSNorm(c.hidden)


class Attention(nn.Module):
    """Self-attention of one TP rank: the fused, flash-style kernel (scaled_dot_product_attention) or HF's eager
    attention (``TransformerConfig.attention``)."""

    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.c = c
        self.heads = c.heads // c.tp
        self.kv = max((c.kv_heads or c.heads) // c.tp, 1)
        d = c.head_dim
        self.qkv = nn.Linear(c.hidden, (self.heads + 2 * self.kv) * d, bias=c.bias)
        self.out = nn.Linear(self.heads * d, c.hidden, bias=c.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d = self.c.head_dim
        qkv = column(x, self.qkv, self.c)
        b, t, _ = qkv.shape
        q, k, v = qkv.split([self.heads * d, self.kv * d, self.kv * d], dim=-1)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k, v = (y.view(b, t, self.kv, d).transpose(1, 2) for y in (k, v))
        y = self.core(q, k, v)
        return _leave(self.out(y.transpose(1, 2).reshape(b, t, -1)), self.c)


    def core(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(q k^T / sqrt(d)) v (recomputed in the backward under selective recompute)."""
        if self.c.attention == "eager":
            return self.eager(q, k, v)
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.c.causal, enable_gqa=self.kv != self.heads)

    def eager(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """HF transformers' eager self-attention (``BertSelfAttention`` / ``ViTSelfAttention`` before SDPA):
        every step a separate op over the [batch, heads, tokens, tokens] scores."""
        if self.kv != self.heads:
            k, v = (y.repeat_interleave(self.heads // self.kv, dim=1) for y in (k, v))
        s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.c.head_dim)
        t = s.shape[-1]
        if self.c.causal:
            s = s.masked_fill(torch.ones(t, t, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
        if self.c.pad_mask:   # HF's extended mask: (1 - mask) * dtype-min, one row per sequence
            s = s + s.new_zeros(s.shape[0], 1, 1, t)
        sd = _dtype(self.c.softmax_dtype)
        p = F.softmax(s, dim=-1, dtype=sd).to(s.dtype) if sd is not None and sd != s.dtype else F.softmax(s, dim=-1)
        if self.c.attn_dropout > 0:
            p = F.dropout(p, self.c.attn_dropout, self.training)
        return torch.matmul(p, v)


class MLP(nn.Module):
    """Feed-forward of one TP rank: GELU (BERT, GPT, ViT) or SwiGLU (Llama)."""

    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        f = c.ffn // c.tp
        self.c = c
        self.swiglu = c.mlp == "swiglu"
        self.up = nn.Linear(c.hidden, 2 * f if self.swiglu else f, bias=c.bias)
        self.down = nn.Linear(f, c.hidden, bias=c.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = column(x, self.up, self.c)
        if self.swiglu:
            g, u = h.chunk(2, dim=-1)
            h = F.silu(g) * u
        else:
            h = F.gelu(h)
        return _leave(self.down(h), self.c)


class Block(nn.Module):
    """A pre-norm transformer layer (BERT's post-norm costs the same ops in another order)."""

    def __init__(self, c: TransformerConfig) -> None:
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = _norm(c), Attention(c), _norm(c), MLP(c)
        self.p = c.dropout

    def _drop(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, self.p, self.training) if self.p > 0 else x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self._drop(self.attn(self.ln1(x)))
        return x + self._drop(self.mlp(self.ln2(x)))
