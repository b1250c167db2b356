"""What ``neuron-profile predict`` is asked: the model, the instances, the parallel layout, the batch, the precision
and the optimizer, validated into one ``PredictConfig`` (bad configurations raise ``ConfigError`` with one line)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from neuron_profiler.hardware import Target

__all__ = ["ConfigError", "PredictConfig", "Instance", "instance", "predict_table", "calibration_band", "PRECISIONS",
           "OPTIMIZERS"]

#: bf16-autocast: FP32 weights, torch.autocast(bfloat16); fp32: FP32 model, matmuls cast to BF16 by neuronx-cc's
#: default --auto-cast matmult; fp32-strict: --auto-cast none (matmuls at the FP32 rate); bf16: BF16 weights
PRECISIONS = ("bf16-autocast", "fp32", "fp32-strict", "bf16")
OPTIMIZERS = ("adamw", "lamb", "sgd")
RECOMPUTE = ("none", "selective", "full")


class ConfigError(ValueError):
    """A configuration that cannot run (the CLI prints its one line and exits 2)."""


@lru_cache(maxsize=1)
def predict_table() -> dict[str, Any]:
    """neuron_profiler/hardware/predict_table.json: instance types, framework assumptions, fitted constants."""
    text = resources.files("neuron_profiler.hardware").joinpath("predict_table.json").read_text(encoding="utf-8")
    return json.loads(text)


def calibration_band(compiled: bool = False) -> tuple[float, float]:
    """The leave-one-out (low, high) relative errors of the end-to-end calibration of a dry-run mode
    (predict_table.json ``fitted.band`` / ``band_compiled``)."""
    f = predict_table()["fitted"]["band_compiled" if compiled else "band"]
    return float(f["low"]), float(f["high"])


@dataclass(frozen=True)
class Instance:
    """An instance type: its chip target, chips, cores and EFA bandwidth."""

    name: str
    target: Target
    chips: int
    cores_per_chip: int
    efa_bytes_per_s: float

    @property
    def cores(self) -> int:
        return self.chips * self.cores_per_chip


def instance(name: str) -> Instance:
    """The instance type ``name`` (``ConfigError`` naming the known ones)."""
    table = predict_table()["instances"]
    if name not in table:
        raise ConfigError(f"unknown instance type {name!r}; known: {', '.join(table)}")
    e = table[name]
    return Instance(name, Target.parse(e["target"]), int(e["chips"]), int(e["cores_per_chip"]),
                    float(e["efa_bytes_per_s"]))


@dataclass(frozen=True)
class PredictConfig:
    """One prediction's inputs. ``model``: a built-in name (``neuron_profiler.predict.models.MODELS``) or
    ``module:callable`` / ``path/to/file.py:callable`` building a stage (see ``StageContext``); ``dp`` 0 =
    all remaining cores; ``global_batch`` 0 = microbatch x dp (no accumulation); ``layers`` / ``seq`` override
    the model's (reduced-size runs); ``recompute`` "" = the model's published recipe; ``sequence_parallel``
    None = on when tp > 1; ``simulate_layers`` 0 = dry-run 1 and 2 layers per stage structure and extrapolate
    (exact for identical layers, see docs/simulation.md), else dry-run every layer; ``compiled``: dry-run the
    stage through ``torch.compile(backend="neuron")`` (fused pricing) instead of eagerly."""

    model: str
    instance: str = "trn1.32xlarge"
    instances: int = 1
    tp: int = 1
    pp: int = 1
    dp: int = 0
    microbatch: int = 1
    global_batch: int = 0
    precision: str = "bf16-autocast"
    optimizer: str = "adamw"
    zero1: bool = False
    sequence_parallel: bool | None = None
    recompute: str = ""
    seq: int = 0
    layers: int = 0
    simulate_layers: int = 0
    compiled: bool = False
    output_dir: str = "./predict_output"
    run_id: str = ""

    def replace(self, **kw: Any) -> PredictConfig:
        return dataclasses.replace(self, **kw)


@dataclass(frozen=True)
class Layout:
    """The validated layout: degrees, accumulation, the instance and the model's layer split."""

    inst: Instance
    tp: int
    pp: int
    dp: int
    accumulation: int      # micro-batches per optimizer step per pipeline (m)
    sp: bool

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp


def _positive(name: str, v: int) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ConfigError(f"{name}: expected a positive integer, found {v!r}")


def layout(c: PredictConfig, heads: int | None, layers: int | None) -> Layout:
    """Check ``c`` against the instance and the model (``heads``/``layers`` None when unknown); ``ConfigError``."""
    inst = instance(c.instance)
    for name in ("instances", "tp", "pp", "microbatch"):
        _positive(name, getattr(c, name))
    if c.precision not in PRECISIONS:
        raise ConfigError(f"unknown precision {c.precision!r}; valid: {', '.join(PRECISIONS)}")
    if c.optimizer not in OPTIMIZERS:
        raise ConfigError(f"unknown optimizer {c.optimizer!r}; valid: {', '.join(OPTIMIZERS)}")
    if c.recompute and c.recompute not in RECOMPUTE:
        raise ConfigError(f"unknown recompute {c.recompute!r}; valid: {', '.join(RECOMPUTE)}")
    cores = inst.cores * c.instances
    if c.tp > inst.cores:
        raise ConfigError(f"TP={c.tp} is larger than one {inst.name} ({inst.cores} NeuronCores)")
    if heads is not None and heads % c.tp:
        raise ConfigError(f"TP={c.tp} does not divide the model's {heads} attention heads")
    if layers is not None and c.pp > layers:
        raise ConfigError(f"PP={c.pp} is larger than the model's {layers} layers")
    if layers is not None and layers % c.pp:
        raise ConfigError(f"PP={c.pp} does not divide the model's {layers} layers")
    dp = c.dp or cores // (c.tp * c.pp)
    if dp < 1 or c.tp * c.pp * dp > cores:
        raise ConfigError(f"TP={c.tp} x PP={c.pp} x DP={dp} = {c.tp * c.pp * dp} NeuronCores; "
                          f"{c.instances} x {inst.name} have {cores}")
    gb = c.global_batch or c.microbatch * dp
    if gb % (c.microbatch * dp):
        raise ConfigError(f"global batch {gb} is not a multiple of microbatch {c.microbatch} x DP {dp}")
    sp = c.tp > 1 if c.sequence_parallel is None else bool(c.sequence_parallel) and c.tp > 1
    return Layout(inst, c.tp, c.pp, dp, gb // (c.microbatch * dp), sp)
