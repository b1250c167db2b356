"""Dry runs of the distinct pipeline stages of a built-in model, extrapolated to the stage's layer count.

A stage is its input end (first stage), ``k`` identical layers and its output end (last stage). Each distinct
structure (first / middle / last; one when PP=1) is dry-run with 1 and with 2 layers; the second layer's cost
``T(2) - T(1)`` is the cost of every further layer, so ``T(k) = T(1) + (k - 1) (T(2) - T(1))``. This is exact
when the simulated cost of a layer does not depend on the layers around it (identical shapes, the in-order core
busy back to back); ``tests/neuron_profiler/test_predict_scaling.py`` checks it against a full dry run.
"""
from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist

from neuron_profiler.predict.config import Layout, PredictConfig
from neuron_profiler.predict.dryrun import StageRun, fake_group, run_stage
from neuron_profiler.predict.models.layers import TPGroup
from neuron_profiler.predict.models.zoo import ModelSpec, Stage
from neuron_profiler.predict.optim import make_optimizer

__all__ = ["StageCost", "stage_structures", "dry_run_stages"]


@dataclass
class StageCost:
    """One pipeline stage of one rank, per micro-step (ns, bytes), extrapolated to its ``layers``."""

    name: str                  # "whole" (PP=1), "first", "middle", "last"
    index: int                 # the stage index it stands for (the first with this structure)
    count: int                 # stages with this structure
    layers: int
    micro_ns: float            # device compute of forward + backward
    mm_ns: float               # of which matrix-multiply (Tensor engine) ops
    tp_comm_ns: float          # tensor-parallel collectives (synchronous: on the critical path)
    opt_ns: float              # optimizer step over all this rank's parameters (before ZeRO sharding)
    saved_bytes: float         # activations held per micro-step in flight
    params: float              # parameters of this rank
    traces: list
    unpriced: list
    mm_runs: list = dataclasses.field(default_factory=list)   # per dry run: (span, peak ns) of its matmul ops
    runs_layers: tuple = ()

    def mm_extra_ns(self, peak_fraction: float) -> float:
        """Time the matrix-multiply ops add when none may run faster than ``peak_fraction`` of the Tensor
        engine's peak: sum over ops of max(0, peak ns / fraction - simulated span), extrapolated to ``layers``."""
        if peak_fraction >= 1.0 or not self.mm_runs:
            return 0.0
        x = [float(np.maximum(0.0, r[:, 1] / peak_fraction - r[:, 0]).sum()) if len(r) else 0.0
             for r in self.mm_runs]
        return x[0] if len(x) == 1 else x[0] + (self.layers - 1) * (x[1] - x[0])


def stage_structures(pp: int) -> list[tuple[str, int, int, bool, bool]]:
    """(name, first stage index, count, is_first, is_last) of the distinct stage structures of a PP-way split."""
    if pp == 1:
        return [("whole", 0, 1, True, True)]
    out = [("first", 0, 1, True, False)]
    if pp > 2:
        out.append(("middle", 1, pp - 2, False, False))
    return out + [("last", pp - 1, 1, False, True)]


def _inputs(m: ModelSpec, mb: int, first: bool, sp: bool, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(input, target) of one micro-batch: token ids or images on the first stage, else the previous stage's
    activations in the residual stream's dtype (the weights' dtype: FP32 under autocast)."""
    t = m.seq // m.layers.tp if sp else m.seq
    tgt = torch.randint(0, max(m.vocab, m.labels), (mb, m.seq))
    if not first:
        return torch.randn(mb, t, m.layers.hidden, dtype=dtype, requires_grad=True), tgt
    if m.input == "patches":   # images in the weights' dtype (XLA_USE_BF16 casts the batch with the model)
        return torch.randn(mb, 3, m.image, m.image, dtype=dtype), tgt
    return torch.randint(0, m.vocab, (mb, m.seq)), tgt


@contextlib.contextmanager
def _precision(p: str) -> Iterator[None]:
    if p == "bf16-autocast":   # fp32: an FP32 model whose matmuls neuronx-cc casts on chip (auto_cast, below)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            yield
    else:
        yield


def _builder(m: ModelSpec, n: int, first: bool, last: bool, c: PredictConfig, lay: Layout, recompute: str):
    def build():
        dtype = torch.get_default_dtype()
        if c.precision == "bf16":
            torch.set_default_dtype(torch.bfloat16)
        try:
            st = Stage(m, n, first, last, recompute)
        finally:
            torch.set_default_dtype(dtype)
        x, tgt = _inputs(m, c.microbatch, first, lay.sp, torch.bfloat16 if c.precision == "bf16" else torch.float32)
        run = torch.compile(st, backend="neuron") if c.compiled else st

        def micro() -> None:
            with _precision(c.precision):
                y = run(x, tgt)
            y.backward(torch.ones_like(y) if y.dim() else None)
        return st, micro
    return build


def _one(m: ModelSpec, n: int, s: tuple, c: PredictConfig, lay: Layout, out: str, run_id: str) -> StageRun:
    name, index, _count, first, last = s
    rank = index * lay.dp * lay.tp
    with fake_group(rank, lay.world):
        TPGroup.group = dist.new_group(list(range(rank, rank + lay.tp))) if lay.tp > 1 else None
        try:
            rec = c.recompute or m.recompute
            return run_stage(_builder(m, n, first, last, c, lay, rec), lambda ps: make_optimizer(c.optimizer, ps),
                             out, lay.inst.target, run_id, num_cores=lay.inst.cores_per_chip,
                             accumulate=lay.accumulation > 1,
                             auto_cast="none" if c.precision == "fp32-strict" else "matmult",
                             grad_acc_dtype=m.grad_acc if c.precision == "bf16" else "")
        finally:
            TPGroup.group = None


def dry_run_stages(m: ModelSpec, c: PredictConfig, lay: Layout, scratch: str) -> list[StageCost]:
    """Dry-run every distinct stage structure of ``m`` (already sharded for TP) and extrapolate to its layers
    (``c.simulate_layers`` set: dry-run every layer of the stage instead)."""
    per_stage = m.layers.layers // lay.pp
    out = []
    for s in stage_structures(lay.pp):
        ns = (per_stage,) if c.simulate_layers or per_stage == 1 else (1, 2)
        runs = [_one(m, n, s, c, lay, scratch, f"{s[0]}_{n}") for n in ns]
        out.append(_extrapolate(s, runs, per_stage))
    return out


def _extrapolate(s: tuple, runs: list[StageRun], k: int) -> StageCost:
    def ext(attr: str) -> float:
        a = float(getattr(runs[0], attr))
        return a if len(runs) == 1 else a + (k - 1) * (float(getattr(runs[1], attr)) - a)
    name, index, count, _f, _l = s
    return StageCost(name, index, count, k, ext("micro_ns"), ext("mm_ns"), ext("tp_comm_ns"), ext("opt_ns"),
                     ext("saved_bytes"), ext("param_count"), [r.trace for r in runs],
                     sorted({u for r in runs for u in r.unpriced}), [r.mm_ops for r in runs])
