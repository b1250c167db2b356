"""Models and helpers of the dry-run pricing tests: a BERT-style encoder, a LAMB optimizer written with
``torch._foreach_*`` and as a for-loop, and a profiled step on real, meta or fake tensors."""
from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import neuron_profiler
from neuron_profiler.trace import read_trace


@dataclass
class BertConfig:
    vocab: int = 1024
    hidden: int = 256
    layers: int = 2
    heads: int = 4
    seq: int = 64
    batch: int = 4


class Layer(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        d = c.hidden
        self.heads = c.heads
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = (y.view(b, t, self.heads, d // self.heads).transpose(1, 2) for y in self.qkv(x).split(d, -1))
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, d)
        x = self.ln1(x + self.out(a))
        return self.ln2(x + self.down(F.gelu(self.up(x))))


class Bert(nn.Module):
    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        self.emb = nn.Embedding(c.vocab, c.hidden)
        self.layers = nn.ModuleList(Layer(c) for _ in range(c.layers))
        self.head = nn.Linear(c.hidden, c.vocab)

    def forward(self, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        for layer in self.layers:
            x = layer(x)
        return F.cross_entropy(self.head(x).flatten(0, 1), tgt.flatten())


class Decoder(nn.Module):
    """A Llama-style decoder layer stack (RMSNorm, causal attention, SwiGLU MLP), without tensor parallelism."""

    def __init__(self, c: BertConfig) -> None:
        super().__init__()
        d = c.hidden
        self.heads = c.heads
        self.emb = nn.Embedding(c.vocab, d)
        self.norms = nn.ParameterList(nn.Parameter(torch.ones(d)) for _ in range(2 * c.layers + 1))
        self.qkv = nn.ModuleList(nn.Linear(d, 3 * d, bias=False) for _ in range(c.layers))
        self.out = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(c.layers))
        self.up = nn.ModuleList(nn.Linear(d, 2 * 3 * d, bias=False) for _ in range(c.layers))
        self.down = nn.ModuleList(nn.Linear(3 * d, d, bias=False) for _ in range(c.layers))
        self.head = nn.Linear(d, c.vocab, bias=False)

    def forward(self, idx: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        b, t, d = x.shape
        for i in range(len(self.qkv)):
            h = F.rms_norm(x, (d,), self.norms[2 * i])
            q, k, v = (y.view(b, t, self.heads, -1).transpose(1, 2) for y in self.qkv[i](h).split(d, -1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.out[i](a)
            g, u = self.up[i](F.rms_norm(x, (d,), self.norms[2 * i + 1])).chunk(2, -1)
            x = x + self.down[i](F.silu(g) * u)
        logits = self.head(F.rms_norm(x, (d,), self.norms[-1]))
        return F.cross_entropy(logits.flatten(0, 1).float(), tgt.flatten())


class Lamb(torch.optim.Optimizer):
    """LAMB (You et al. 2019) without bias correction, with ``torch._foreach_*`` or a for-loop."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-6, wd: float = 0.01,
                 foreach: bool = True) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, wd=wd))
        self.foreach = foreach

    @torch.no_grad()
    def step(self) -> None:  # type: ignore[override]
        for g in self.param_groups:
            ps = [p for p in g["params"] if p.grad is not None]
            for p in ps:
                if not self.state[p]:
                    self.state[p].update(m=torch.zeros_like(p), v=torch.zeros_like(p))
            gs, ms, vs = [p.grad for p in ps], [self.state[p]["m"] for p in ps], [self.state[p]["v"] for p in ps]
            (b1, b2), eps, wd, lr = g["betas"], g["eps"], g["wd"], g["lr"]
            if self.foreach:
                torch._foreach_mul_(ms, b1)
                torch._foreach_add_(ms, gs, alpha=1 - b1)
                torch._foreach_mul_(vs, b2)
                torch._foreach_addcmul_(vs, gs, gs, value=1 - b2)
                den = torch._foreach_sqrt(vs)
                torch._foreach_add_(den, eps)
                upd = torch._foreach_div(ms, den)
                torch._foreach_add_(upd, ps, alpha=wd)
                ratio = torch._foreach_div(torch._foreach_norm(ps), torch._foreach_norm(upd))
                torch._foreach_mul_(upd, ratio)
                torch._foreach_add_(ps, upd, alpha=-lr)
                continue
            for p, gr, m, v in zip(ps, gs, ms, vs):
                m.mul_(b1).add_(gr, alpha=1 - b1)
                v.mul_(b2).addcmul_(gr, gr, value=1 - b2)
                u = m / v.sqrt().add_(eps)
                u.add_(p, alpha=wd)
                u.mul_(p.norm() / u.norm())
                p.add_(u, alpha=-lr)


def tensors_of(kind: str) -> contextlib.AbstractContextManager:
    """The context a dry run of ``kind`` ("meta", "fake" or "real") builds and runs its model in."""
    if kind == "fake":
        from torch._subclasses.fake_tensor import FakeTensorMode
        return FakeTensorMode()
    return torch.device("meta") if kind == "meta" else contextlib.nullcontext()


def profiled_step(out: Path, c: BertConfig, kind: str, make_opt: Callable, *, autocast: bool = True,
                  optimizer_only: bool = False, target: str = "trn1", compiled: bool = False,
                  model_cls: type = Bert, dtype: torch.dtype = torch.float32, step: bool = False):
    """One training step of ``model_cls(c)`` (weights in ``dtype``) on ``kind`` tensors, profiled on the
    simulated ``target``; with ``optimizer_only`` the window holds the optimizer step alone; with ``step`` it
    is one ``ProfilerStep`` (a schedule of one active step, ``p.step()`` after ``zero_grad``), so that
    ``analysis`` gives its step time. Returns the trace."""
    with tensors_of(kind):
        default = torch.get_default_dtype()
        torch.set_default_dtype(dtype)
        try:
            model = model_cls(c)
        finally:
            torch.set_default_dtype(default)
        opt = make_opt(model.parameters())
        run = torch.compile(model, backend="neuron") if compiled else model
        idx = torch.randint(0, c.vocab, (c.batch, c.seq))
        tgt = torch.randint(0, c.vocab, (c.batch, c.seq))
        cast = torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()

        def fwd_bwd() -> None:
            with cast:
                loss = run(idx, tgt)
            loss.backward()
        if optimizer_only:
            fwd_bwd()
        sched = dict(schedule=torch.profiler.schedule(wait=0, warmup=0, active=1)) if step else {}
        with neuron_profiler.profile(profile_output_dir=str(out), target=target, runtime="simulated",
                                     with_modules=False, **sched) as p:
            if not optimizer_only:
                fwd_bwd()
            opt.step()
            if step:
                opt.zero_grad(set_to_none=True)
                p.step()
    return read_trace(p.neuron_profiler.paths[0])


def device_time_ns(tf) -> int:
    """Length of the union of the device's instruction and DMA intervals (its busy time)."""
    iv = []
    for t in ("instructions", "dma"):
        d = tf.table(t)
        if len(d):
            s = d["start_ts"].to_numpy(np.int64)
            iv.append(np.stack([s, s + d["duration_ns"].to_numpy(np.int64)], 1))
    if not iv:
        return 0
    a = np.concatenate(iv)
    a = a[np.argsort(a[:, 0])]
    total, cur_s, cur_e = 0, a[0, 0], a[0, 1]
    for s, e in a[1:]:
        if s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return int(total + cur_e - cur_s)
