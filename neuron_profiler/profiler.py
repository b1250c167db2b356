"""``NeuronProfiler``: turns each finished ``torch.profiler`` window into one ``.nprof`` trace file.

Use ``on_trace_ready=NeuronProfiler(cfg).export_trace`` with ``experimental_config=cfg``. Each active window
is written when it ends (so a later crash leaves earlier windows readable) to
``<profile_output_dir>/<run_id>/rank{rank:05d}_window{index:03d}.nprof``.
"""
from __future__ import annotations

import gc
import json
import os
import platform
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from neuron_profiler.capture.host_ops import extract_host_ops, kineto_events
from neuron_profiler.capture.session import CaptureSession, WindowCapture, rank_and_world
from neuron_profiler.config import NeuronConfig, ProfileMode

__all__ = ["NeuronProfiler", "profile", "make_runtime", "trace_path"]

PRODUCER = "neuron_profiler.capture"
HOST_OP_COLUMNS = ("name", "category", "start_ts", "duration_ns", "input_shapes", "input_dtypes", "module", "stack",
                   "sequence_number", "correlation_id", "external_id", "flops", "args")


def make_runtime(config: NeuronConfig, rank: int) -> Any:
    """The device runtime for ``config``: hardware when requested (or "auto" with a Neuron device), else simulated."""
    from neuron_profiler.runtime.hardware import HardwareRuntime
    if config.runtime == "hardware" or (config.runtime == "auto" and HardwareRuntime.available()):
        return HardwareRuntime(config)
    from neuron_profiler.runtime.simulated import SimulatedRuntime
    return SimulatedRuntime(target=config.target, max_events_per_nc=config.max_events_per_nc,
                            capture_enabled_for_nc=config.capture_enabled_for_nc, num_cores=config.num_cores, rank=rank)


def trace_path(out_dir: "str | os.PathLike[str]", run_id: str, rank: int, window: int) -> Path:
    """``<out_dir>/<run_id>/rank{rank:05d}_window{window:03d}.nprof`` (sorts by rank, then window)."""
    return Path(out_dir) / run_id / f"rank{rank:05d}_window{window:03d}.nprof"


def _session(config: NeuronConfig) -> CaptureSession:
    s = getattr(config, "_neuron_session", None)
    if s is None:
        s = CaptureSession(config)
        config._neuron_session = s  # type: ignore[attr-defined]
    return s


