"""Collective model: host ``record_param_comms`` ops -> rank-local collective executions on a CC core.

Placement: rank r runs on NeuronCore ``r % cores_per_chip`` of chip ``r // cores_per_chip``; chips fill
instances of the target's instance type (trn1.32xlarge and trn2.48xlarge: 16 chips on a 2D torus of
NeuronLink; instances talk over EFA; ``hardware_table.json`` ``instances`` lists the types, e.g. trn1n.32xlarge
with twice trn1's EFA). A group's members decide the levels it crosses:
- one chip: cores exchange through the chip's HBM: every byte a ring step moves is read from the sender's
  HBM and written to the receiver's (``cc_intra_chip_hbm_bytes_per_byte``), so a core's ring link runs at
  min(its DMA bandwidth, its HBM bandwidth / that factor), and bus bandwidth stays under the memory roof;
- several chips of one instance: NeuronLink; a ring drives ``cc_ring_link_fraction`` of a chip's links,
  shared by the group's cores on that chip, and all of them (``cc_full_torus_link_fraction``) when the group
  spans every chip of the instance (the torus's two Hamiltonian cycles, both ways). A group holding both cores
  of each of its trn1 chips runs KangaRing (Neuron's intra-node algorithm for such TP groups): one primary core
  per chip in a cycle of the chips (half the hops), the chip's data crossing its links once, and the chip's HBM
  touched ``cc_kangaring_hbm_touches_*`` times per byte: its time is the slower of link and HBM;
- several instances: hierarchical (intra-instance reduce-scatter, inter-instance ring over EFA on
  1/m of the data for m members per instance, intra-instance all-gather).
Algorithms (n members, B message bytes, bw link bandwidth, L step latency):
  ring all_reduce            2(n-1)/n * B / bw + 2(n-1) L
  ring all_gather, reduce_scatter, all_to_all    (n-1)/n * B / bw + (n-1) L    (B = the full buffer)
  broadcast, send, recv      B / bw + L;   barrier 2(n-1) L
  mesh (one-shot)            the same data over ``cc_mesh_link_fraction`` of the links in 2 steps (all_reduce)
                             or 1 step, chosen when faster (small messages: latency-bound).
  KangaRing (c chips, p = 2 members each)   phases (c-1) L + max(phases (n-p)/n B / bw, touches B / HBM of a chip)
A collective's time = latency (the L terms) + transfer (the bytes over the link). Its ``link`` (the chip's HBM,
the instance's NeuronLink, EFA) is shared (``SharedLink``): collectives whose transfers overlap on one link
split its bandwidth equally while they overlap (processor sharing), so each one's busbw stays under the link's
and the link never moves more than its bandwidth.
algorithm_bandwidth = B / time; bus_bandwidth = algbw * factor (nccl-tests: 2(n-1)/n all_reduce,
(n-1)/n all_gather / reduce_scatter / all_to_all, 1 otherwise).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.collectives import ASYNC_KEY, bus_factor, normalize_collective
from neuron_profiler.hardware import Target, dtype_size_bytes, model_param, normalize_dtype, raw_table

__all__ = ["normalize_collective", "find_collectives", "Topology", "Cost", "bus_factor", "MIN_COLLECTIVE_NS",
           "ASYNC_KEY", "wait_positions", "SharedLink"]

MIN_COLLECTIVE_NS = 50
_RING_PHASES = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0, "gather": 1.0,
                "scatter": 1.0}


@dataclass(frozen=True)
class Cost:
    """One collective's time on a rank: ``latency_ns`` (per-step latencies) + ``transfer_ns`` (its bytes over
    ``link``, the shared resource: "" = none, e.g. a one-member group)."""

    latency_ns: float
    transfer_ns: float
    algorithm: str
    link: str

    @property
    def ns(self) -> int:
        """The whole time alone on its link (at least ``MIN_COLLECTIVE_NS``)."""
        return max(int(np.ceil(self.latency_ns + self.transfer_ns)), MIN_COLLECTIVE_NS)


@dataclass(frozen=True)
class Topology:
    """Where ranks run and how fast their collectives go (constants from the hardware table)."""

    target: Target
    cores_per_chip: int
    chips_per_instance: int
    instance: str
    neuronlink_bytes_per_s: float
    efa_bytes_per_s: float
    intra_chip_bytes_per_s: float  # one core's ring link inside a chip: min(DMA, HBM / bytes per byte)
    ring_fraction: float
    mesh_fraction: float
    step_ns: float
    efa_step_ns: float
    full_torus_fraction: float = 1.0
    chip_hbm_bytes_per_s: float = 0.0   # one chip's HBM bandwidth (KangaRing's bound); 0 = no KangaRing
    kangaring_touches: tuple[float, float] = (3.0, 4.0)   # HBM accesses per byte: all_gather, reduce_scatter

    @classmethod
    def for_target(cls, target: Target, cores_per_chip: int, instance: str | None = None) -> Topology:
        """The topology of ``target`` on ``instance`` (an instance type of ``instances``; default the target's
        ``instance``)."""
        t = raw_table()["neuron"][target]
        inst = instance_entry(target, instance)
        hbm = float(t["hbm_bandwidth_per_core_bytes_per_s"]["value"])
        dma = float(t["dma_bandwidth_per_core_bytes_per_s"]["value"])
        intra = min(dma, hbm / model_param("cc_intra_chip_hbm_bytes_per_byte"))
        cores = max(int(cores_per_chip), 1)
        return cls(target, cores, int(inst["chips"]), inst["name"],
                   float(t["interconnect_bandwidth_bytes_per_s"]["value"]), float(inst["efa_bytes_per_s"]),
                   intra, model_param("cc_ring_link_fraction"),
                   model_param("cc_mesh_link_fraction"), model_param("cc_step_latency_ns"),
                   model_param("efa_step_latency_ns"), model_param("cc_full_torus_link_fraction"),
                   hbm * cores, (model_param("cc_kangaring_hbm_touches_all_gather"),
                                 model_param("cc_kangaring_hbm_touches_reduce_scatter")))

    def place(self, rank: int) -> tuple[int, int, int]:
        """(instance, chip in the instance, core on the chip) of a rank."""
        chip = rank // self.cores_per_chip
        return chip // self.chips_per_instance, chip % self.chips_per_instance, rank % self.cores_per_chip

    def duration(self, op: str, nbytes: float, members: list[int]) -> tuple[int, str]:
        """(ns, algorithm) of one collective of ``nbytes`` over ``members`` (ranks), alone on its link."""
        c = self.cost(op, nbytes, members)
        return c.ns, c.algorithm

    def cost(self, op: str, nbytes: float, members: list[int]) -> Cost:
        """Latency, transfer time, algorithm and link of one collective (see the module docstring)."""
        n = len(members)
        if n <= 1 or op == "":
            return Cost(float(MIN_COLLECTIVE_NS), 0.0, "local", "")
        places = [self.place(r) for r in members]
        instances = {p[0] for p in places}
        chips = {(p[0], p[1]) for p in places}
        per_chip = max(sum(1 for p in places if (p[0], p[1]) == c) for c in chips)
        if len(chips) == 1:
            inst, chip, _ = places[0]
            return self._split(self._ring, op, nbytes, n, self.intra_chip_bytes_per_s, self.step_ns / 2,
                               "ring (one chip)", f"HBM of chip {inst}.{chip}")
        link = self.neuronlink_bytes_per_s / per_chip
        if len(instances) == 1:
            frac = self.full_torus_fraction if len(chips) >= self.chips_per_instance > 1 else self.ring_fraction
            ring = self._kangaring(op, nbytes, n, len(chips), frac) if self._is_kangaring(op, places, chips) \
                else self._split(self._ring, op, nbytes, n, link * frac, self.step_ns, "ring (NeuronLink)",
                                 "NeuronLink")
            mesh = self._split(self._mesh, op, nbytes, n, link * self.mesh_fraction, self.step_ns,
                               "mesh (NeuronLink)", "NeuronLink")
            return ring if ring.ns <= mesh.ns else mesh
        m = max(sum(1 for p in places if p[0] == i) for i in instances)
        k = len(instances)
        intra = self._split(self._ring, op, nbytes, m, link * self.ring_fraction, self.step_ns, "", "") \
            if m > 1 else Cost(0.0, 0.0, "", "")
        inter = self._split(self._ring, op, nbytes / max(m, 1), k, self.efa_bytes_per_s / max(m, 1),
                            self.efa_step_ns, "", "")
        return Cost(intra.latency_ns + inter.latency_ns, intra.transfer_ns + inter.transfer_ns,
                    "hierarchical ring (NeuronLink + EFA)", "EFA")

    def _is_kangaring(self, op: str, places: list[tuple[int, int, int]], chips: set) -> bool:
        """KangaRing applies: a ring-family collective whose group holds both cores of every chip it uses."""
        return (op in ("all_reduce", "all_gather", "reduce_scatter") and self.cores_per_chip == 2
                and self.chip_hbm_bytes_per_s > 0 and len(places) == 2 * len(chips))

    def _kangaring(self, op: str, b: float, n: int, c: int, frac: float) -> Cost:
        """KangaRing over ``c`` chips of 2 members each: the primaries' cycle (c - 1 hops per phase), every
        chip's share of the data over its links once, bounded by the HBM accesses of the chip."""
        phases = _RING_PHASES[op]
        lat = phases * (c - 1) * self.step_ns
        ag, rs = self.kangaring_touches
        touches = {"all_gather": ag, "reduce_scatter": rs, "all_reduce": ag + rs}[op]
        wire = phases * (n - 2) / n * b / (self.neuronlink_bytes_per_s * frac) * 1e9
        hbm = touches * b / self.chip_hbm_bytes_per_s * 1e9
        return Cost(lat, max(wire, hbm), "KangaRing (NeuronLink)", "NeuronLink")

    @staticmethod
    def _split(fn, op: str, b: float, n: int, bw: float, step: float, algorithm: str, link: str) -> Cost:
        """``fn``'s time split into its latency (no bytes) and its transfer (the rest)."""
        lat = fn(op, 0.0, n, bw, step)
        return Cost(lat, max(fn(op, b, n, bw, step) - lat, 0.0), algorithm, link)

    @staticmethod
    def _ring(op: str, b: float, n: int, bw: float, step: float) -> float:
        if op == "barrier":
            return 2 * (n - 1) * step
        phases = _RING_PHASES.get(op)
        if phases is None:  # broadcast, reduce, send, recv: one pipelined pass
            return b / bw * 1e9 + step
        return phases * (n - 1) / n * b / bw * 1e9 + phases * (n - 1) * step

    @staticmethod
    def _mesh(op: str, b: float, n: int, bw: float, step: float) -> float:
        if op == "barrier":
            return 2 * step
        phases = _RING_PHASES.get(op)
        if phases is None:
            return b / bw * 1e9 + step
        return phases * (n - 1) / n * b / bw * 1e9 + phases * step


