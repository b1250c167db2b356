"""``predict(config)``: dry-run the distinct stages, compose the optimizer step, check memory, write the run."""
from __future__ import annotations

import dataclasses
import resource
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuron_profiler.hardware import raw_table
from neuron_profiler.predict import compose as comp
from neuron_profiler.predict.config import ConfigError, Layout, PredictConfig, calibration_band, layout, predict_table
from neuron_profiler.predict.flops import flops_per_sample, layer_params, model_params
from neuron_profiler.predict.models.zoo import ModelSpec, get_model
from neuron_profiler.predict.stages import StageCost, dry_run_stages

__all__ = ["Prediction", "predict", "MODEL_VERSION"]

#: bumped when the composition changes what it predicts
MODEL_VERSION = "predict-5"


@dataclass
class Prediction:
    """What ``predict`` found. Times in ns; ``samples_per_s`` is sequences (or images) per second."""

    config: PredictConfig
    layout: Layout
    model: ModelSpec | None              # None for a custom model (``module:callable``)
    step: comp.Step
    samples_per_s: float
    mfu: float
    hbm: list[dict[str, float]]          # per stage structure: bytes per core by kind, capacity
    band: tuple[float, float]            # relative (low, high) of the end-to-end calibration
    stages: list[StageCost]
    run_dir: Path
    assumptions: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    peak_rss_bytes: int = 0
    warnings: list[str] = field(default_factory=list)


def _spec(c: PredictConfig) -> ModelSpec:
    try:
        m = get_model(c.model)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if c.layers:
        m = dataclasses.replace(m, layers=dataclasses.replace(m.layers, layers=c.layers))
    if c.seq:
        m = dataclasses.replace(m, seq=c.seq)
    return m


def _bytes_per(precision: str, grad_acc: str = "") -> tuple[int, int]:
    """(parameter bytes, gradient bytes): BF16 weights keep BF16 gradients, but for a recipe accumulating them
    in FP32 (``ModelSpec.grad_acc``); the others are FP32."""
    if precision != "bf16":
        return 4, 4
    return 2, 4 if grad_acc == "float32" else 2


def _hbm(c: PredictConfig, lay: Layout, stages: list[StageCost], grad_acc: str = "") -> list[dict[str, float]]:
    """Bytes per core of each stage structure: weights, gradients, optimizer state, activations in flight."""
    t = raw_table()["neuron"][lay.inst.target]
    cap = float(t["hbm_capacity_bytes"]["value"]) / lay.inst.cores_per_chip
    pb, gb = _bytes_per(c.precision, grad_acc)
    states = _state_bytes(c)
    out = []
    for s in stages:
        in_flight = min(lay.pp - s.index, lay.accumulation)
        row = {"weights": s.params * pb, "gradients": s.params * gb,
               "optimizer state": s.params * states / (lay.dp if c.zero1 else 1),
               "activations": s.saved_bytes * in_flight}
        row["total"] = sum(row.values())
        row["capacity"] = cap
        out.append(row)
    return out


