"""From the dry-run stages to one optimizer step: accumulation, the 1F1B pipeline, the gradient reduction, the
optimizer and the host, as a breakdown whose parts add up to the step time.

With ``m`` micro-batches per optimizer step through ``p`` stages, 1F1B runs ``m + p - 1`` slots of the slowest
stage's micro-step (forward + backward + its tensor-parallel collectives + its two pipeline sends); ``p - 1``
of them are the bubble (the bubble fraction ``(p - 1) / m`` of the issue, relative to the useful slots). The
gradient reduction runs once per optimizer step, exposed but for the overlap the framework gives
(``dp_overlap_fraction``), then the optimizer (on ``1/dp`` of the parameters under ZeRO-1).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from neuron_profiler.hardware import host_model_params
from neuron_profiler.predict import comm
from neuron_profiler.predict.config import Layout, PredictConfig, predict_table
from neuron_profiler.predict.stages import StageCost

__all__ = ["Step", "compose", "framework", "fitted"]


def framework(name: str) -> float:
    """A framework assumption of predict_table.json."""
    return float(predict_table()["framework"][name]["value"])


def fitted(name: str, compiled: bool = False) -> float:
    """A constant fitted on the calibration set (predict_table.json ``fitted``); ``compiled``: the one fitted on
    ``--compiled`` dry runs (``<name>_compiled``), each mode has its own."""
    return float(predict_table()["fitted"][name + ("_compiled" if compiled else "")]["value"])


@dataclass
class Step:
    """One optimizer step (ns). ``parts`` add up to ``step_ns``."""

    step_ns: float
    parts: dict[str, float]
    slot_ns: float                       # one 1F1B slot of the slowest stage
    slowest: str
    detail: dict[str, float] = field(default_factory=dict)


def stage_slot(s: StageCost, peak_fraction: float, tp_overlap: float) -> tuple[float, float]:
    """(compute, exposed tensor-parallel communication) of one micro-step of stage ``s``, ns: matrix multiplies
    no faster than ``peak_fraction`` of the Tensor engine's peak, ``tp_overlap`` of the TP collectives hidden."""
    return s.micro_ns + s.mm_extra_ns(peak_fraction), s.tp_comm_ns * (1.0 - tp_overlap)


def compose(c: PredictConfig, lay: Layout, stages: list[StageCost], act_bytes: float, grad_bytes_per_param: float,
            eff: tuple[float | None, float | None] = (None, None), param_bytes_per_param: float | None = None) -> Step:
    """The optimizer step of ``stages`` under layout ``lay``. ``act_bytes``: bytes one pipeline send carries;
    ``eff``: (matmul peak fraction, TP overlap) overriding the fitted peak fraction and the framework's overlap;
    ``param_bytes_per_param``: what ZeRO-1's all-gather of the updated weights carries (default: the gradients')."""
    pbytes = grad_bytes_per_param if param_bytes_per_param is None else param_bytes_per_param
    pf = fitted("matmul_peak_fraction", c.compiled) if eff[0] is None else eff[0]
    ov = framework("tp_overlap") if eff[1] is None else eff[1]
    m, p = lay.accumulation, lay.pp
    p2p = comm.p2p_ns(lay, 0, act_bytes) if p > 1 else 0.0
    slots = {s.name: stage_slot(s, pf, ov) for s in stages}
    slowest = max(stages, key=lambda s: sum(slots[s.name]))
    compute, tp = slots[slowest.name]
    slot = compute + tp + 2 * p2p
    parts = {"compute": m * compute, "tp collectives": m * tp, "pp send/recv": m * 2 * p2p,
             "pipeline bubble": (p - 1) * slot}
    dp_parts: dict[str, float] = {}
    opt = 0.0
    for s in stages:   # every stage reduces and steps at once; the slowest sets the step
        red = comm.dp_reduction_ns(lay, s.index, s.params * grad_bytes_per_param, s.params * pbytes,
                                   c.zero1)
        if sum(red.values()) > sum(dp_parts.values()):
            dp_parts = red
        opt = max(opt, s.opt_ns / (lay.dp if c.zero1 else 1))
    keep = 1.0 - framework("dp_overlap_fraction")
    parts.update({k: v * keep for k, v in dp_parts.items()})
    parts["optimizer"] = opt
    launch = host_model_params()["graph_launch_ns"][0]
    parts["host"] = launch * (framework("graph_launches_per_micro_step") * m
                              + framework("graph_launches_per_optimizer_step"))
    return Step(sum(parts.values()), parts, slot, slowest.name,
                {"p2p_ns": p2p, "matmul_peak_fraction": pf, "tp_overlap": ov})
