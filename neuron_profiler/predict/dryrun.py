"""Dry-run one micro-step (and the optimizer step) of one rank of one pipeline stage through the simulated runtime.

The stage is built under ``FakeTensorMode`` (real shapes and dtypes, no memory) with a single-process "fake"
process group standing in for the other ranks, so the tensor-parallel all-reduces are recorded with their real
sizes and group. One profiler window holds forward, backward and ``optimizer.step()``; ``measure`` splits the
simulated device time at the optimizer step. Activation memory is measured as the bytes autograd saves for
the backward (``saved_tensors_hooks``), which is what a micro-step in flight holds.
"""
from __future__ import annotations

import contextlib
import re
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from neuron_profiler.hardware import Target

__all__ = ["StageRun", "StageProgram", "run_stage", "measure", "fake_group"]

#: framework ops whose device time is Tensor-engine work (matmuls, convolutions, fused attention) and their backward
MATMUL_OPS = re.compile(r"^aten::(mm|bmm|addmm|baddbmm|matmul|linear|convolution|_convolution|conv\w*|"
                        r"_scaled_dot_product\w*|scaled_dot_product\w*)$")

#: builds (module, micro_step) on fake tensors: micro_step() runs forward + backward of one microbatch
StageProgram = Callable[[], tuple[torch.nn.Module, Callable[[], None]]]


@dataclass
class StageRun:
    """What one dry run measured (ns and bytes, per rank)."""

    trace: Path
    micro_ns: float           # device busy time of forward + backward (compute, without collectives)
    mm_ns: float              # of which matrix-multiply ops (matmuls, convolutions, attention)
    mm_ops: np.ndarray        # per matrix-multiply op: (simulated span ns, ns at the Tensor engine's peak)
    opt_ns: float             # device busy time of the optimizer step
    tp_comm_ns: float         # summed duration of the collectives recorded in the micro-step
    tp_comm_count: int
    saved_bytes: int          # activations autograd keeps for the backward of one micro-step
    param_count: int          # parameters of this rank
    unpriced: list[str]