def static_bytes_per_core(c: PredictConfig, lay: Layout, m: ModelSpec) -> float:
    """Weights, gradients and optimizer state per NeuronCore of the fullest stage (from the config, before any
    dry run): its layers and the larger end, divided by TP."""
    ends = model_params(m) - m.layers.layers * layer_params(m)
    per_rank = (m.layers.layers // lay.pp * layer_params(m) + ends / (2 if m.input == "tokens" else 1)) / lay.tp
    pb, gb = _bytes_per(c.precision, m.grad_acc)
    states = _state_bytes(c)
    return per_rank * (pb + gb + states / (lay.dp if c.zero1 else 1))


def _state_bytes(c: PredictConfig) -> int:
    """Optimizer state bytes per parameter: Adam/LAMB moments (FP32), SGD momentum; + FP32 master weights
    when the weights are BF16."""
    return {"adamw": 8, "lamb": 8, "sgd": 4}[c.optimizer] + (4 if c.precision == "bf16" else 0)


def _check_fits(c: PredictConfig, lay: Layout, m: ModelSpec) -> None:
    need = static_bytes_per_core(c, lay, m)
    t = raw_table()["neuron"][lay.inst.target]
    cap = float(t["hbm_capacity_bytes"]["value"]) / lay.inst.cores_per_chip
    if need > cap:
        raise ConfigError(f"a stage does not fit in HBM: its weights, gradients and optimizer state need "
                          f"{need / 2**30:.1f} GiB per NeuronCore, {cap / 2**30:.0f} GiB available "
                          f"(raise TP or PP, or use ZeRO-1)")


def predict(c: PredictConfig, *, efficiency: tuple[float | None, float | None] = (None, None),
            keep_scratch: bool = False) -> Prediction:
    """Predict the training step of ``c`` (see docs/simulation.md "Predicting a training run"). Raises
    ``ConfigError`` (one line) for configurations that cannot run. ``efficiency``: (matmul peak fraction,
    TP overlap) instead of the fitted ones (the calibration bench refits them)."""
    from neuron_profiler.predict.custom import dry_run_custom, is_custom
    t0 = time.perf_counter()
    custom = is_custom(c.model)
    m = None if custom else _spec(c)
    lay = layout(c, None, None) if m is None else layout(c, m.layers.heads, m.layers.layers)
    if m is not None:
        _check_fits(c, lay, m)
    run_dir = _run_dir(c)
    scratch = tempfile.mkdtemp(prefix="neuron_predict_")
    try:
        if m is None:
            stages, fps, act = dry_run_custom(c, lay, scratch)
        else:
            mt = m.with_tp(lay.tp, lay.sp)
            stages, fps = dry_run_stages(mt, c, lay, scratch), flops_per_sample(m)
            act = c.microbatch * (mt.seq // lay.tp if lay.sp else mt.seq) * mt.layers.hidden * 2
        bytes_per = _bytes_per(c.precision, m.grad_acc if m is not None else "")
        hbm = _hbm(c, lay, stages, m.grad_acc if m is not None else "")
        _check_measured_fit(stages, hbm)
        step = comp.compose(c, lay, stages, act, bytes_per[1], efficiency, param_bytes_per_param=bytes_per[0])
        gb = lay.accumulation * c.microbatch * lay.dp
        peak = float(raw_table()["neuron"][lay.inst.target]["peak_flops_per_s"]["bfloat16"]["value"])
        mfu = gb * fps / (step.step_ns / 1e9) / (lay.world * peak) if fps else float("nan")
        pred = Prediction(c, lay, m, step, gb / (step.step_ns / 1e9), mfu, hbm, calibration_band(c.compiled), stages,
                          run_dir)
        pred.warnings = _warnings(pred) + (["pipeline sends not priced: the stage module has no activation_bytes"]
                                           if m is None and lay.pp > 1 and not act else [])
        pred.assumptions = _assumptions(pred)
        from neuron_profiler.predict.rundir import write_run
        write_run(pred)
    finally:
        if not keep_scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    pred.wall_s = time.perf_counter() - t0
    pred.peak_rss_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    from neuron_profiler.predict.rundir import write_summary
    write_summary(pred)
    return pred


def _check_measured_fit(stages: list[StageCost], hbm: list[dict[str, float]]) -> None:
    """The memory check of a custom model, from the parameters its dry run held."""
    for s, h in zip(stages, hbm):
        need = h["weights"] + h["gradients"] + h["optimizer state"]
        if need > h["capacity"]:
            raise ConfigError(f"stage {s.index} does not fit in HBM: its weights, gradients and optimizer state "
                              f"need {need / 2**30:.1f} GiB per NeuronCore, {h['capacity'] / 2**30:.0f} GiB "
                              f"available (raise TP or PP, or use ZeRO-1)")


def _run_dir(c: PredictConfig) -> Path:
    from neuron_profiler.modes import check_output_dir, check_run_id
    run_id = check_run_id(c.run_id or time.strftime("predict_%Y%m%dT%H%M%SZ", time.gmtime()), "--run-id")
    try:
        root = check_output_dir(c.output_dir)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    d = root / run_id
    if d.exists() and any(d.iterdir()):
        raise ConfigError(f"{d} already holds files; pass another --run-id or --output-dir")
    return d


def _warnings(p: Prediction) -> list[str]:
    out = []
    for s, h in zip(p.stages, p.hbm):
        if h["total"] > h["capacity"]:
            out.append(f"stage {s.index}: with {h['activations'] / 2**30:.1f} GiB of activations in flight the core "
                       f"needs {h['total'] / 2**30:.1f} of {h['capacity'] / 2**30:.0f} GiB; an upper bound: the dry "
                       f"run keeps every tensor autograd saves (under bf16-autocast also the BF16 weight copies), "
                       f"which the compiler may free or rematerialise; recompute lowers it")
        if s.unpriced:
            out.append(f"stage {s.index}: ops without a cost model (no device time): {', '.join(s.unpriced)}")
    return out


def _assumptions(p: Prediction) -> dict[str, Any]:
    t = predict_table()
    c, lay = p.config, p.layout
    return {
        "model_version": MODEL_VERSION,
        "config": dataclasses.asdict(c),
        "layout": {"tp": lay.tp, "pp": lay.pp, "dp": lay.dp, "accumulation": lay.accumulation,
                   "sequence_parallel": lay.sp, "world": lay.world, "instance": lay.inst.name,
                   "target": lay.inst.target},
        "model": ({"name": c.model, "source": "custom stage builder", "recompute": c.recompute or "as built"}
                  if p.model is None else
                  {"name": p.model.name, "source": p.model.source, "params": model_params(p.model),
                   "recompute": c.recompute or p.model.recompute}),
        "framework": {k: v for k, v in t["framework"].items()},
        "fitted": t["fitted"],
        "instance": t["instances"][lay.inst.name],
        "composition": ["1F1B: (m + p - 1) slots of the slowest stage; p - 1 of them are the bubble",
                        "tensor-parallel collectives synchronous (on the critical path of every layer; "
                        "compute-comm-overlap.rst: TP CC cannot be overlapped), KangaRing when the TP group holds "
                        "both cores of its chips",
                        "gradient accumulation: every micro-step priced adding into .grad (exact for m - 1 of m)",
                        "stage cost = T(1 layer) + (k - 1) x (T(2) - T(1)) unless simulate_layers",
                        "optimizer: for-loop form priced op by op; ZeRO-1 divides it by DP",
                        "DP groups share EFA / NeuronLink with the other groups of their kind"],
    }
