"""Tensor-parallel collectives of predict's built-in layers under sequence parallelism, counted by kind and dtype
against Megatron's / NxD's column- and row-parallel linears (the re-gather of the shards in the backward; NxD
2.24's FP32 reduce-scatters)."""
from __future__ import annotations

from collections import Counter

import pytest
import torch
import torch.distributed as dist

from neuron_profiler.compile.backend import neuron_backend
from neuron_profiler.predict.dryrun import fake_group
from neuron_profiler.predict.models.layers import Block, TPGroup, TransformerConfig

TP, B, T, H = 2, 1, 64, 32


def _collectives(reduce_dtype: str, compiled: bool = False) -> Counter:
    """(kind, dtype, numel) of every collective of one forward + backward of one SP layer, TP=2, BF16
    (``compiled``: through ``torch.compile(backend="neuron")``, as ``predict --compiled`` runs a stage)."""
    calls: Counter = Counter()
    ag, rs = dist.all_gather_into_tensor, dist.reduce_scatter_tensor

    def gather(out, x, group=None):
        calls["all_gather", x.dtype, out.numel()] += 1
        return ag(out, x, group=group)

    def scatter(out, x, group=None):
        calls["reduce_scatter", x.dtype, x.numel()] += 1
        return rs(out, x, group=group)
    c = TransformerConfig(hidden=H, layers=1, heads=4, ffn=4 * H, tp=TP, sp=True, tp_reduce_dtype=reduce_dtype)
    with fake_group(0, TP):
        TPGroup.group = dist.new_group([0, 1])
        try:
            torch.manual_seed(0)
            blk = Block(c).to(torch.bfloat16)
            x = torch.randn(B, T // TP, H, dtype=torch.bfloat16, requires_grad=True)
            run = torch.compile(blk, backend=neuron_backend) if compiled else blk
            dist.all_gather_into_tensor, dist.reduce_scatter_tensor = gather, scatter
            try:
                run(x).sum().backward()
            finally:
                dist.all_gather_into_tensor, dist.reduce_scatter_tensor = ag, rs
        finally:
            TPGroup.group = None
    return calls


def test_sequence_parallel_layer_regathers_its_inputs_in_the_backward():
    """Per layer: forward 2 all-gathers (into QKV and MLP-up) and 2 reduce-scatters (out of the attention output
    and MLP-down projections); backward the mirror images (2 reduce-scatters of the input gradients, 2 all-gathers
    of the output gradients) plus 2 re-gathers of the saved shards for the weight gradients: 6 all-gathers and
    4 reduce-scatters of the full [B, T, H] activations, all BF16."""
    full = B * T * H
    assert _collectives("") == Counter({("all_gather", torch.bfloat16, full): 6,
                                        ("reduce_scatter", torch.bfloat16, full): 4})


def test_nxd_reduce_dtype_makes_every_reduce_scatter_fp32():
    """NxD 2.24 (reduce_dtype=torch.float32): the 4 reduce-scatters carry FP32, twice the bytes; the all-gathers
    stay BF16."""
    full = B * T * H
    assert _collectives("float32") == Counter({("all_gather", torch.bfloat16, full): 6,
                                               ("reduce_scatter", torch.float32, full): 4})


@pytest.mark.slow
@pytest.mark.parametrize("reduce_dtype", ["", "float32"])
def test_compiled_stage_records_the_same_tp_collectives_as_the_eager_one(reduce_dtype):
    """A compiled dry run (Dynamo cannot trace the capture's c10d calls, so they run between the compiled
    regions) keeps the backward re-gather and the reduce-scatters' dtype: the same collectives by kind, dtype
    and size as the eager layer (6 all-gathers, 4 reduce-scatters)."""
    torch._dynamo.reset()
    try:
        compiled = _collectives(reduce_dtype, compiled=True)
    finally:
        torch._dynamo.reset()
    eager = _collectives(reduce_dtype)
    assert compiled == eager
    assert sum(n for (kind, _, _), n in eager.items() if kind == "all_gather") == 6


def test_the_fp32_reduce_scatter_adds_no_cast_op_of_the_full_activations():
    """The up-cast rides the matmul's PSUM evacuation: no copy of a [B, T, H] tensor to FP32 is dispatched
    (the cast back of the [B, T/TP, H] shard is)."""
    seen: list[tuple] = []

    class Log(torch.utils._python_dispatch.TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func in (torch.ops.aten._to_copy.default,) and isinstance(out, torch.Tensor):
                seen.append((out.dtype, out.numel()))
            return out
    with Log():
        _collectives("float32")
    assert (torch.float32, B * T * H) not in seen
    assert (torch.bfloat16, B * T // TP * H) in seen


def test_llama31_8b_spec_cites_nxd_reduce_dtype():
    from neuron_profiler.predict.models.zoo import get_model
    m = get_model("llama3.1-8b")
    assert m.layers.tp_reduce_dtype == "float32" and "reduce_dtype" in m.source
    assert get_model("llama2-70b").layers.tp_reduce_dtype == ""   # NxD 2.16 (C5): activations' dtype
