"""``SimulatedRuntime``: a performance model of a NeuronCore behind the runtime interface.

``emit(builder, host_ops)`` turns a window's captured host ops into what the target would do:
1. ``program.extract_program``: which ops dispatch, launch kernels, run collectives, synchronise;
2. ``kernels.kernel_plan`` + ``pipeline.schedule_kernel``: each distinct kernel tiled and scheduled on the
   core's engines and DMA (cached per signature across windows);
3. ``timeline.project``: the target's host dispatching the program and the core running it asynchronously;
4. ``emit``: the projected host timeline replaces ``host_ops.start_ts/duration_ns`` (the measured times move
   to ``measured_start_ts/measured_duration_ns``), device events, counters and flows are added, and
   ``Header.simulation`` records the model, the target and every constant used.
All hardware numbers come from ``neuron_profiler.hardware`` (``params.CoreParams``).
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from neuron_profiler.compile import registry
from neuron_profiler.hardware import Target, neuron_device, neuron_spec, target_display_name, validate_host_model
from neuron_profiler.runtime.base import DeviceRuntime
from neuron_profiler.runtime.simulated.collectives import Topology
from neuron_profiler.runtime.simulated.emit import emit_core, expand
from neuron_profiler.runtime.simulated.graphs import GraphProgram, graph_plan
from neuron_profiler.runtime.simulated.hbm import add_hbm_counters
from neuron_profiler.runtime.simulated.kernels import kernel_plan
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import KernelTemplate, schedule_kernel
from neuron_profiler.runtime.simulated.program import Program, extract_program
from neuron_profiler.runtime.simulated.timeline import CollectiveConstraints, Projection, project

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.opmodel import OpWork
    from neuron_profiler.trace.builder import TraceBuilder

__all__ = ["SimulatedRuntime", "MODEL_VERSION", "MODEL_NAME", "DOCUMENTATION"]

MODEL_VERSION = "2.0"
MODEL_NAME = f"neuron_profiler.simulated {MODEL_VERSION}"
DOCUMENTATION = "docs/simulation.md"


def _process_graphs(host_ops: pd.DataFrame) -> dict[str, dict]:
    """The programs of the compiled graphs ``host_ops`` calls, from this process's registry."""
    if not len(host_ops):
        return {}
    cats = host_ops["name"].astype("category").cat.categories.astype(str)
    ids = [registry.graph_id_of(c) for c in cats if c.startswith(registry.GRAPH_PREFIX)]
    return {g: graph for g in ids if g and (graph := registry.program(g)) is not None}


def _work_key(name: str, w: OpWork) -> tuple:
    return (name, w.cls, w.dtype, int(w.flops), tuple(w.gemm), int(w.elems), int(w.out_elems), int(w.out_bytes),
            bool(w.backward), tuple((t.shape, t.dtype, t.numel) for t in w.inputs))


