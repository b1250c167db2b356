"""``NeuronProfiler``: wires capture into torch once, and turns each finished ``torch.profiler`` window into one
``.nprof`` trace file.

Use ``on_trace_ready=NeuronProfiler(cfg).export_trace`` with ``experimental_config=cfg``. Building a
``NeuronProfiler`` (before the ``torch.profiler.profile`` it serves, since it is its argument) is where capture
is wired: the "neuron" PrivateUse1 name and hooks (``capture.backend``), the profiler hooks
(``capture.hooks``), the config's capture session and its device runtime (``runtime.factory``, which raises
here when the requested runtime cannot work). Each active window is written when it ends (so a later crash
leaves earlier windows readable) to ``<profile_output_dir>/<run_id>/rank{rank:05d}_window{index:03d}.nprof``.

Profiling never stops the program: a window that cannot be written (full or read-only disk) or built is one
line on the ``neuron_profiler`` logger, listed in ``failures`` and recorded in the footer of the next window
that is written (``unwritten_windows``).
"""
from __future__ import annotations

import gc
import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from neuron_profiler.capture import backend, hooks
from neuron_profiler.capture.assemble import build_window_trace
from neuron_profiler.capture.output import trace_path, unique_path, write_window
from neuron_profiler.capture.report import notice
from neuron_profiler.capture.session import CaptureSession, WindowCapture
from neuron_profiler.config import NeuronConfig
from neuron_profiler.modes import ProfileMode
from neuron_profiler.runtime.base import DeviceRuntime
from neuron_profiler.runtime.factory import runtime_provider

__all__ = ["NeuronProfiler", "profile", "trace_path"]


def _no_device_runtime(rank: int) -> DeviceRuntime:
    raise RuntimeError("no DEVICE mode: capture asked for a device runtime")  # never called without DEVICE


class NeuronProfiler:
    """Exports torch.profiler windows captured with a ``NeuronConfig`` as trace files.

    ``runtime``: a ``DeviceRuntime`` to use instead of the one ``config`` selects; ``skip_empty``: write nothing
    for windows without any aten op. Raises ``RuntimeUnavailableError`` when ``config.runtime`` asks for (or
    "auto" finds) Neuron hardware whose device events cannot be captured, saying what is missing.

    Attributes:
        paths: the files written so far, in window order.
        failures: the windows that could not be written: dicts with window, path, error.
    """

    def __init__(self, config: NeuronConfig, *, runtime: DeviceRuntime | None = None, skip_empty: bool = False) -> None:
        if not isinstance(config, NeuronConfig):
            raise TypeError(f"NeuronProfiler expects a NeuronConfig, found {type(config).__name__}")
        self.config = config
        if runtime is not None:
            provider: Callable[[int], DeviceRuntime] = lambda rank: runtime  # noqa: E731
        elif config.has(ProfileMode.DEVICE):
            provider = runtime_provider(config)
        else:
            provider = _no_device_runtime
        backend.register_neuron_backend()
        hooks.install()
        self.session: CaptureSession = hooks.session_for(config, lambda: CaptureSession(config, provider))
        if runtime is not None:
            self.session.runtime_for = provider  # an explicit runtime wins over the config's
        self.paths: list[Path] = []
        self.failures: list[dict[str, Any]] = []
        self.skip_empty = skip_empty

    def export_trace(self, prof: Any) -> Path | None:
        """``on_trace_ready`` callback: build and write the trace of the window that just ended; returns its path,
        or None when nothing was written (``skip_empty`` and no aten op, e.g. a launcher process of the runner;
        or a failure, reported as one line and in ``failures``)."""
        if getattr(prof, "experimental_config", None) is not self.config:
            raise ValueError("export_trace: the profiler's experimental_config is not this NeuronProfiler's "
                             "NeuronConfig; pass experimental_config=cfg and "
                             "on_trace_ready=NeuronProfiler(cfg).export_trace")
        index, window = self.session.take_window(prof)
        gc_was_enabled = gc.isenabled()
        gc.disable()  # many small allocations: cyclic GC passes over a large torch heap dominated export time
        try:
            return self._export(prof, index, window)
        except Exception as exc:  # noqa: BLE001 - a capture bug must not stop training; it is reported
            self._failed(index, None, f"building the trace failed ({exc!r}; please report this)")
            return None
        finally:
            if gc_was_enabled:
                gc.enable()

    def _export(self, prof: Any, index: int, window: WindowCapture | None) -> Path | None:
        device = self.session.runtime_for if self.config.has(ProfileMode.DEVICE) else None
        builder = build_window_trace(prof, self.config, index, window, device)
        if self.skip_empty and builder.footer_metadata.get("aten_op_count") == "0":
            return None
        path = unique_path(trace_path(self.config.profile_output_dir, self.config.run_id, builder.header.rank, index))
        if self.session.unwritten:
            builder.footer_metadata["unwritten_windows"] = json.dumps(self.session.unwritten)
        try:
            write_window(builder, path)
        except OSError as exc:
            self._failed(index, path, exc.strerror or repr(exc))
            return None
        self.session.unwritten.clear()
        self.paths.append(path)
        return path

    def _failed(self, index: int, path: Path | None, error: str) -> None:
        entry = {"window": index, "path": str(path) if path is not None else None, "error": error}
        self.failures.append(entry)
        self.session.unwritten.append(entry)
        where = f" to {path}" if path is not None else ""
        notice(f"window {index} not written{where}: {error}; the program goes on, and the next window written "
               f"records this")


def profile(config: NeuronConfig | None = None, *, schedule: Callable[[int], Any] | None = None,
            record_shapes: bool = True, with_stack: bool = False, with_modules: bool = True, with_flops: bool = False,
            activities: Iterable[Any] | None = None, **config_kwargs: Any) -> Any:
    """A ``torch.profiler.profile`` set up for Neuron capture (``config`` or ``NeuronConfig(**config_kwargs)``).

    The returned profiler has ``.neuron_profiler`` (its ``NeuronProfiler``; ``.paths`` lists the written traces)::

        with neuron_profiler.profile(profile_output_dir="out",
                                     schedule=torch.profiler.schedule(wait=1, warmup=1, active=2)) as p:
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
    prof.neuron_profiler = npf  # type: ignore[attr-defined]  # the documented extra attribute on torch's object
    return prof
