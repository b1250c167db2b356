"""One window's trace, assembled at export: header, host tracks, host ops, host counters, then the device side
from the runtime. Nothing here runs while the profiled steps run."""
from __future__ import annotations

import json
import os
import platform
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from neuron_profiler.capture import backend
from neuron_profiler.capture.comms import Problems
from neuron_profiler.capture.counters import HostSampler
from neuron_profiler.capture.host_ops import extract_host_ops, kineto_events
from neuron_profiler.capture.report import notice
from neuron_profiler.capture.session import WindowCapture, rank_and_world
from neuron_profiler.trace import TraceBuilder, make_header
from schemas import pb

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.config import NeuronConfig
    from neuron_profiler.runtime.base import DeviceRuntime

__all__ = ["PRODUCER", "HOST_OP_COLUMNS", "build_window_trace", "NO_SHAPES"]

PRODUCER = "neuron_profiler.capture"
HOST_OP_COLUMNS = ("name", "category", "start_ts", "duration_ns", "input_shapes", "input_dtypes", "module", "stack",
                   "sequence_number", "correlation_id", "external_id", "flops", "args")
#: Footer note of a window whose aten ops carry no input shapes: the device model has nothing to price.
NO_SHAPES = ("no aten op of this window carries input shapes, so the device runtime could not model any "
             "instruction or DMA; profile with record_shapes=True")


def build_window_trace(prof: Any, config: NeuronConfig, index: int, window: WindowCapture | None,
                       runtime_for: Callable[[int], DeviceRuntime] | None) -> TraceBuilder:
    """The ``TraceBuilder`` of window ``index`` of ``prof``; the device side from ``runtime_for(rank)`` unless it
    is None. When the device runtime fails, the trace holds the host side alone and the error
    (``device_runtime_error``), and the failure is reported as one line: a device-model failure never loses the
    host side.

    Footer metadata: window bounds, profiler steps, host/aten op counts, export time, ``capture_problems``
    (what capture could not record), ``device_events_unavailable`` (when the device model had no shapes) and
    ``dry_run`` ("meta" / "fake" for a window run on tensors without data).
    """
    problems = Problems()
    rank, world, rank_source = rank_and_world(window.rank_world if window else None, problems)
    opts = window.profiler_options if window else {}
    t_build = time.perf_counter_ns()
    ops = extract_host_ops(kineto_events(prof), with_stack=opts.get("with_stack", False),
                           module_intervals=window.module_intervals if window else None,
                           comm_calls=window.comm_calls if window else None,
                           comm_default_start=window.comm_default_start if window else None,
                           list_dtypes=window.list_dtypes if window else None)
    found = (window.problems if window else []) + problems.take()
    runtime = runtime_for(rank) if runtime_for is not None else None
    host = _HostSide(config, index, window, ops, rank, world, rank_source)
    b = host.builder(runtime)
    if runtime is not None:
        aten = int(b.footer_metadata["aten_op_count"])
        if aten and not any(o["input_shapes"] for o in ops if o["name"].startswith("aten::")):
            b.footer_metadata["device_events_unavailable"] = NO_SHAPES
            notice(f"window {index}: {NO_SHAPES}")
        try:
            runtime.emit(b, b.table("host_ops"))
        except Exception as exc:  # noqa: BLE001 - reported and kept in the trace
            notice(f"device runtime failed on window {index} ({exc!r}); writing host ops only")
            b = host.builder(None)
            b.footer_metadata["device_runtime_error"] = repr(exc)
    if found:
        b.footer_metadata["capture_problems"] = json.dumps(found)
    b.footer_metadata["export_ms"] = f"{(time.perf_counter_ns() - t_build) / 1e6:.1f}"
    return b


def program_identity(window: WindowCapture | None) -> dict[str, str]:
    """Header metadata naming what ran: ``script`` (the file name of the program, ``sys.argv[0]``; absent for
    ``python -c`` and interactive sessions), ``model`` and ``model_parameters`` (``ModuleRecorder.model``, with
    ``with_modules``); the analysis pairs traces of one model or program by them (``analysis.default_partner``).
    And ``cwd``, the process's working directory (absolute): the explorer reads the source of relative stack
    paths (``with_stack``) against it."""
    out = dict(window.model) if window is not None else {}
    argv0 = sys.argv[0] if sys.argv else ""
    if argv0 and argv0 not in ("-c", "-"):
        out["script"] = os.path.basename(argv0)
    try:  # the working directory: relative paths of the recorded stacks (with_stack) are read against it
        out["cwd"] = os.getcwd()
    except OSError:  # the directory was removed under the process
        pass
    return out