class NeuronProfiler:
    """Exports torch.profiler windows captured with a ``NeuronConfig`` as trace files.

    ``runtime``: a ``DeviceRuntime`` to use instead of the one ``config`` selects; ``skip_empty``: write nothing
    for windows without any aten op.

    Attributes:
        paths: the files written so far, in window order.
    """

    def __init__(self, config: NeuronConfig, *, runtime: Any = None, skip_empty: bool = False) -> None:
        if not isinstance(config, NeuronConfig):
            raise TypeError(f"NeuronProfiler expects a NeuronConfig, found {type(config).__name__}")
        self.config = config
        self.session = _session(config)
        if runtime is not None:
            self.session.runtime = runtime
        elif config.has(ProfileMode.DEVICE):
            _preload_runtime_modules(config)  # keep first-use imports out of the first profiled window
        self.paths: list[Path] = []
        self.skip_empty = skip_empty

    def export_trace(self, prof: Any) -> "Path | None":
        """``on_trace_ready`` callback: build and write the trace of the window that just ended; returns its path
        (None when ``skip_empty`` and the window ran no aten op, e.g. a launcher process of the runner)."""
        if getattr(prof, "experimental_config", None) is not self.config:
            raise ValueError("export_trace: the profiler's experimental_config is not this NeuronProfiler's NeuronConfig; "
                             "pass experimental_config=cfg and on_trace_ready=NeuronProfiler(cfg).export_trace")
        index, window = self.session.take_window()
        gc_was_enabled = gc.isenabled()
        gc.disable()  # many small allocations: cyclic GC passes over a large torch heap dominated export time
        try:
            return self._export(prof, index, window)
        finally:
            if gc_was_enabled:
                gc.enable()

    def _export(self, prof: Any, index: int, window: "WindowCapture | None") -> "Path | None":
        try:
            builder = self.build(prof, index, window)
        except Exception as exc:  # a device-model failure must not lose the host side or stop training
            if not self.config.has(ProfileMode.DEVICE):
                raise
            warnings.warn(f"neuron_profiler: device runtime failed on window {index} ({exc!r}); "
                          f"writing host ops only", RuntimeWarning, stacklevel=2)
            builder = self.build(prof, index, window, device=False)
            builder.footer_metadata["device_runtime_error"] = repr(exc)
        if self.skip_empty and builder.footer_metadata.get("aten_op_count") == "0":
            return None
        rank = builder.header.rank
        path = trace_path(self.config.profile_output_dir, self.config.run_id, rank, index)
        if path.exists():  # another process of the same run with the same rank (e.g. a launcher), keep both
            path = path.with_name(f"{path.stem}_pid{os.getpid()}{path.suffix}")
        tmp = path.with_name(path.name + ".tmp")
        builder.write(tmp)
        os.replace(tmp, path)
        self.paths.append(path)
        return path

    def build(self, prof: Any, index: int, window: "WindowCapture | None", device: bool = True) -> Any:
        """The ``TraceBuilder`` for one window (header, host tracks, host ops, counters, device events)."""
        from neuron_profiler.trace import TraceBuilder, make_header
        from schemas import pb

        cfg = self.config
        rank, world = rank_and_world(window.rank_world if window else None)
        opts = window.profiler_options if window else {}
        events = kineto_events(prof)
        t_build = time.perf_counter_ns()
        ops = extract_host_ops(events, with_stack=opts.get("with_stack", False),
                               module_intervals=window.module_intervals if window else None,
                               comm_calls=window.comm_calls if window else None,
                               comm_default_start=window.comm_default_start if window else None)
        runtime = self.session.get_runtime() if device and cfg.has(ProfileMode.DEVICE) else None
        simulated = bool(getattr(runtime, "simulated", False))
        from neuron_profiler.capture import backend
        hdr = make_header(PRODUCER, source_format="neuron-capture", rank=rank, world_size=world, simulated=simulated,
                          capture_config={**cfg.to_dict(), "profiler": opts}, run_id=cfg.run_id, window_index=index,
                          process_id=os.getpid(),
                          metadata={"torch_version": _torch_version(), "python_version": platform.python_version(),
                                    "privateuse1_backend": _privateuse1_name(),
                                    "privateuse1_registered_by_neuron_profiler": backend.registered_by_us(),
                                    "device_runtime": type(runtime).__name__ if runtime is not None else "none"})
        hdr.clock_domains.append(pb.ClockDomain(name="host_unix_ns",
                                                description="host CLOCK_REALTIME in ns (Kineto timestamps)"))
        b = TraceBuilder(hdr)
        pid = os.getpid()
        t_inst = b.add_track("instance", hdr.instance_id or platform.node(), rank=rank)
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
        if window is not None:
            _add_host_counters(b, window.host_samples, t_proc, pid, rank)
        if runtime is not None:
            runtime.emit(b, b.table("host_ops"))
        if window is not None:
            b.footer_metadata["window_start_ns"] = str(window.start_ns)
            b.footer_metadata["window_end_ns"] = str(window.end_ns)
        steps = [o["name"] for o in ops if o["name"].startswith("ProfilerStep#")]
        if steps:
            b.footer_metadata["profiler_steps"] = json.dumps(steps)
        b.footer_metadata["host_op_count"] = str(len(ops))
        b.footer_metadata["aten_op_count"] = str(sum(o["name"].startswith("aten::") for o in ops))
        b.footer_metadata["export_ms"] = f"{(time.perf_counter_ns() - t_build) / 1e6:.1f}"
        return b


def _preload_runtime_modules(config: NeuronConfig) -> None:
    import importlib
    importlib.import_module("neuron_profiler.runtime.hardware")
    if config.runtime != "hardware":
        importlib.import_module("neuron_profiler.runtime.simulated")


def _add_host_counters(b: Any, samples: dict[str, list[tuple[int, float]]], parent: int, pid: int, rank: int) -> None:
    from neuron_profiler.capture.counters import HostSampler
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


def _torch_version() -> str:
    import torch
    return torch.__version__


def _privateuse1_name() -> str:
    import torch
    return torch._C._get_privateuse1_backend_name()


def profile(config: "NeuronConfig | None" = None, *, schedule: "Callable[[int], Any] | None" = None,
            record_shapes: bool = True, with_stack: bool = False, with_modules: bool = True, with_flops: bool = False,
            activities: "Iterable[Any] | None" = None, **config_kwargs: Any) -> Any:
    """A ``torch.profiler.profile`` set up for Neuron capture (``config`` or ``NeuronConfig(**config_kwargs)``).

    The returned profiler has ``.neuron_profiler`` (its ``NeuronProfiler``; ``.paths`` lists the written traces)::

        with neuron_profiler.profile(profile_output_dir="out", schedule=torch.profiler.schedule(wait=1, warmup=1, active=2)) as p:
            for batch in data:
                step(batch)
                p.step()
    """
    import torch
    from torch.profiler import ProfilerActivity

    if config is not None and config_kwargs:
        raise ValueError(f"profile(): pass either config or NeuronConfig keyword arguments, not both "
                         f"(found {sorted(config_kwargs)})")
    cfg = config if config is not None else NeuronConfig(**config_kwargs)
    npf = NeuronProfiler(cfg)
    acts = list(activities) if activities is not None else [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
    prof = torch.profiler.profile(activities=acts, schedule=schedule, on_trace_ready=npf.export_trace,
                                  record_shapes=record_shapes, with_stack=with_stack, with_modules=with_modules,
                                  with_flops=with_flops, experimental_config=cfg)
    prof.neuron_profiler = npf
    return prof