@contextlib.contextmanager
def fake_group(rank: int, world: int) -> Iterator[None]:
    """A fake ``world``-rank process group in which this process is ``rank`` (torch's ``fake`` backend). A fake
    group left by another dry run is replaced; a real one is not touched (``ConfigError``)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    from neuron_profiler.predict.config import ConfigError
    if dist.is_initialized() and dist.get_backend() == "fake":
        dist.destroy_process_group()   # another dry run's stand-in (nothing real to keep)
    if dist.is_initialized():
        raise ConfigError("predict runs its dry runs in their own fake process group: call it from a process "
                          "without an initialised torch.distributed process group")
    dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _saved_bytes(fn: Callable[[], None]) -> int:
    total = 0

    def pack(t: torch.Tensor) -> torch.Tensor:
        nonlocal total
        total += t.numel() * t.element_size()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total


def run_stage(build: StageProgram, optimizer: Callable[[list[torch.nn.Parameter]], torch.optim.Optimizer],
              out_dir: str, target: Target, run_id: str, num_cores: int | None = None,
              accumulate: bool = False, auto_cast: str = "matmult", grad_acc_dtype: str = "") -> StageRun:
    """Profile forward + backward + optimizer step of the stage ``build`` makes (under FakeTensorMode,
    inside the caller's fake process group) on the simulated ``target``; returns the measurements.
    ``accumulate``: the profiled micro-step adds its gradients into ``.grad`` left by an earlier one (gradient
    accumulation: every micro-step of an optimizer step but the first reads and writes the accumulated
    gradients, torch's ``AccumulateGrad``), else it writes fresh gradients. ``auto_cast``: the compiler's
    ``--auto-cast`` the simulated runtime prices matmuls with (``NeuronConfig.auto_cast``; neuronx-cc's default
    ``matmult``). ``grad_acc_dtype`` ("float32": NxD's ``use_fp32_grad_acc``): every micro-step's fresh gradient
    is added into a ``main_grad`` of that dtype by a hook (``main_grad.add_(grad)``: reads both, writes the sum)
    instead of into ``.grad``."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    import neuron_profiler
    with warnings.catch_warnings(), FakeTensorMode(allow_non_fake_inputs=True):
        warnings.filterwarnings("ignore", category=FutureWarning)   # all_gather_into_tensor's new name
        warnings.filterwarnings("ignore", message=".*[Ww]armup.*|.*clears events.*")
        module, micro = build()
        params = [p for p in module.parameters() if p.requires_grad]
        opt = optimizer(params)
        saved = _saved_bytes(micro)   # also the earlier micro-step whose gradients an accumulating one adds to
        if grad_acc_dtype:
            _main_grad_hooks(params, getattr(torch, grad_acc_dtype))
        if not accumulate or grad_acc_dtype:
            for p in params:
                p.grad = None
        with neuron_profiler.profile(profile_output_dir=out_dir, run_id=run_id, target=target, runtime="simulated",
                                     with_modules=False, num_cores=num_cores, auto_cast=auto_cast,
                                     schedule=torch.profiler.schedule(wait=0, warmup=0, active=1, repeat=1)) as prof:
            micro()
            opt.step()
            prof.step()
    path = prof.neuron_profiler.paths[0]
    m = measure(path, target, auto_cast)
    return StageRun(path, m["micro_ns"], m["mm_ns"], m["mm_ops"], m["opt_ns"], m["comm_ns"], m["comm_count"], saved,
                    sum(p.numel() for p in params), m["unpriced"])


def _main_grad_hooks(params: list[torch.nn.Parameter], dtype: torch.dtype) -> None:
    """NxD's FP32 gradient accumulation (torch_xla ZeroRedundancyOptimizer ``use_grad_acc_hook``): after autograd
    writes a parameter's gradient, add it into the parameter's ``main_grad`` in ``dtype``. The gradient is
    kept (the dry run's optimizer steps on it)."""
    for p in params:
        main = torch.zeros(p.shape, dtype=dtype, device=p.device)

        def hook(q: torch.nn.Parameter, main: torch.Tensor = main) -> None:
            if q.grad is not None:
                main.add_(q.grad)
        p.register_post_accumulate_grad_hook(hook)


def _busy_ns(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of [start, end) intervals."""
    if not len(starts):
        return 0.0
    o = np.argsort(starts, kind="stable")
    s, e = starts[o].astype(np.float64), ends[o].astype(np.float64)
    run_end = np.maximum.accumulate(e)
    gap_starts = s[1:] > run_end[:-1]
    first = np.concatenate([[True], gap_starts])
    last = np.concatenate([gap_starts, [True]])
    return float((run_end[last] - s[first]).sum())


def measure(path: str | Path, target: Target, auto_cast: str = "none") -> dict[str, Any]:
    """Device busy time of a dry-run trace's micro-step and of its optimizer step (the instructions and DMA
    transfers of host ops before / from the first ``Optimizer.step``), its collectives and unpriced ops."""
    from neuron_profiler.trace import read_trace
    tf = read_trace(path)
    try:
        h = tf.table("host_ops")
        names = h["name"].astype(str).to_numpy()
        hstart = h["start_ts"].to_numpy(np.int64)
        opt_rows = np.flatnonzero(np.char.startswith(names.astype(str), "Optimizer.step"))
        cut = hstart[opt_rows].min() if len(opt_rows) else np.iinfo(np.int64).max
        is_mm = np.array([bool(MATMUL_OPS.match(n)) for n in names], dtype=bool)
        out: dict[str, Any] = {"micro_ns": 0.0, "opt_ns": 0.0, "mm_ns": 0.0}
        pieces: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {"micro_ns": [], "opt_ns": [], "mm_ns": []}
        for table in ("instructions", "dma"):
            t = tf.table(table)
            if not len(t):
                continue
            fop = t["framework_op"].to_numpy(np.int64)
            in_opt = np.where(fop >= 0, hstart[np.clip(fop, 0, len(hstart) - 1)] >= cut, False)
            st = t["start_ts"].to_numpy(np.int64)
            en = st + t["duration_ns"].to_numpy(np.int64)
            pieces["micro_ns"].append((st[~in_opt], en[~in_opt]))
            pieces["opt_ns"].append((st[in_opt], en[in_opt]))
            mm = ~in_opt & np.where(fop >= 0, is_mm[np.clip(fop, 0, len(is_mm) - 1)], False)
            pieces["mm_ns"].append((st[mm], en[mm]))
        for k, lst in pieces.items():
            if lst:
                out[k] = _busy_ns(np.concatenate([a for a, _ in lst]), np.concatenate([b for _, b in lst]))
        out["mm_ops"] = _mm_ops(tf, is_mm, hstart >= cut, target, auto_cast)
        c = tf.table("collectives")
        out["comm_ns"] = float(c["duration_ns"].sum()) if len(c) else 0.0
        out["comm_count"] = int(len(c))
        out["unpriced"] = _unpriced(tf)
        return out
    finally:
        tf.close()


def _mm_ops(tf, is_mm: np.ndarray, in_opt: np.ndarray, target: Target, auto_cast: str = "none") -> np.ndarray:
    """(span, peak ns) of each matrix-multiply framework op of the micro-step: its instructions' first start to
    last end, and its MATMUL FLOPs at the Tensor engine's peak for the dtype they multiply in (FP32 at a
    quarter, but at the BF16 peak under ``--auto-cast matmult``)."""
    from neuron_profiler.hardware import adjusted_flops_multiplier, raw_table
    ins = tf.table("instructions")
    if not len(ins):
        return np.zeros((0, 2))
    peak = float(raw_table()["neuron"][target]["peak_flops_per_s"]["bfloat16"]["value"])
    fop = ins["framework_op"].to_numpy(np.int64)
    ok = (fop >= 0) & is_mm[np.clip(fop, 0, len(is_mm) - 1)] & ~in_opt[np.clip(fop, 0, len(in_opt) - 1)]
    st = ins["start_ts"].to_numpy(np.int64)[ok]
    en = st + ins["duration_ns"].to_numpy(np.int64)[ok]
    mult = np.ones(int(ok.sum()))
    dts = ins["dtype"].astype(str).to_numpy()[ok]
    for dt in set(dts.tolist()):
        if dt:
            mdt = "bfloat16" if auto_cast == "matmult" and dt == "float32" else dt
            mult[dts == dt] = adjusted_flops_multiplier(target, mdt)
    is_matmul = ins["opcode"].astype(str).to_numpy()[ok] == "MATMUL"
    flops = np.where(is_matmul, ins["raw_flops"].to_numpy(np.float64)[ok] * mult, 0.0)
    ops, inv = np.unique(fop[ok], return_inverse=True)
    span = np.zeros(len(ops))
    first = np.full(len(ops), np.inf)
    last = np.zeros(len(ops))
    np.minimum.at(first, inv, st)
    np.maximum.at(last, inv, en)
    span = last - first
    ideal = np.bincount(inv, weights=flops, minlength=len(ops)) / peak * 1e9
    return np.stack([span, ideal], axis=1)


def _unpriced(tf) -> list[str]:
    try:
        return [str(x) for x in tf.header.simulation.unpriced_ops]
    except AttributeError:
        return []


def scratch_dir() -> str:
    """A temporary directory for the dry runs' own traces."""
    return tempfile.mkdtemp(prefix="neuron_predict_")