class SharedLink:
    """One link's transfers under an equal split of its bandwidth (processor sharing). ``add(key, start,
    work)`` starts a transfer of ``work`` ns (its time alone on the link) and returns the end of every transfer
    still in flight, ``{key: end}``, the new one included: a newcomer slows the others down. A transfer that
    starts before the link's clock (collectives are added in host order, not start order) starts at it."""

    def __init__(self) -> None:
        self.t = 0.0
        self.left: dict[Any, float] = {}  # key -> work still to move at self.t (ns alone on the link)

    def _advance(self, t: float) -> None:
        while self.left and self.t < t:
            m = len(self.left)
            step = min(self.left.values())
            if self.t + step * m > t:
                d = (t - self.t) / m
                self.left = {k: w - d for k, w in self.left.items()}
                break
            self.t += step * m
            self.left = {k: w - step for k, w in self.left.items() if w - step > 1e-9}
        self.t = max(self.t, t)

    def add(self, key: Any, start: float, work: float) -> dict[Any, float]:
        """Start a transfer (see the class docstring); returns the ends of the transfers in flight."""
        self._advance(start)
        if work > 0:
            self.left[key] = float(work)
        ends: dict[Any, float] = {}
        t, left = self.t, dict(self.left)
        while left:
            m = len(left)
            step = min(left.values())
            t += step * m
            done = [k for k, w in left.items() if w - step <= 1e-9]
            left = {k: w - step for k, w in left.items() if k not in done}
            ends.update((k, t) for k in done)
        ends.setdefault(key, self.t)
        return ends


