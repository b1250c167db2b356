"""Collectives the composition adds outside the dry-run micro-step (data-parallel gradient reduction, pipeline
sends), priced by the simulated runtime's topology model (``runtime.simulated.collectives.Topology``) for the
ranks' real placement: rank r on core r % cores_per_chip of chip r // cores_per_chip, instances of 16 chips.

Every DP group (one per TP rank and stage) reduces at the same time, and every core of an instance sends its
pipeline activations at the same time, so links are shared: the topology is given the bandwidth one group gets
(EFA / groups crossing it per instance; NeuronLink / groups per chip). When the topology model shares links
itself (issue 22) this division moves there.
"""
from __future__ import annotations

import dataclasses

from neuron_profiler.predict.config import Layout
from neuron_profiler.runtime.simulated.collectives import Topology

__all__ = ["dp_members", "collective_ns", "dp_reduction_ns", "p2p_ns"]


def _topology(lay: Layout, per_instance: int, per_chip: int) -> Topology:
    t = Topology.for_target(lay.inst.target, lay.inst.cores_per_chip)
    t = dataclasses.replace(t, chips_per_instance=lay.inst.chips, efa_bytes_per_s=lay.inst.efa_bytes_per_s)
    efa_groups = max(lay.inst.cores // max(per_instance, 1), 1)
    link_groups = max(lay.inst.cores_per_chip // max(per_chip, 1), 1)
    return dataclasses.replace(t, efa_bytes_per_s=t.efa_bytes_per_s / efa_groups,
                               neuronlink_bytes_per_s=t.neuronlink_bytes_per_s / link_groups)


def dp_members(lay: Layout, stage: int) -> list[int]:
    """Ranks of the DP group of TP rank 0 of ``stage`` (Megatron order: rank = (stage*dp + d)*tp + t)."""
    return [(stage * lay.dp + d) * lay.tp for d in range(lay.dp)]


def collective_ns(lay: Layout, op: str, nbytes: float, members: list[int]) -> tuple[float, str]:
    """(ns, algorithm) of ``op`` over ``members`` while every parallel group of the same kind runs too."""
    if len(members) <= 1:
        return 0.0, "local"
    cores = lay.inst.cores
    inst_of = [r // cores for r in members]
    chip_of = [r // lay.inst.cores_per_chip for r in members]
    per_instance = max(inst_of.count(i) for i in set(inst_of))
    per_chip = max(chip_of.count(c) for c in set(chip_of))
    ns, alg = _topology(lay, per_instance, per_chip).duration(op, float(nbytes), members)
    return float(ns), alg


def dp_reduction_ns(lay: Layout, stage: int, grad_bytes: float, param_bytes: float,
                    zero1: bool) -> dict[str, float]:
    """The gradient reduction of one optimizer step: all-reduce, or ZeRO-1 reduce-scatter + all-gather."""
    members = dp_members(lay, stage)
    if zero1:
        rs, _ = collective_ns(lay, "reduce_scatter", grad_bytes, members)
        ag, _ = collective_ns(lay, "all_gather", param_bytes, members)
        return {"dp reduce_scatter": rs, "dp all_gather": ag}
    ar, _ = collective_ns(lay, "all_reduce", grad_bytes, members)
    return {"dp all_reduce": ar}


def p2p_ns(lay: Layout, stage: int, nbytes: float) -> float:
    """One pipeline send of ``nbytes`` from ``stage`` to the next (every TP rank sends its own at once)."""
    a = stage * lay.dp * lay.tp
    b = a + lay.dp * lay.tp
    cores = lay.inst.cores
    same_inst = a // cores == b // cores
    t = _topology(lay, 1 if not same_inst else 2, 1)
    if not same_inst:   # all cores of the instance send to the next stage over EFA at once
        t = dataclasses.replace(t, efa_bytes_per_s=lay.inst.efa_bytes_per_s / cores)
    ns, _ = t.duration("send", float(nbytes), [a, b])
    return float(ns)
