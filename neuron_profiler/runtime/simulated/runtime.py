"""``SimulatedRuntime``: a first-order performance model of a NeuronCore that turns the captured host op
stream into device events (engine instructions, DMA, collectives, counters) and flows.

All hardware numbers come from ``neuron_profiler.hardware``; the model lives in ``lowering`` (op ->
work), ``engines`` (instructions, in-order timelines), ``dma``, ``collectives``, ``counters`` and
``schedule`` (putting it together), so it can be refined without touching capture.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from neuron_profiler.hardware import (TARGETS, adjusted_flops_multiplier, model_param, neuron_device, neuron_spec,
                                      target_display_name, validate_host_model)
from neuron_profiler.runtime.base import DeviceRuntime
from neuron_profiler.runtime.simulated import counters as ctr
from neuron_profiler.runtime.simulated.collectives import bus_factor, find_collectives, ring_duration_ns
from neuron_profiler.runtime.simulated.dma import QUEUES, DmaModel
from neuron_profiler.runtime.simulated.engines import ENGINES, EngineModel, inorder_scan
from neuron_profiler.runtime.simulated.schedule import Schedule, schedule_ops

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.trace.builder import TraceBuilder

__all__ = ["SimulatedRuntime", "MODEL_VERSION"]

MODEL_VERSION = "first-order-1"


class SimulatedRuntime(DeviceRuntime):
    """Simulated Neuron device runtime.

    ``target``: trn1, inf2, trn2 or trn3. ``num_cores``: NeuronCores per simulated device (None = the
    target's core count; e.g. 4 on trn2 with LNC=2). The process drives one NeuronCore: rank r runs on
    core ``r % num_cores`` of chip ``r // num_cores`` (one process per NeuronCore, as torch-neuronx
    launches ranks). Per-core figures stay the physical core's.
    ``max_events_per_nc``: keep the first N device events (instructions + DMA +
    collectives, by start time) per core and count the rest in ``builder.dropped_events["nc<i>"]``.
    ``capture_enabled_for_nc``: NeuronCore indices (on their device) that are captured; others get
    no events. ``rank``: the process's rank (places its cores and labels tracks). ``host_model``: overrides of
    the host dispatch model's constants (``neuron_profiler.hardware.host_model_params()``).
    """

    simulated = True

    def __init__(self, target: str = "trn2", max_events_per_nc: int | None = None,
                 capture_enabled_for_nc: set[int] | None = None, num_cores: int | None = None,
                 rank: int = 0, host_model: dict[str, float] | None = None) -> None:
        target = str(target).strip().lower()
        if target not in TARGETS:
            raise ValueError(f"unknown Neuron target {target!r}; valid targets: {', '.join(TARGETS)}")
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
        self.engines = EngineModel(target)
        self.dma = DmaModel(target)

    def cores(self) -> list[tuple[int, int]]:
        """(chip index, NeuronCore index on the chip) of the core(s) this process drives."""
        return [(self.rank // self.num_cores, self.rank % self.num_cores)]

    def config(self) -> dict:
        """The runtime's settings (stored in the trace footer metadata)."""
        return {"target": self.target, "num_cores": self.num_cores, "rank": self.rank,
                "max_events_per_nc": self.max_events_per_nc, "model_version": MODEL_VERSION,
                "capture_enabled_for_nc": sorted(self.capture_enabled_for_nc) if self.capture_enabled_for_nc
                is not None else None}

    # ------------------------------------------------------------------ emit
    def emit(self, builder: "TraceBuilder", host_ops: pd.DataFrame) -> None:
        """Add devices (header), tracks, instructions, DMA, collectives, counters and launch flows."""
        hdr = builder.header
        hdr.simulated = True
        sched = schedule_ops(host_ops, self.engines, self.dma)
        coll = self._collectives(host_ops, hdr.world_size or 1, sched)
        t0 = int(min([v.min() for v in (sched.load_start, coll.get("start_ts", np.zeros(0)))
                      if len(v)], default=0))
        instance = self._instance_track(builder)
        chip_pos: dict[int, tuple[int, int]] = {}  # chip -> (index in header.devices, device track)
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
            hdr.clock_domains.add(name=dom, description="simulated NeuronCore clock: identical to the host clock "
                                  "of the host_ops timestamps in simulation (offset 0, no drift)")
            hdr.sync_points.add(domain=dom, host_ts=t0, device_ts=t0)
            if self.capture_enabled_for_nc is not None and nc not in self.capture_enabled_for_nc:
                continue
            self._emit_core(builder, host_ops, sched, coll, dev, dev_track, nc)
        builder.footer_metadata["neuron_simulator"] = json.dumps(self.config(), sort_keys=True)

    @staticmethod
    def _instance_track(builder: "TraceBuilder") -> int:
        tracks = builder.table("tracks")
        inst = np.flatnonzero(np.asarray(tracks["kind"], dtype=object) == "instance") if len(tracks) else []
        if len(inst):
            return int(tracks.index[inst[0]])
        return builder.add_track("instance", builder.header.instance_id or "instance")

    def _collectives(self, host_ops: pd.DataFrame, world_size: int, sched: Schedule) -> dict[str, np.ndarray]:
        c = find_collectives(host_ops, world_size)
        if not len(c):
            return {}
        c = c.sort_values(["start_ts", "host_row"], kind="stable")
        start = c["start_ts"].to_numpy(np.int64)
        # a collective waits for the compute dispatched before it (its data), not for later compute
        host_start = host_ops["start_ts"].to_numpy(np.int64)
        op_host = host_start[host_ops.index.get_indexer(sched.host_row)]
        ready = start.copy()
        if len(op_host):
            k = np.searchsorted(op_host, start, side="right") - 1
            c_end_max = np.maximum.accumulate(sched.compute_end)
            ready = np.where(k >= 0, np.maximum(start, c_end_max[np.maximum(k, 0)]), start)
        link_bw = self.spec.interconnect_bandwidth_bytes_per_s * model_param("cc_ring_link_fraction")
        dur = ring_duration_ns(c["operation"].to_numpy(object), c["message_bytes"].to_numpy(),
                               c["group_size"].to_numpy(), link_bw, model_param("cc_step_latency_ns"))
        end = inorder_scan(ready, dur)
        algbw = c["message_bytes"].to_numpy(np.float64) / (dur * 1e-9)
        return {
            "host_row": c["host_row"].to_numpy(np.int64), "start_ts": end - dur, "duration_ns": dur,
            "operation": c["operation"].to_numpy(object), "algorithm": np.full(len(c), "ring", object),
            "process_group": c["process_group"].to_numpy(object), "replica_group": c["replica_group"].to_numpy(object),
            "group_size": c["group_size"].to_numpy(np.int64),
            "sequence_number": c["sequence_number"].to_numpy(np.int64),
            "input_size": c["input_size"].to_numpy(np.int64), "output_size": c["output_size"].to_numpy(np.int64),
            "num_elements": c["num_elements"].to_numpy(np.int64), "dtype": c["dtype"].to_numpy(object),
            "algorithm_bandwidth": algbw,
            "bus_bandwidth": algbw * bus_factor(c["operation"].to_numpy(object), c["group_size"].to_numpy()),
        }

    def _keep_masks(self, sched: Schedule, coll: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        ni, nd = len(sched.instr["start_ts"]), len(sched.dma["start_ts"])
        nc_ = len(coll.get("start_ts", ()))
        total = ni + nd + nc_
        cap = self.max_events_per_nc
        if cap is None or total <= cap:
            return np.ones(ni, bool), np.ones(nd, bool), np.ones(nc_, bool), 0
        starts = np.concatenate([sched.instr["start_ts"], sched.dma["start_ts"],
                                 coll.get("start_ts", np.zeros(0, np.int64))])
        keep = np.zeros(total, bool)
        keep[np.argsort(starts, kind="stable")[:cap]] = True
        return keep[:ni], keep[ni:ni + nd], keep[ni + nd:], total - cap

    def _emit_core(self, b: "TraceBuilder", host_ops: pd.DataFrame, s: Schedule, coll: dict, dev: int,
                   dev_track: int, nc: int) -> None:
        rank, pid = self.rank, b.header.process_id
        core = b.add_track("core", f"nc{nc}", dev_track, device=dev, nc_idx=nc, rank=rank, pid=pid)
        eng = {e: b.add_track("engine", e, core, device=dev, nc_idx=nc, rank=rank, pid=pid) for e in ENGINES}
        keep_i, keep_d, keep_c, dropped = self._keep_masks(s, coll)
        if dropped:
            b.dropped_events[f"nc{nc}"] = b.dropped_events.get(f"nc{nc}", 0) + int(dropped)

        ins = {k: v[keep_i] for k, v in s.instr.items()}
        if len(ins["op"]):
            op = ins.pop("op")
            track_of = np.array([eng[e] for e in ENGINES], np.int64)
            codes = pd.Categorical(ins["engine"], categories=list(ENGINES)).codes
            first = b.add_rows("instructions", {**ins, "track": track_of[codes], "name": s.name[op],
                                                "framework_op": s.host_row[op], "dtype": s.dtype[op]})
            b.add_flows("host_ops", s.host_row[op], "instructions", first + np.arange(len(op)), "launch")

        dma = {k: v[keep_d] for k, v in s.dma.items()}
        if len(dma["op"]):
            used = [q for q in QUEUES if q in set(dma["queue"])]
            qtrack = {q: b.add_track("dma_queue", q, core, device=dev, nc_idx=nc, rank=rank, pid=pid) for q in used}
            op = dma["op"]
            q = dma["queue"]
            first = b.add_rows("dma", {
                "track": np.array([qtrack[x] for x in q], np.int64), "start_ts": dma["start_ts"],
                "duration_ns": dma["duration_ns"], "transfer_bytes": dma["transfer_bytes"], "source": dma["source"],
                "dest": dma["dest"], "queue_type": np.array([QUEUES[x] for x in q], object),
                "variable": dma["variable"], "framework_op": s.host_row[op]})
            b.add_flows("host_ops", s.host_row[op], "dma", first + np.arange(len(op)), "launch")

        if coll and keep_c.any():
            cc = b.add_track("cc_core", "CC-core 0", core, device=dev, nc_idx=nc, rank=rank, pid=pid)
            cols = {k: v[keep_c] for k, v in coll.items()}
            host_row = cols.pop("host_row")
            first = b.add_rows("collectives", {**cols, "track": cc, "framework_op": host_row})
            b.add_flows("host_ops", host_row, "collectives", first + np.arange(len(host_row)), "launch")

        self._emit_counters(b, s, core, dev, nc)

    def _emit_counters(self, b: "TraceBuilder", s: Schedule, core: int, dev: int, nc: int) -> None:
        if not len(s.host_row):
            return
        t0, t1 = int(s.load_start.min()), int(s.store_end.max())
        edges = ctr.sample_grid(t0, t1, ctr.MAX_SAMPLES - 1)
        pts = edges[:-1]
        d, ins = s.dma, s.instr
        d_end = d["start_ts"] + d["duration_ns"]
        tm = ins["engine"] == "TensorMatrix"
        mult = np.array([adjusted_flops_multiplier(self.target, x) for x in s.dtype], np.float64)
        adj = ins["raw_flops"][tm] * mult[ins["op"][tm]]
        sbuf_pct = 100.0 * ctr.level_at(pts, np.concatenate([s.load_start, s.compute_start]),
                                        np.concatenate([s.compute_end, s.store_end]),
                                        np.concatenate([s.load_bytes, s.store_bytes])) / self.spec.sbuf_bytes_per_core
        values = {
            "DMA Throughput": ctr.rate_average(edges, d["start_ts"], d_end, d["transfer_bytes"]),
            "Pending DMA Count": ctr.level_at(pts, d["issue_ts"], d_end),
            "State Buffer Usage": np.clip(sbuf_pct, 0.0, 100.0),
            "Estimated Instant MFU": 100.0 * ctr.rate_average(edges, ins["start_ts"][tm],
                                                              ins["start_ts"][tm] + ins["duration_ns"][tm], adj)
            / self.spec.peak_flops_per_s["bfloat16"],
        }
        for name, unit in ctr.COUNTERS.items():
            t = b.add_track("counter", name, core, device=dev, nc_idx=nc, rank=self.rank, unit=unit,
                            pid=b.header.process_id)
            b.add_rows("counters", {"track": t, "ts": edges, "value": np.append(values[name], 0.0)})