class _HostSide:
    """The host part of one window's trace, buildable twice (again without the device side after a failure)."""

    def __init__(self, config: NeuronConfig, index: int, window: WindowCapture | None,
                 ops: list[dict[str, Any]], rank: int, world: int, rank_source: str) -> None:
        self.config, self.index, self.window, self.ops = config, index, window, ops
        self.rank, self.world, self.rank_source = rank, world, rank_source

    def builder(self, runtime: DeviceRuntime | None) -> TraceBuilder:
        """Header, tracks, host ops, host counters and footer counts (no device events yet)."""
        cfg, w, ops = self.config, self.window, self.ops
        hdr = make_header(PRODUCER, source_format="neuron-capture", rank=self.rank, world_size=self.world,
                          simulated=bool(getattr(runtime, "simulated", False)),
                          capture_config={**cfg.to_dict(), "profiler": w.profiler_options if w else {}},
                          run_id=cfg.run_id, window_index=self.index, process_id=os.getpid(),
                          metadata={"torch_version": torch.__version__, "python_version": platform.python_version(),
                                    "privateuse1_backend": torch._C._get_privateuse1_backend_name(),
                                    "privateuse1_registered_by_neuron_profiler": backend.registered_by_us(),
                                    "device_runtime": type(runtime).__name__ if runtime is not None else "none",
                                    "rank_source": self.rank_source, **program_identity(w)})
        hdr.clock_domains.append(pb.ClockDomain(name="host_unix_ns",
                                                description="host CLOCK_REALTIME in ns (Kineto timestamps)"))
        b = TraceBuilder(hdr)
        pid = os.getpid()
        t_proc = _add_host_ops(b, ops, hdr.instance_id or platform.node(), pid, self.rank)
        if w is not None:
            _add_host_counters(b, w.host_samples, t_proc, pid, self.rank)
            b.footer_metadata["window_start_ns"] = str(w.start_ns)
            b.footer_metadata["window_end_ns"] = str(w.end_ns)
            if w.dry_run:  # "meta" / "fake": the program ran on tensors without data (capture.dryrun)
                b.footer_metadata["dry_run"] = w.dry_run
            if w.run_start_ns is not None:  # rank 0's start of this window: the run's common origin
                b.footer_metadata["run_window_start_ns"] = str(w.run_start_ns)
        steps = [o["name"] for o in ops if o["name"].startswith("ProfilerStep#")]
        if steps:
            b.footer_metadata["profiler_steps"] = json.dumps(steps)
        b.footer_metadata["host_op_count"] = str(len(ops))
        b.footer_metadata["aten_op_count"] = str(sum(o["name"].startswith("aten::") for o in ops))
        return b


def _add_host_ops(b: TraceBuilder, ops: list[dict[str, Any]], instance: str, pid: int, rank: int) -> int:
    """Instance, process and one thread track per Kineto thread (main thread first), then the host_ops rows;
    returns the process track."""
    t_inst = b.add_track("instance", instance, rank=rank)
    t_proc = b.add_track("process", f"rank {rank} (pid {pid})", parent=t_inst, pid=pid, rank=rank)
    main_tid = _main_thread(ops)
    thread_tracks: dict[int, int] = {}
    for tid in sorted({o["tid"] for o in ops}, key=lambda t: (t != main_tid, t)):
        label = f"thread {tid}" + (" (main)" if tid == main_tid else "")
        thread_tracks[tid] = b.add_track("thread", label, parent=t_proc, pid=pid, tid=tid, rank=rank)
    if ops:
        cols: dict[str, Any] = {c: [o[c] for o in ops] for c in HOST_OP_COLUMNS}
        cols["track"] = np.array([thread_tracks[o["tid"]] for o in ops], dtype=np.int64)
        for c in ("start_ts", "duration_ns", "sequence_number", "correlation_id", "external_id", "flops"):
            cols[c] = np.asarray(cols[c], dtype=np.int64)
        b.add_rows("host_ops", cols)
    return t_proc


def _add_host_counters(b: TraceBuilder, samples: dict[str, list[tuple[int, float]]], parent: int, pid: int,
                       rank: int) -> None:
    for name, series in samples.items():
        if not series:
            continue
        t = b.add_track("counter", name, parent=parent, pid=pid, rank=rank, unit=HostSampler.UNITS.get(name, ""))
        b.add_rows("counters", {"track": np.full(len(series), t, dtype=np.int64),
                                "ts": np.array([s[0] for s in series], dtype=np.int64),
                                "value": np.array([s[1] for s in series], dtype=np.float64)})


def _main_thread(ops: list[dict[str, Any]]) -> int:
    for o in ops:
        if o["name"].startswith("ProfilerStep#"):
            return o["tid"]
    return ops[0]["tid"] if ops else 0
