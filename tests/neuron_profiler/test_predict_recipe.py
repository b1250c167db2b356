"""What a training step does besides forward and backward, as the dry run prices it: gradient accumulation into
``.grad``, hidden dropout of the published recipes, images in the weights' dtype under BF16, and the attention
each recipe runs (HF's eager attention for the HF rows, the fused kernel for NeMo / NxD)."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch
import torch.nn as nn

from neuron_profiler.hardware import Target
from neuron_profiler.predict.dryrun import fake_group, run_stage
from neuron_profiler.predict.models.zoo import MODELS, Stage
from neuron_profiler.trace import read_trace

H, T = 512, 256   # one Linear of H x H over T tokens


def _linear_stage():
    def build():
        m = nn.Linear(H, H)
        x = torch.randn(T, H)

        def micro():
            m(x).sum().backward()
        return m, micro
    return build


def _ops(path) -> list[str]:
    tf = read_trace(path)
    try:
        return tf.table("host_ops")["name"].astype(str).tolist()
    finally:
        tf.close()


@pytest.fixture(scope="module")
def linear_runs(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("acc"))
    with fake_group(0, 1):
        fresh = run_stage(_linear_stage(), lambda ps: torch.optim.SGD(ps, lr=0.1), out, Target.parse("trn1"),
                          "fresh", num_cores=2)
        acc = run_stage(_linear_stage(), lambda ps: torch.optim.SGD(ps, lr=0.1), out, Target.parse("trn1"),
                        "acc", num_cores=2, accumulate=True)
    return fresh, acc


def test_accumulating_micro_step_adds_into_every_gradient(linear_runs):
    """With accumulation the backward adds each new gradient into ``.grad`` (AccumulateGrad: one in-place add
    per parameter, weight and bias); without, it writes them: no add."""
    fresh, acc = linear_runs

    def backward_adds(ops: list[str]) -> list[bool]:
        """Per AccumulateGrad node of the micro-step: whether an in-place add runs in it."""
        ops = ops[:next(i for i, o in enumerate(ops) if o.startswith("Optimizer.step"))]
        starts = [i for i, o in enumerate(ops) if o == "torch::autograd::AccumulateGrad"] + [len(ops)]
        return ["aten::add_" in ops[a:b] for a, b in zip(starts, starts[1:])]
    assert backward_adds(_ops(acc.trace)) == [True, True]      # weight and bias
    assert backward_adds(_ops(fresh.trace)) == [False, False]
    assert acc.param_count == fresh.param_count == H * H + H


def test_accumulation_costs_at_least_its_bytes_at_the_dma_roof(linear_runs):
    """The adds read the old and the new FP32 gradient and write the sum: 12 bytes per parameter, no faster than
    a NeuronCore's DMA (272 GB/s on trn1); the rest of the micro-step is the same."""
    fresh, acc = linear_runs
    extra = acc.micro_ns - fresh.micro_ns
    floor = 12 * (H * H + H) / 272e9 * 1e9
    assert extra >= floor * 0.999
    assert acc.mm_ns == pytest.approx(fresh.mm_ns, rel=0.05)   # same matmuls (placement follows host timing)


def test_published_dropout_of_the_built_in_models():
    """BERT-Large and GPT-3 23B train with hidden dropout 0.1 (the recipes' configs), ViT and Llama without."""
    assert MODELS["bert-large"].layers.dropout == MODELS["gpt3-23b"].layers.dropout == 0.1
    assert MODELS["vit-base"].layers.dropout == MODELS["llama3.1-8b"].layers.dropout == 0.0


