"""A custom model for ``neuron-profile predict``: a stage builder taking a ``StageContext``.

    neuron-profile predict examples/predict_custom.py:make_stage --tp 4 --microbatch 8 --global-batch 256

Builds one tensor-parallel rank of a 4-layer MLP-mixer-like stack (column- then row-parallel linears, the
partial sums all-reduced on ``ctx.tp_group``); ``flops_per_sample`` lets predict report MFU.
"""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

HIDDEN, FFN, TOKENS, LAYERS = 1024, 4096, 512, 4


class _AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group):
        if group is not None:
            dist.all_reduce(x, group=group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, None


class Stack(nn.Module):
    def __init__(self, tp: int, group) -> None:
        super().__init__()
        self.group = group
        self.up = nn.ModuleList(nn.Linear(HIDDEN, FFN // tp) for _ in range(LAYERS))
        self.down = nn.ModuleList(nn.Linear(FFN // tp, HIDDEN) for _ in range(LAYERS))
        self.flops_per_sample = 6 * LAYERS * 2 * HIDDEN * FFN * TOKENS

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for up, down in zip(self.up, self.down):
            x = x + _AllReduce.apply(down(F.gelu(up(x))), self.group)
        return x


def make_stage(ctx):
    """One rank of the stack and its micro-step (forward + backward of ``ctx.microbatch`` samples)."""
    model = Stack(ctx.tp, ctx.tp_group)
    x = torch.randn(ctx.microbatch, TOKENS, HIDDEN)

    def micro() -> None:
        with ctx.autocast():
            loss = model(x).float().pow(2).mean()
        loss.backward()
    return model, micro
