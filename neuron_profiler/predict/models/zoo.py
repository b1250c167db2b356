"""The built-in models of ``neuron-profile predict``, parameterised by their published configurations.

Each is a stack of identical transformer layers (``layers.Block``) between an input stage (token or patch
embedding) and an output stage (language-model, masked-LM or classification head); ``Stage`` builds the part
of it that one pipeline stage of one tensor-parallel rank holds. Sources of the configurations:
- ``vit-base``: HF ``google/vit-base-patch16-224`` (hidden 768, 12 layers, 12 heads, MLP 3072, patch 16, 224x224).
- ``bert-large``: HF ``bert-large-uncased`` (hidden 1024, 24 layers, 16 heads, FFN 4096, vocab 30522); the
  pretraining heads (masked-LM transform + decoder over every position, next-sentence classifier); hidden
  dropout 0.1 (``hidden_dropout_prob`` of the BertConfig the Neuron BERT pretraining tutorial prints, aws-neuron-sdk
  archive/nxd-training/bert.rst). GPT-3 23B: hidden dropout 0.1 (``test.sh`` ``model.hidden_dropout=0.1``). ViT
  (``hidden_dropout_prob`` 0.0) and Llama (no hidden dropout) train without.
- Attention: ViT-Base and BERT-Large run HF transformers' eager self-attention (``attention="eager"``: matmul,
  scale, mask, softmax, dropout, matmul as separate ops), as the Neuron recipes run them: the ViT notebook of
  SDK 2.16 pins transformers 4.28.1 (aws-neuron-samples ``hf_image_classification/vit.ipynb``, 2023-12), which
  predates SDPA in transformers (4.36, huggingface/transformers#28005; BERT's in #28802, ViT's after it); BERT's
  pretraining script (``dp_bert_hf_pretrain``, transformers 4.44) passes ``attention_mask`` (the additive
  padding mask) and, on an XLA device, SDPA has no fused kernel: it runs as ``_scaled_dot_product_attention_math``,
  the same separate ops (pytorch/pytorch#108180). BERT's ``attention_probs_dropout_prob`` 0.1 is priced; ViT's
  is 0.0. GPT-3 23B and Llama-2-70B (C3, C5: SDK 2.16) run eager core attention too, recomputed in the
  backward (selective recompute): neuronx-nemo-megatron 89680bb (the tree of SDK 2.16) ``transformer.py``
  ``CoreAttention`` (baddbmm, scale, causal mask, softmax, dropout ``attention_dropout`` 0.1 of
  ``megatron_gpt_config.yaml``, bmm; ``masked_softmax_fusion: False``; no flash / NKI kernel in that tree;
  "Region where selective activation recomputation is applied") and neuronx-distributed a80091d (SDK 2.16)
  ``modeling_llama_nxd.py`` ``CoreAttention`` (matmul / sqrt(d), ``triu`` causal mask, ``softmax(dtype=
  torch.double)``, i.e. FP32 under XLA_DOWNCAST_BF16, matmul; no flash kernel before later NxD releases),
  checkpointed by ``activation_checkpoint_config=CoreAttention`` (``run_llama_70b_tp_pp.sh``
  ``--use_selective_checkpoint 1``). Llama-3.1-8B (C4, NxD 2.24) keeps the fused kernel (``nki_flash_attn_func``,
  ``USE_FLASH_ATTENTION=1``).
- ``gpt3-23b``: aws-neuron/neuronx-nemo-megatron ``gpt_23b.sh`` + ``test.sh`` (hidden 8192, 28 layers, 64 heads,
  FFN 4 x hidden, GPT-2 vocabulary 50257, LayerNorm, GELU, learned positions, selective recompute).
- ``llama3.1-8b``: Meta Llama-3.1-8B ``config.json`` (hidden 4096, 32 layers, 32 heads, 8 KV heads, FFN 14336,
  vocab 128256, RMSNorm, SwiGLU, no biases).
- ``llama2-70b``: Meta Llama-2-70B ``config.json`` (hidden 8192, 80 layers, 64 heads, 8 KV heads, FFN 28672,
  vocab 32000).
- ``tiny-gpt``: a 4-layer decoder for tests and CI (not a published model).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from neuron_profiler.predict.models.layers import Block, TransformerConfig, _enter, column

__all__ = ["ModelSpec", "MODELS", "Stage", "get_model"]


@dataclass(frozen=True)
class ModelSpec:
    """A model: its layer stack, its input and output ends, and the sequence it trains on."""

    name: str
    layers: TransformerConfig
    seq: int
    vocab: int = 0               # token models; 0 for images
    input: str = "tokens"        # "tokens" or "patches"
    head: str = "lm"             # "lm", "mlm" (BERT pretraining heads) or "classify"
    positions: bool = False      # learned absolute position embeddings
    image: int = 224
    patch: int = 16
    labels: int = 1000
    recompute: str = "none"      # activation recompute of the published recipe: none, selective, full
    grad_acc: str = ""           # dtype gradients accumulate and DP-reduce in ("": the parameters'; NxD 2.24's
    # use_fp32_grad_acc / higher_cc_precision: "float32")
    source: str = ""

    def with_tp(self, tp: int, sp: bool = False) -> ModelSpec:
        """The model as one rank of a ``tp``-way tensor-parallel group holds it (``sp``: sequence parallel)."""
        return dataclasses.replace(self, layers=dataclasses.replace(self.layers, tp=tp, sp=sp and tp > 1))


def _t(**kw) -> TransformerConfig:
    return TransformerConfig(**kw)


MODELS: dict[str, ModelSpec] = {m.name: m for m in (
    ModelSpec("vit-base", _t(hidden=768, layers=12, heads=12, ffn=3072, causal=False, attention="eager"), seq=197,
              input="patches", head="classify", labels=10, source="HF google/vit-base-patch16-224"),
    ModelSpec("bert-large", _t(hidden=1024, layers=24, heads=16, ffn=4096, causal=False, dropout=0.1,
                               attention="eager", attn_dropout=0.1, pad_mask=True), seq=128,
              vocab=30522, head="mlm", positions=True, source="HF bert-large-uncased"),
    ModelSpec("gpt3-23b", _t(hidden=8192, layers=28, heads=64, ffn=32768, dropout=0.1, attention="eager",
                             attn_dropout=0.1),
              seq=2048, vocab=50257, positions=True, recompute="selective",
              source="aws-neuron/neuronx-nemo-megatron gpt_23b.sh, test.sh; @89680bb (SDK 2.16) transformer.py "
                     "CoreAttention (eager, selective recompute), megatron_gpt_config.yaml attention_dropout 0.1"),
    ModelSpec("llama3.1-8b", _t(hidden=4096, layers=32, heads=32, kv_heads=8, ffn=14336, norm="rms", mlp="swiglu",
                                bias=False, tp_reduce_dtype="float32"), seq=8192, vocab=128256, grad_acc="float32",
              source="meta-llama/Llama-3.1-8B config.json; NxD 2.24 (aws-neuron/neuronx-distributed c9ee222) "
                     "parallel_layers/layers.py: Column/RowParallelLinear reduce_dtype=torch.float32 (the "
                     "sequence-parallel reduce-scatters in FP32); training_utils.py get_mixed_precision_config: "
                     "use_fp32_grad_acc, hence ZeRO-1 use_grad_acc_hook + higher_cc_precision (FP32 gradient "
                     "accumulation and reduce-scatter)"),
    ModelSpec("llama2-70b", _t(hidden=8192, layers=80, heads=64, kv_heads=8, ffn=28672, norm="rms", mlp="swiglu",
                               bias=False, attention="eager", softmax_dtype="float32"), seq=4096, vocab=32000,
              recompute="selective",
              source="meta-llama/Llama-2-70b-hf config.json; NxD a80091d (SDK 2.16) modeling_llama_nxd.py "
                     "CoreAttention (eager, causal mask, softmax in FP32) checkpointed by "
                     "activation_checkpoint_config=CoreAttention (run_llama_70b_tp_pp.sh "
                     "--use_selective_checkpoint 1)"),
    ModelSpec("tiny-gpt", _t(hidden=256, layers=4, heads=8, ffn=1024), seq=128, vocab=1024, positions=True,
              source="test model"),
)}


def get_model(name: str) -> ModelSpec:
    """The built-in model ``name``; ValueError listing the valid names."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; built-in models: {', '.join(MODELS)}") from None