def test_dropout_runs_in_training_only():
    """Three per layer (the attention probabilities, after attention, after the MLP) plus one on the embeddings,
    in train mode; none in eval mode."""
    m = MODELS["bert-large"]
    m = dataclasses.replace(m, layers=dataclasses.replace(m.layers, hidden=64, heads=4, ffn=128), vocab=100, seq=16)
    st = Stage(m, 2, True, False)
    x = torch.randint(0, 100, (2, 16))
    calls = []
    orig = torch.nn.functional.dropout

    def spy(t, p=0.5, training=True, inplace=False):
        calls.append((p, training))
        return orig(t, p, training, inplace)
    torch.nn.functional.dropout = spy
    try:
        st.train()
        st(x, x)
        assert calls == [(0.1, True)] * (1 + 3 * 2)
        calls.clear()
        st.eval()
        st(x, x)
        assert all(not tr for _, tr in calls)
    finally:
        torch.nn.functional.dropout = orig


def test_bf16_images_match_the_weights(tmp_path):
    """--precision bf16 on ViT: the batch is BF16 like the weights (the conv refused FP32 images before)."""
    from neuron_profiler.predict.config import PredictConfig, layout
    from neuron_profiler.predict.stages import _inputs
    m = MODELS["vit-base"]
    x, _ = _inputs(m, 2, True, False, torch.bfloat16)
    assert x.dtype == torch.bfloat16 and tuple(x.shape) == (2, 3, 224, 224)
    assert np.isclose(layout(PredictConfig(model="vit-base", precision="bf16"), 12, 12).dp, 32)


def _small(name: str, **layers):
    m = MODELS[name]
    return dataclasses.replace(m, layers=dataclasses.replace(m.layers, **layers))


@pytest.mark.parametrize("causal,kv_heads", [(False, 0), (True, 0), (True, 2)])
def test_eager_attention_computes_what_the_fused_kernel_does(causal, kv_heads):
    """HF's eager attention (matmul, scale, mask, softmax, matmul) against torch's SDPA on real tensors: same
    output, bidirectional, causal and grouped-query."""
    from neuron_profiler.predict.models.layers import Attention, TransformerConfig
    torch.manual_seed(0)
    c = TransformerConfig(hidden=64, layers=1, heads=4, ffn=128, kv_heads=kv_heads, causal=causal)
    a = Attention(c).eval()
    q = torch.randn(2, 4, 10, 16)
    k, v = (torch.randn(2, kv_heads or 4, 10, 16) for _ in range(2))
    fused = a.core(q, k, v)
    a.c = TransformerConfig(hidden=64, layers=1, heads=4, ffn=128, kv_heads=kv_heads, causal=causal, attention="eager",
                            pad_mask=True, attn_dropout=0.1)
    torch.testing.assert_close(a.core(q, k, v), fused, rtol=1e-5, atol=1e-5)