def instance_entry(target: Target, instance: str | None = None) -> dict[str, Any]:
    """The hardware table's entry of ``instance`` (an instance type of the target's ``instances``; None = the
    target's default ``instance``). ``ValueError`` names the known types."""
    t = raw_table()["neuron"][target]
    if instance is None or instance == t["instance"]["name"]:
        return dict(t["instance"])
    known = {e["name"]: e for e in t.get("instances", [])}
    if instance not in known:
        names = sorted({t["instance"]["name"], *known})
        raise ValueError(f"unknown instance type {instance!r} for {target}; known: {', '.join(names)}")
    return dict(known[instance])


def members_of(replica_group: str, group_size: int) -> list[int]:
    """Member ranks from a "0,1,2" string, else 0..group_size-1."""
    try:
        ranks = [int(x) for x in str(replica_group).split(",") if x.strip() != ""]
    except ValueError:
        ranks = []
    if ranks and (group_size <= 0 or len(ranks) == group_size):
        return ranks
    return list(range(max(group_size, 1)))


def _int(v: Any, default: int = -1) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _ranks(v: Any) -> list[int]:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return []
    return [int(r) for r in v if isinstance(r, (int, float))] if isinstance(v, list) else []


def wait_positions(host_ops: pd.DataFrame) -> np.ndarray:
    """Positions of the ``record_param_comms`` rows whose "Collective name" is "wait" (NCCL records one when
    ``Work.wait()`` runs): consumers of the outstanding collectives."""
    if "args" not in host_ops.columns or not len(host_ops):
        return np.zeros(0, dtype=np.int64)
    args = host_ops["args"].astype(str)
    cand = np.flatnonzero(args.str.contains("Collective name", regex=False).to_numpy())
    out = []
    for r in cand.tolist():
        try:
            a = json.loads(args.iat[r])
        except ValueError:
            continue
        if isinstance(a, dict) and str(a.get("Collective name", "")).strip().lower() == "wait":
            out.append(r)
    return np.asarray(out, dtype=np.int64)


