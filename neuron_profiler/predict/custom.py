"""Your own model in ``predict``: ``module:callable`` or ``path/to/file.py:callable``.

The callable gets a ``StageContext`` and returns ``(module, micro_step)``: the part of the model one rank of
pipeline stage ``ctx.stage`` holds (already sharded ``ctx.tp`` ways, its TP collectives on ``ctx.tp_group``),
and a function running forward and backward of one micro-batch of ``ctx.microbatch`` samples. It is called
under ``FakeTensorMode`` inside a fake process group, once per distinct stage structure (first / middle /
last), and its whole stage is dry-run (no layer extrapolation: predict cannot know your layers are identical).
Wrap the forward in ``ctx.autocast()`` to get the precision asked for. ``module.flops_per_sample`` (optional,
model FLOPs of one sample's training step for the whole model) lets predict report MFU.

    def make_stage(ctx):
        model = MyModel(hidden=4096 // ctx.tp)
        x = torch.randn(ctx.microbatch, 1024, 4096)
        def micro():
            with ctx.autocast():
                loss = model(x).sum()
            loss.backward()
        return model, micro
"""
from __future__ import annotations

import contextlib
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from neuron_profiler.predict.config import ConfigError, Layout, PredictConfig
from neuron_profiler.predict.dryrun import fake_group, run_stage
from neuron_profiler.predict.optim import make_optimizer
from neuron_profiler.predict.stages import StageCost, stage_structures

__all__ = ["StageContext", "is_custom", "load_callable", "dry_run_custom"]


@dataclass
class StageContext:
    """What a custom stage builder is told about the rank it builds."""

    tp: int
    pp: int
    dp: int
    stage: int
    first: bool
    last: bool
    microbatch: int
    precision: str
    sequence_parallel: bool
    tp_group: Any

    def autocast(self) -> contextlib.AbstractContextManager:
        """The precision's autocast (BF16 for bf16-autocast and for fp32, whose matmuls neuronx-cc casts)."""
        if self.precision in ("bf16-autocast", "fp32"):
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()


def is_custom(model: str) -> bool:
    """True for ``module:callable`` / ``file.py:callable`` (built-in names have no colon)."""
    return ":" in model


def load_callable(spec: str) -> Callable[[StageContext], tuple[torch.nn.Module, Callable[[], None]]]:
    """The callable ``spec`` names; ``ConfigError`` with one line when it cannot be loaded."""
    where, _, name = spec.rpartition(":")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ConfigError(f"model script {where!r} not found")
            s = importlib.util.spec_from_file_location(path.stem, path)
            if s is None or s.loader is None:
                raise ConfigError(f"cannot load {where!r} as a Python file")
            mod = importlib.util.module_from_spec(s)
            s.loader.exec_module(mod)
        else:
            mod = importlib.import_module(where)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's module failed to import: say so in one line
        raise ConfigError(f"cannot import {where!r}: {type(exc).__name__}: {exc}") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ConfigError(f"{where!r} has no callable {name!r}")
    return fn


def dry_run_custom(c: PredictConfig, lay: Layout, scratch: str) -> tuple[list[StageCost], float | None, float]:
    """Dry-run every distinct stage of the custom model; returns the stages, its FLOPs per sample (None when
    the module does not say) and the bytes of one pipeline send (``module.activation_bytes``, else 0)."""
    fn = load_callable(c.model)
    out, flops, act = [], None, 0.0
    for name, index, count, first, last in stage_structures(lay.pp):
        rank = index * lay.dp * lay.tp
        with fake_group(rank, lay.world):
            group = dist.new_group(list(range(rank, rank + lay.tp))) if lay.tp > 1 else None
            ctx = StageContext(lay.tp, lay.pp, lay.dp, index, first, last, c.microbatch, c.precision, lay.sp, group)
            holder: dict[str, Any] = {}

            def build(ctx: StageContext = ctx, holder: dict[str, Any] = holder
                      ) -> tuple[torch.nn.Module, Callable[[], None]]:
                module, micro = fn(ctx)
                holder["module"] = module
                return module, micro
            try:
                r = run_stage(build, lambda ps: make_optimizer(c.optimizer, ps), scratch, lay.inst.target,
                              f"{name}_custom", num_cores=lay.inst.cores_per_chip, accumulate=lay.accumulation > 1)
            except ConfigError:
                raise
            except Exception as exc:  # noqa: BLE001 - the user's stage failed: one line naming it
                raise ConfigError(f"{c.model} (stage {index}): {type(exc).__name__}: {exc}") from None
        flops = getattr(holder.get("module"), "flops_per_sample", flops)
        act = max(act, float(getattr(holder.get("module"), "activation_bytes", 0.0)))
        out.append(StageCost(name, index, count, 0, r.micro_ns, r.mm_ns, r.tp_comm_ns, r.opt_ns, r.saved_bytes,
                             r.param_count, [r.trace], r.unpriced, [r.mm_ops]))
    return out, (float(flops) if flops is not None else None), act
