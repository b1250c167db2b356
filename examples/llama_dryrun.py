"""Dry-run profiling of a Llama-style decoder training step that does not fit on this machine.

One tensor-parallel rank (Megatron-style column/row parallel linears, an all-reduce after the attention
output and after the MLP, and their backward counterparts) runs under ``FakeTensorMode``: every op runs
with real shapes and dtypes (BF16 weights and activations, as the Trainium run would) but allocates nothing,
and a single-process "fake" process group stands in for the other ranks, so the collectives are recorded
with their real sizes. The captured window is then simulated on the target like any other.

    python examples/llama_dryrun.py                       # 7B, TP=8, seq 4096, microbatch 1 on trn2
    python examples/llama_dryrun.py --layers 2 --hidden 1024 --heads 8 --ffn 2816 --seq 512   # small

Prints where the trace went, the wall time, this process's peak memory and the projected step.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


@dataclass
class LlamaConfig:
    vocab: int = 32000
    hidden: int = 4096
    layers: int = 32
    heads: int = 32
    ffn: int = 11008
    seq: int = 4096
    batch: int = 1
    tp: int = 8


class _CopyToTP(torch.autograd.Function):
    """Identity forward; all-reduce of the input gradient across the tensor-parallel group backward."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        return x

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        dist.all_reduce(g)
        return g


class _ReduceFromTP(torch.autograd.Function):
    """All-reduce of the partial sums forward; identity backward."""

    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        dist.all_reduce(x)
        return x

    @staticmethod
    def backward(ctx, g):  # type: ignore[override]
        return g


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight)


class Attention(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.heads = c.heads // c.tp
        self.head_dim = c.hidden // c.heads
        self.qkv = nn.Linear(c.hidden, 3 * self.heads * self.head_dim, bias=False)   # column parallel
        self.out = nn.Linear(self.heads * self.head_dim, c.hidden, bias=False)        # row parallel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(_CopyToTP.apply(x)).split(self.heads * self.head_dim, dim=-1)
        q, k, v = (y.view(b, t, self.heads, self.head_dim).transpose(1, 2) for y in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return _ReduceFromTP.apply(self.out(y.transpose(1, 2).reshape(b, t, -1)))


class MLP(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        f = c.ffn // c.tp
        self.gate_up = nn.Linear(c.hidden, 2 * f, bias=False)  # column parallel
        self.down = nn.Linear(f, c.hidden, bias=False)          # row parallel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g, u = self.gate_up(_CopyToTP.apply(x)).chunk(2, dim=-1)
        return _ReduceFromTP.apply(self.down(F.silu(g) * u))


class Block(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.ln1, self.attn, self.ln2, self.mlp = RMSNorm(c.hidden), Attention(c), RMSNorm(c.hidden), MLP(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Llama(nn.Module):
    def __init__(self, c: LlamaConfig) -> None:
        super().__init__()
        self.embed = nn.Embedding(c.vocab, c.hidden)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = RMSNorm(c.hidden)
        self.head = nn.Linear(c.hidden, c.vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def fake_process_group(world_size: int, rank: int = 0) -> None:
    """A single-process stand-in for a ``world_size``-rank group: collectives are recorded, not run."""
    from torch.testing._internal.distributed.fake_pg import FakeStore
    if not dist.is_initialized():
        dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world_size)


def dry_run_step(c: LlamaConfig, out_dir: str, target: str = "trn2") -> Path:
    """Profile one training step of one TP rank under FakeTensorMode; returns the trace path."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    import neuron_profiler
    fake_process_group(c.tp)
    dtype = torch.get_default_dtype()
    with FakeTensorMode():
        torch.set_default_dtype(torch.bfloat16)  # weights created in BF16 (a fake module cannot be .to()-ed)
        try:
            model = Llama(c)
        finally:
            torch.set_default_dtype(dtype)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=True)
        idx = torch.randint(0, c.vocab, (c.batch, c.seq))
        tgt = torch.randint(0, c.vocab, (c.batch, c.seq))
        with neuron_profiler.profile(profile_output_dir=out_dir, run_id="llama_dryrun", target=target,
                                     runtime="simulated", with_modules=False,
                                     schedule=torch.profiler.schedule(wait=0, warmup=0, active=1)) as p:
            loss = model(idx, tgt)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            p.step()
    return p.neuron_profiler.paths[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for k, v in vars(LlamaConfig()).items():
        ap.add_argument(f"--{k}", type=int, default=v)
    ap.add_argument("--target", default="trn2")
    ap.add_argument("-o", "--output-dir", default=None)
    a = ap.parse_args(argv)
    c = LlamaConfig(**{k: getattr(a, k) for k in vars(LlamaConfig())})
    out = a.output_dir or tempfile.mkdtemp(prefix="llama_dryrun_")
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    t = time.perf_counter()
    path = dry_run_step(c, out, a.target)
    wall = time.perf_counter() - t
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20
    import analysis
    s = analysis.load(path).summary()
    d = dict(zip(s["metric"], s["value"]))
    params = (c.vocab * c.hidden * 2 + c.layers * (4 * c.hidden * c.hidden + 3 * c.hidden * c.ffn)) / 1e9
    print(f"{path}\n{params:.1f}B-parameter decoder, TP={c.tp}, seq {c.seq} x {c.batch}: wall {wall:.1f} s, "
          f"peak RSS {rss:.2f} GiB; projected step {d.get('step_time_mean_ns', float('nan')) / 1e6:.1f} ms on "
          f"{a.target}, MFU {d.get('mfu_estimated_percent', float('nan')):.1f} %")


if __name__ == "__main__":
    main()
