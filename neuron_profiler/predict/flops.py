"""Model FLOPs and parameter counts of the built-in models (for MFU and the memory estimate), from their configs."""
from __future__ import annotations

from neuron_profiler.predict.models.zoo import ModelSpec

__all__ = ["layer_params", "model_params", "flops_per_sample"]


def layer_params(m: ModelSpec) -> int:
    """Parameters of one full (unsharded) layer: attention projections, MLP, norms (biases included)."""
    c = m.layers
    d = c.head_dim
    kv = c.kv_heads or c.heads
    attn = c.hidden * (c.heads + 2 * kv) * d + c.heads * d * c.hidden
    mlp = (3 if c.mlp == "swiglu" else 2) * c.hidden * c.ffn
    bias = ((c.heads + 2 * kv) * d + c.hidden + c.ffn * (2 if c.mlp == "swiglu" else 1) + c.hidden) if c.bias else 0
    return attn + mlp + bias + 4 * c.hidden


def model_params(m: ModelSpec) -> int:
    """Parameters of the whole model (embeddings and heads untied)."""
    c = m.layers
    ends = c.hidden * m.vocab * 2 if m.input == "tokens" else 3 * m.patch ** 2 * c.hidden + m.seq * c.hidden
    ends += m.seq * c.hidden if m.positions else 0
    ends += c.hidden * m.labels if m.head == "classify" else 0
    return c.layers * layer_params(m) + ends


def flops_per_sample(m: ModelSpec) -> float:
    """Training FLOPs of one sample without recompute (the MFU convention, Megatron/PaLM): 6 x matmul
    parameters x tokens + 12 x layers x hidden x seq^2 for attention scores and values (unmasked), plus the
    output projection (vocabulary or classes)."""
    c = m.layers
    out = m.vocab if m.input == "tokens" else 0
    dense = 6 * (c.layers * layer_params(m) + c.hidden * out) * m.seq
    attn = 12 * c.layers * c.hidden * m.seq * m.seq
    return float(dense + attn)