def find_collectives(host_ops: pd.DataFrame, world_size: int = 1) -> pd.DataFrame:
    """Collective host ops (``args`` holding "Collective name"), one row each.

    Columns: host_row, start_ts (ns), operation, process_group, replica_group ("0,1,..."), group_size,
    sequence_number, input_size, output_size (bytes), num_elements, dtype, message_bytes (the B of the
    ring model), blocking (the compute after it waits for it: ``ASYNC_KEY`` false, a torch.distributed call
    with ``async_op=False``; else it runs beside compute until a wait, the optimizer step or the next step)."""
    cols = ["host_row", "start_ts", "operation", "process_group", "replica_group", "group_size",
            "sequence_number", "input_size", "output_size", "num_elements", "dtype", "message_bytes", "blocking"]
    if "args" not in host_ops.columns or not len(host_ops):
        return pd.DataFrame(columns=cols)
    args = host_ops["args"]
    cats = args.cat.categories if isinstance(args.dtype, pd.CategoricalDtype) else None
    if cats is not None:
        hit = np.asarray(cats.str.contains("Collective name", regex=False), dtype=bool)
        mask = hit[args.cat.codes.to_numpy()] & (args.cat.codes.to_numpy() >= 0)
    else:
        mask = args.astype(str).str.contains("Collective name", regex=False).to_numpy()
    rows = np.flatnonzero(mask)
    recs = []
    starts = host_ops["start_ts"].to_numpy(np.int64)
    for r in rows:
        try:
            a = json.loads(str(args.iat[r]))
        except ValueError:
            continue
        if not isinstance(a, dict):
            continue
        op = normalize_collective(a.get("Collective name", ""))
        if not op:  # "wait" and coalescing markers move no data
            continue
        ranks = _ranks(a.get("Process Group Ranks"))
        n = _int(a.get("Group size"), len(ranks) or world_size)
        dt = normalize_dtype(str(a.get("dtype", ""))) or "float32"
        size = dtype_size_bytes(dt) or 4
        in_n, out_n = max(_int(a.get("In msg nelems"), 0), 0), max(_int(a.get("Out msg nelems"), 0), 0)
        in_b, out_b = in_n * size, out_n * size
        msg = out_b if op == "all_gather" else (in_b or out_b)
        recs.append((host_ops.index[r], starts[r], op, str(a.get("Process Group Name", "")),
                     ",".join(map(str, ranks)), max(n, 1), _int(a.get("Seq")), in_b, out_b, max(in_n, out_n),
                     dt, msg, a.get(ASYNC_KEY) is False))
    return pd.DataFrame.from_records(recs, columns=cols)