class _Input(nn.Module):
    def __init__(self, m: ModelSpec) -> None:
        super().__init__()
        c, self.m = m.layers, m
        if m.input == "patches":
            self.proj = nn.Conv2d(3, c.hidden, m.patch, stride=m.patch)
            self.cls = nn.Parameter(torch.zeros(1, 1, c.hidden))
            self.pos = nn.Parameter(torch.zeros(1, m.seq, c.hidden))
        else:
            self.tok = nn.Embedding(m.vocab // c.tp, c.hidden)   # vocab-parallel (one shard)
            self.pos_emb = nn.Embedding(m.seq, c.hidden) if m.positions else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.m.input == "patches":
            h = self.proj(x).flatten(2).transpose(1, 2)
            return torch.cat([self.cls.expand(h.shape[0], -1, -1), h], dim=1) + self.pos
        h = self.tok(x.remainder(self.tok.num_embeddings))
        h = h + self.pos_emb.weight[: x.shape[1]] if self.pos_emb is not None else h
        p = self.m.layers.dropout   # BERT: dropout of the embeddings' output
        return F.dropout(h, p, self.training) if p > 0 else h


class _Output(nn.Module):
    def __init__(self, m: ModelSpec) -> None:
        super().__init__()
        c, self.m = m.layers, m
        self.norm = nn.LayerNorm(c.hidden) if c.norm == "layer" else nn.RMSNorm(c.hidden)
        if m.head == "classify":
            self.out = nn.Linear(c.hidden, m.labels)
        else:
            if m.head == "mlm":
                self.transform = nn.Sequential(nn.Linear(c.hidden, c.hidden), nn.GELU(), nn.LayerNorm(c.hidden))
                self.nsp = nn.Linear(c.hidden, 2)
            self.out = nn.Linear(c.hidden, m.vocab // c.tp, bias=m.head == "mlm")  # vocab-parallel

    def forward(self, h: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if self.m.head == "lm":   # vocab-parallel column-parallel head (NxD / Megatron), its shards re-gathered
            logits = column(self.norm(h), self.out, self.m.layers)
            return F.cross_entropy(logits.flatten(0, 1).float(), target.flatten() % logits.shape[-1])
        h = _enter(self.norm(h), self.m.layers.sp)
        if self.m.head == "classify":
            return F.cross_entropy(self.out(h[:, 0]).float(), target[:, 0] % self.m.labels)
        loss = torch.zeros((), device=h.device)
        if self.m.head == "mlm":
            loss = F.cross_entropy(self.nsp(h[:, 0]).float(), target[:, 0] % 2)
            h = self.transform(h)
        logits = self.out(h)
        return loss + F.cross_entropy(logits.flatten(0, 1).float(), target.flatten() % logits.shape[-1])


class Stage(nn.Module):
    """What one rank of pipeline stage ``first``/``last`` holds: the input end (first stage), ``n_layers``
    layers, the output end and loss (last stage). ``forward(x, target)``: token ids / images on the first
    stage, else the previous stage's activations; returns the loss on the last stage, else the activations."""

    def __init__(self, m: ModelSpec, n_layers: int, first: bool, last: bool, recompute: str = "none") -> None:
        super().__init__()
        self.inp = _Input(m) if first else None
        self.blocks = nn.ModuleList(Block(m.layers) for _ in range(n_layers))
        self.outp = _Output(m) if last else None
        self.recompute = recompute
        self.sp, self.tp = m.layers.sp, m.layers.tp
        if recompute == "selective":   # Megatron's selective recompute: the attention core only
            for b in self.blocks:
                attn = b.get_submodule("attn")
                attn.core = _checkpointed(attn.core)

    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        h = x
        if self.inp is not None:
            h = self.inp(x)
            if self.sp:   # the sequence-parallel region starts with this rank's slice of the sequence
                h = h[:, : h.shape[1] // self.tp]
        for b in self.blocks:
            h = checkpoint(b, h, use_reentrant=False) if self.recompute == "full" else b(h)
        return self.outp(h, target) if self.outp is not None else h


def _checkpointed(fn):
    def run(*args, **kw):
        return checkpoint(fn, *args, use_reentrant=False, **kw)
    return run