def test_eager_softmax_in_fp32_of_bf16_scores():
    """NxD 2.16's CoreAttention (``softmax_dtype="float32"``): BF16 scores, the softmax computed in FP32 and cast
    back: a softmax op with an FP32 output is dispatched, and the result matches an FP32 reference to BF16
    precision."""
    from neuron_profiler.predict.models.layers import Attention, TransformerConfig
    torch.manual_seed(0)
    c = TransformerConfig(hidden=64, layers=1, heads=4, ffn=128, attention="eager", softmax_dtype="float32")
    a = Attention(c).eval()
    q, k, v = (torch.randn(1, 4, 12, 16) for _ in range(3))
    seen: list[torch.dtype] = []

    class Log(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func is torch.ops.aten._softmax.default:
                seen.append(out.dtype)
            return out
    with Log():
        y = a.core(*(x.bfloat16() for x in (q, k, v)))
    assert y.dtype == torch.bfloat16 and seen == [torch.float32]
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(y.float(), ref, rtol=3e-2, atol=3e-2)


def test_attention_of_the_built_in_models():
    """The HF recipes (ViT-Base, BERT-Large) run HF's eager attention, BERT with its attention-probability
    dropout 0.1 and padding mask; SDK 2.16's NeMo Megatron (GPT-3 23B, probability dropout 0.1) and NxD
    (Llama-2-70B, softmax in FP32) their eager core attention, recomputed; NxD 2.24's Llama-3.1-8B the fused
    kernel."""
    assert MODELS["vit-base"].layers.attention == MODELS["bert-large"].layers.attention == "eager"
    assert (MODELS["bert-large"].layers.attn_dropout, MODELS["vit-base"].layers.attn_dropout) == (0.1, 0.0)
    assert MODELS["bert-large"].layers.pad_mask and not MODELS["vit-base"].layers.pad_mask
    assert MODELS["gpt3-23b"].layers.attention == MODELS["llama2-70b"].layers.attention == "eager"
    assert MODELS["llama3.1-8b"].layers.attention == "fused"
    assert (MODELS["gpt3-23b"].layers.attn_dropout, MODELS["llama2-70b"].layers.softmax_dtype) == (0.1, "float32")
    assert MODELS["gpt3-23b"].recompute == MODELS["llama2-70b"].recompute == "selective"
    from neuron_profiler.predict.config import predict_table
    stated = predict_table()["framework"]["attention"]["value"]   # what the trace header tells the user
    kinds = dict(part.split(": ") for part in stated.split("; "))
    assert {n: k for k, names in kinds.items() for n in names.split(", ")} == {
        n: m.layers.attention for n, m in MODELS.items()}


@pytest.mark.parametrize("name", ["vit-base", "llama3.1-8b"])
def test_dry_run_records_the_recipes_attention(name, tmp_path):
    """One layer of each, dry-run: ViT's eager attention records two batched matmuls and a softmax over the
    [batch, heads, tokens, tokens] scores forward (and their backward), no fused kernel; Llama's the fused
    kernel and no softmax."""
    m = _small(name, hidden=128, heads=2, kv_heads=0, ffn=256)
    m = dataclasses.replace(m, seq=64 if name != "vit-base" else m.seq, vocab=512 if m.vocab else 0)
    x = (torch.randn(2, 3, m.image, m.image) if m.input == "patches" else torch.randint(0, 512, (2, m.seq)))
    y = torch.randint(0, 10, (2, m.seq))

    def build():
        st = Stage(m, 1, True, True)
        return st, lambda: st(x, y).backward()
    with fake_group(0, 1):
        r = run_stage(build, lambda ps: torch.optim.SGD(ps, lr=0.1), str(tmp_path), Target.parse("trn1"), "attn",
                      num_cores=2)
    ops = _ops(r.trace)
    ops = ops[:next(i for i, o in enumerate(ops) if o.startswith("Optimizer.step"))]
    fused = [o for o in ops if "scaled_dot_product" in o]
    if name == "vit-base":
        assert not fused
        n = ops.count("aten::_softmax")     # the fake-tensor dispatch may record an op at two levels
        assert n >= 1 and ops.count("aten::_softmax_backward_data") == n
        assert ops.count("aten::bmm") == 6 * n     # q k^T and p v forward, two gradients of each backward
        assert ops.count("aten::matmul") == 2 * ops.count("aten::softmax") >= 2   # HF: two torch.matmul
    else:
        assert fused
        assert "aten::_softmax" not in ops and "aten::bmm" not in ops



def test_fp32_dry_run_prices_matmuls_at_the_bf16_peak_with_no_cast_ops(tmp_path):
    """--precision fp32 (C2's recipe: an FP32 model, no torch.autocast, neuronx-cc's default --auto-cast
    matmult): the dry run dispatches no cast op, and its matmuls' FLOPs count at the BF16 peak (forward and
    weight gradient: 2 x 2 T H^2 FLOPs), a quarter of what --auto-cast none (fp32-strict) counts."""
    from neuron_profiler.hardware import raw_table
    from neuron_profiler.predict.stages import _precision
    with _precision("fp32"):
        assert not torch.is_autocast_enabled("cpu")
    peak = float(raw_table()["neuron"]["trn1"]["peak_flops_per_s"]["bfloat16"]["value"])
    ideal = 2 * 2 * T * H * H / peak * 1e9
    runs = {}
    with fake_group(0, 1):
        for ac in ("matmult", "none"):
            runs[ac] = run_stage(_linear_stage(), lambda ps: torch.optim.SGD(ps, lr=0.1), str(tmp_path),
                                 Target.parse("trn1"), ac, num_cores=2, auto_cast=ac)
    assert runs["matmult"].mm_ops[:, 1].sum() == pytest.approx(ideal, rel=1e-6)
    assert runs["none"].mm_ops[:, 1].sum() == pytest.approx(4 * ideal, rel=1e-3)
    assert runs["matmult"].mm_ns < runs["none"].mm_ns
    assert not [o for o in _ops(runs["matmult"].trace) if o in ("aten::_to_copy", "aten::copy_")]


def test_fp32_gradient_accumulation_adds_bf16_gradients_into_fp32_main_grads(tmp_path):
    """NxD's use_fp32_grad_acc (C4's recipe): with BF16 weights every micro-step adds its fresh BF16 gradient into
    an FP32 main_grad (one add_ per parameter, FP32 self and BF16 other: 10 bytes per parameter), never into
    the BF16 ``.grad`` (6 bytes per parameter)."""
    def bf16_stage():
        def build():
            m = nn.Linear(H, H, dtype=torch.bfloat16)
            x = torch.randn(T, H, dtype=torch.bfloat16)

            def micro():
                m(x).sum().backward()
            return m, micro
        return build
    runs = {}
    with fake_group(0, 1):
        for acc in ("", "float32"):
            runs[acc] = run_stage(bf16_stage(), lambda ps: torch.optim.SGD(ps, lr=0.1), str(tmp_path),
                                  Target.parse("trn1"), f"acc{acc}", num_cores=2, accumulate=True,
                                  grad_acc_dtype=acc)
    def adds(run) -> tuple[set[tuple], float]:
        """Input dtypes of the in-place adds of the micro-step (before the optimizer step), and their DMA bytes."""
        tf = read_trace(run.trace)
        try:
            h = tf.table("host_ops")
            names = h["name"].astype(str).to_numpy()
            cut = int(np.char.startswith(names.astype(str), "Optimizer.step").argmax())
            rows = [i for i in range(cut) if names[i] == "aten::add_"]
            kinds = {tuple(json.loads(str(h["input_dtypes"].iloc[i]))[:2]) for i in rows}
            d = tf.table("dma")
            moved = float(d["transfer_bytes"][d["framework_op"].isin(rows)].sum())
            return kinds, moved
        finally:
            tf.close()
    kinds, moved = adds(runs["float32"])
    assert kinds == {("float", "c10::BFloat16")}              # FP32 main_grad += BF16 grad
    assert moved == pytest.approx(10 * (H * H + H))          # reads 4 + 2, writes 4 bytes per parameter
    kinds, moved = adds(runs[""])
    assert kinds == {("c10::BFloat16", "c10::BFloat16")}      # BF16 .grad += BF16 grad
    assert moved == pytest.approx(6 * (H * H + H))
    assert runs["float32"].micro_ns > runs[""].micro_ns


def test_compiled_dry_run_of_a_recomputed_region_with_dropout(tmp_path):
    """torch.compile of a checkpointed region with dropout functionalizes its RNG into the higher-order op
    ``run_and_save_rng_state``; the capture's dispatch mode passes it through (GPT-3 23B's --compiled dry run:
    selective recompute + hidden dropout). The dry run completes and prices its matmuls."""
    from torch.utils.checkpoint import checkpoint

    def build():
        lin = nn.Linear(H, H)

        def f(x):
            return torch.nn.functional.dropout(lin(x), 0.1, True)

        def body(x):
            return checkpoint(f, x, use_reentrant=False).sum()
        run = torch.compile(body, backend="neuron")
        x = torch.randn(T, H, requires_grad=True)

        def micro():
            run(x).backward()
        return lin, micro
    with fake_group(0, 1):
        r = run_stage(build, lambda ps: torch.optim.SGD(ps, lr=0.1), str(tmp_path), Target.parse("trn1"), "ckpt",
                      num_cores=2)
    assert r.micro_ns > 0 and r.mm_ns > 0