class SimulatedRuntime(DeviceRuntime):
    """Simulated Neuron device runtime.

    ``target``: trn1, inf2, trn2 or trn3. ``num_cores``: NeuronCores per simulated chip (None = the
    target's core count; e.g. 4 on trn2 with LNC=2). The process drives one NeuronCore: rank r runs on
    core ``r % num_cores`` of chip ``r // num_cores`` (one process per NeuronCore, as torch-neuronx
    launches ranks); the chip's HBM bandwidth is shared by the cores of the job running on it.
    ``max_events_per_nc``: keep the first N device events (instructions + DMA + collectives, by start time)
    per core and count the rest in ``builder.dropped_events["nc<i>"]``. ``capture_enabled_for_nc``:
    NeuronCore indices (on their chip) that are captured; others get no events. ``rank``: the process's rank
    (places its core and labels tracks). ``host_model``: overrides of the host dispatch model's constants
    (``neuron_profiler.hardware.host_model_params()``). ``instance``: the instance type the ranks run on (one of
    the target's types in the hardware table, e.g. "trn1n.32xlarge"; None = the target's default, trn1.32xlarge
    / trn2.48xlarge): chips per instance and EFA bandwidth of the collectives. ``auto_cast``: the compiler's
    ``--auto-cast`` (``"matmult"``: FP32 matmuls at the BF16 rate, their operands cast on chip; ``NeuronConfig``).
    """

    simulated = True

    def __init__(self, target: Target | str = Target.TRN2, max_events_per_nc: int | None = None,
                 capture_enabled_for_nc: set[int] | None = None, num_cores: int | None = None,
                 rank: int = 0, host_model: dict[str, float] | None = None, instance: str | None = None,
                 auto_cast: str = "none") -> None:
        target = Target.parse(target)
        if max_events_per_nc is not None and max_events_per_nc < 0:
            raise ValueError(f"max_events_per_nc must be >= 0 or None, got {max_events_per_nc}")
        if num_cores is not None and num_cores < 1:
            raise ValueError(f"num_cores must be >= 1 or None, got {num_cores}")
        if rank < 0:
            raise ValueError(f"rank must be >= 0, got {rank}")
        self.target = target
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = (None if capture_enabled_for_nc is None
                                       else {int(c) for c in capture_enabled_for_nc})
        self.spec = neuron_spec(target)
        self.num_cores = int(num_cores or self.spec.num_cores)
        self.rank = int(rank)
        self.host_model = validate_host_model(host_model)
        if auto_cast not in ("none", "matmult"):
            raise ValueError(f"auto_cast must be 'none' or 'matmult', got {auto_cast!r}")
        self.auto_cast = auto_cast
        self.topology = Topology.for_target(target, self.num_cores, instance)  # ValueError names the known types
        #: what other ranks impose on this rank's collectives (runs simulated together; see timeline)
        self.collective_constraints: CollectiveConstraints = {}
        self._templates: dict[tuple, KernelTemplate | None] = {}

    def cores(self) -> list[tuple[int, int]]:
        """(chip index, NeuronCore index on the chip) of the core(s) this process drives."""
        return [(self.rank // self.num_cores, self.rank % self.num_cores)]

    def params(self, world_size: int = 1) -> CoreParams:
        """The core's constants when ``world_size`` ranks run (they share their chips' HBM)."""
        return CoreParams.for_target(self.target, active_cores=min(max(world_size, 1), self.num_cores),
                                     host_overrides=self.host_model, auto_cast=self.auto_cast)

    def config(self) -> dict:
        """The runtime's settings (stored in the trace footer metadata)."""
        return {"target": self.target, "num_cores": self.num_cores, "rank": self.rank,
                "max_events_per_nc": self.max_events_per_nc, "model_version": MODEL_VERSION,
                "host_model": self.host_model, "instance": self.topology.instance, "auto_cast": self.auto_cast,
                "capture_enabled_for_nc": sorted(self.capture_enabled_for_nc) if self.capture_enabled_for_nc
                is not None else None}

    # ------------------------------------------------------------------ simulation
    def templates(self, prog: Program, p: CoreParams) -> list[KernelTemplate | None]:
        """The scheduled kernel of each signature of ``prog`` (cached across windows)."""
        out = []
        for name, w in prog.signatures:
            work_key = ("graph", w.signature) if isinstance(w, GraphProgram) else _work_key(name, w)
            key = (p.active_cores_on_chip, work_key)
            if key not in self._templates:
                plan = graph_plan(w, p) if isinstance(w, GraphProgram) else kernel_plan(w, name, p)
                self._templates[key] = schedule_kernel(plan, p) if plan is not None else None
            out.append(self._templates[key])
        return out

    def program(self, host_ops: pd.DataFrame, p: CoreParams, graphs: dict[str, dict]) -> Program:
        """The window's program for the target (``program.extract_program``); a projection extends it with the
        host work the dispatch model does not know (``neuron_profiler.projection``)."""
        return extract_program(host_ops, p.host, graphs)

    def simulate(self, host_ops: pd.DataFrame, world_size: int = 1, graphs: dict[str, dict] | None = None,
                 anchor_ns: int | None = None) -> tuple[Program, list, Projection, CoreParams]:
        """(program, kernel templates, projection, constants) of a window, without writing anything.
        ``graphs``: compiled graph programs by id (default: those this process compiled); ``anchor_ns``: where
        the projected timeline starts (default: the first host op)."""
        p = self.params(world_size)
        if graphs is None:
            graphs = _process_graphs(host_ops)
        prog = self.program(host_ops, p, graphs)
        temps = self.templates(prog, p)
        topo = self.topology
        return prog, temps, project(prog, temps, p, topo, world_size, self.collective_constraints, anchor_ns), p

    # ------------------------------------------------------------------ emit
    def emit(self, builder: TraceBuilder, host_ops: pd.DataFrame) -> None:
        """Project the host timeline, add devices (header), tracks, instructions, DMA, collectives, counters
        and flows, and describe the model in ``Header.simulation``."""
        hdr = builder.header
        world = hdr.world_size or 1
        graphs = registry.parse_programs(builder.footer_metadata.get(registry.GRAPHS_KEY)) or None
        fm = builder.footer_metadata
        anchor = fm.get("run_window_start_ns") or fm.get("window_start_ns")  # ranks of a run share one origin
        anchor_ns = int(anchor) if anchor is not None and str(anchor).isdigit() else None
        prog, temps, proj, p = self.simulate(host_ops, world, graphs, anchor_ns)
        if prog.graphs_used and graphs is None:
            builder.footer_metadata[registry.GRAPHS_KEY] = registry.programs_json(prog.graphs_used)
        self._project_host(builder, host_ops, proj)
        hdr.simulated = True
        self._describe(builder, prog, p)
        if world > 1 and not self.collective_constraints:
            builder.header.simulation.assumptions["cross_rank_origin"] = (
                "ranks simulated independently, each projected from rank 0's window start (shared through the "
                "process group's store): arrival skew across ranks comes from each rank's own work only"
                if fm.get("run_window_start_ns") else
                "ranks simulated independently, this one from its own window start (rank 0's was not available): "
                "times across ranks are not aligned")
        ev = expand(proj, temps)
        host_rows = host_ops.index.to_numpy(np.int64)
        instance = self._instance_track(builder)
        t0 = int(proj.host_start.min()) if len(proj.host_start) else 0
        chip_pos: dict[int, tuple[int, int]] = {}
        for chip, nc in self.cores():
            if chip not in chip_pos:
                device = neuron_device(self.target, index=chip, simulated=True)
                device.properties["simulated_num_cores"] = str(self.num_cores)
                hdr.devices.append(device)
                pos = len(hdr.devices) - 1
                chip_pos[chip] = pos, builder.add_track("device", f"{target_display_name(self.target)} {chip}",
                                                        instance, device=pos, rank=self.rank, pid=hdr.process_id)
            dev, dev_track = chip_pos[chip]
            dom = f"nc{nc}_device_clock"
            hdr.clock_domains.add(name=dom, description="simulated NeuronCore clock: the projected host clock of "
                                  "the trace (offset 0, no drift)")
            hdr.sync_points.add(domain=dom, host_ts=t0, device_ts=t0)
            if self.capture_enabled_for_nc is not None and nc not in self.capture_enabled_for_nc:
                continue
            core = emit_core(builder, prog, proj, ev, prog.signatures, p, host_rows, dev, dev_track, nc, self.rank,
                             self.max_events_per_nc)
            self._hbm(builder, host_ops, prog, temps, proj, core, dev, nc)
        builder.footer_metadata["neuron_simulator"] = json.dumps(self.config(), sort_keys=True)
        builder.footer_metadata["projected_host_wait_ns"] = json.dumps(
            {"synchronisation": round(proj.sync_wait_ns), "device_queue_full": round(proj.queue_wait_ns)})

    def _hbm(self, builder: TraceBuilder, host_ops: pd.DataFrame, prog: Program, temps: list, proj: Projection,
             core: int, dev: int, nc: int) -> None:
        """The ``HBM Usage`` counters of the core (``hbm.add_hbm_counters``); what the model could not know goes
        into ``Header.simulation.assumptions["hbm_usage"]``."""
        if not len(host_ops) or len(proj.host_start) != len(host_ops):
            return
        dur = np.array([t.duration if t is not None else 0 for t in temps] + [0], np.int64)
        out = np.array([_out_bytes(w) for _, w in prog.signatures] + [0], np.float64)
        sig = np.minimum(proj.k_sig, len(temps))
        k_end = proj.k_start + dur[sig] + proj.k_extra
        notes = add_hbm_counters(builder, host_ops, proj.host_start, proj.host_end, proj.k_host, proj.k_start, k_end,
                                 out[sig], core, device=dev, nc_idx=nc, rank=self.rank,
                                 pid=builder.header.process_id)
        builder.header.simulation.assumptions["hbm_usage"] = (
            "HBM Usage counters: weights and gradients from AccumulateGrad ops, optimizer state by optimizer class, "
            "forward kernel outputs held until the backward pass ends (docs/simulation.md)"
            + ("; " + "; ".join(notes) if notes else ""))

    @staticmethod
    def _project_host(builder: TraceBuilder, host_ops: pd.DataFrame, proj: Projection) -> None:
        if not len(host_ops) or builder.rows("host_ops") != len(host_ops):
            return
        m_start = host_ops["start_ts"].to_numpy(np.int64)
        m_end = m_start + host_ops["duration_ns"].to_numpy(np.int64)
        builder.set_columns("host_ops", {
            "start_ts": proj.host_start, "duration_ns": np.maximum(proj.host_end - proj.host_start, 0),
            "measured_start_ts": m_start, "measured_duration_ns": m_end - m_start})
        if builder.rows("counters"):  # host samples (CPU, memory) were taken on the measured clock
            ts = builder.table("counters")["ts"].to_numpy(np.int64)
            builder.set_columns("counters", {"ts": measured_to_projected(ts, m_start, m_end, proj)})

    def _describe(self, builder: TraceBuilder, prog: Program, p: CoreParams) -> None:
        sim = builder.header.simulation
        sim.model = MODEL_NAME
        sim.target = self.target
        sim.host_timeline = "projected" if builder.rows("host_ops") == prog.n and prog.n else "measured"
        sim.documentation = DOCUMENTATION
        sim.source = sim.source or "capture"
        for k, v in p.assumptions().items():
            sim.assumptions[k] = v
        topo = self.topology
        sim.assumptions["topology"] = (f"{topo.instance}: {topo.chips_per_instance} chips x {topo.cores_per_chip} "
                                       f"NeuronCores; NeuronLink {topo.neuronlink_bytes_per_s:.4g} B/s per chip, "
                                       f"EFA {topo.efa_bytes_per_s:.4g} B/s per instance")
        del sim.unpriced_ops[:]
        sim.unpriced_ops.extend(prog.unpriced)

    @staticmethod
    def _instance_track(builder: TraceBuilder) -> int:
        tracks = builder.table("tracks")
        inst = np.flatnonzero(np.asarray(tracks["kind"], dtype=object) == "instance") if len(tracks) \
            else np.zeros(0, np.int64)
        if len(inst):
            return int(tracks.index[inst[0]])
        return builder.add_track("instance", builder.header.instance_id or "instance")


def _out_bytes(w: object) -> float:
    """Output bytes of a kernel signature's work (a compiled graph: its output nodes')."""
    if isinstance(w, GraphProgram):
        return float(sum(w.works[i].out_bytes for i in w.outputs if i < len(w.works)))
    return float(getattr(w, "out_bytes", 0) or 0)


def measured_to_projected(ts: np.ndarray, m_start: np.ndarray, m_end: np.ndarray, proj: Projection) -> np.ndarray:
    """Times on the capturing CPU's clock mapped onto the projected host timeline: piecewise linear through
    the host ops' measured and projected starts and ends (monotone; clamped to the first / last op)."""
    x0, y0 = int(m_start.min()), int(np.min(proj.host_start))  # offsets keep float64 exact to the ns
    x = (np.concatenate([m_start, m_end]) - x0).astype(np.float64)
    y = (np.concatenate([proj.host_start, proj.host_end]).astype(np.int64) - y0).astype(np.float64)
    o = np.argsort(x, kind="stable")
    x, y = x[o], np.maximum.accumulate(y[o])
    return np.rint(np.interp((ts - x0).astype(np.float64), x, y)).astype(np.int64) + y0
