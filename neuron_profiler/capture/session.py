"""Per-``NeuronConfig`` capture state: what is recorded while a profiler window is active, handed to
``NeuronProfiler.export_trace`` when the window ends.

Only cheap recorders run in the hot path (collective wrappers, module hooks when ``with_modules``, the host
counter thread); the device runtime is simulated at export.
"""
from __future__ import annotations

import collections
import os
import time
from dataclasses import dataclass, field
from typing import Any

from neuron_profiler.capture.comms import CommRecorder
from neuron_profiler.capture.counters import HostSampler
from neuron_profiler.capture.modules import ModuleRecorder
from neuron_profiler.capture.sync import SyncRecorder


@dataclass
class WindowCapture:
    """What one active window recorded besides Kineto's events."""

    start_ns: int
    end_ns: int = 0
    comm_calls: list[dict[str, Any]] = field(default_factory=list)
    comm_default_start: "dict[str, Any] | None" = None
    module_intervals: list[tuple[int, int, str]] = field(default_factory=list)
    host_samples: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    profiler_options: dict[str, Any] = field(default_factory=dict)
    rank_world: "tuple[int, int] | None" = None


def dist_rank_and_world() -> "tuple[int, int] | None":
    """(rank, world_size) from torch.distributed when it is initialised, else None."""
    try:
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:
        pass
    return None


def rank_and_world(seen: "tuple[int, int] | None" = None) -> tuple[int, int]:
    """(rank, world_size) from torch.distributed when initialised, else ``seen`` (what the window observed before
    the process group was destroyed), else RANK / WORLD_SIZE, else (0, 1)."""
    return dist_rank_and_world() or seen or (int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))


class CaptureSession:
    """Drives the recorders and the device runtime for one ``NeuronConfig``."""

    def __init__(self, config: Any) -> None:
        from neuron_profiler.config import ProfileMode
        self.config = config
        self._modes = ProfileMode
        self.window_index = 0
        self.pending: "collections.deque[WindowCapture]" = collections.deque()
        self.current: "WindowCapture | None" = None
        self.runtime: Any = None
        self._comms = CommRecorder()
        self._syncs = SyncRecorder()
        self._modules: "ModuleRecorder | None" = None
        self._sampler: "HostSampler | None" = None

    def get_runtime(self) -> Any:
        """The device runtime (created on first use; see ``neuron_profiler.profiler.make_runtime``)."""
        if self.runtime is None:
            from neuron_profiler.profiler import make_runtime
            self.runtime = make_runtime(self.config, rank_and_world()[0])
        return self.runtime

    def on_start(self, prof: Any) -> None:
        """A window became active. The window is registered first so exports stay paired with windows even if
        a recorder fails to start (the failure propagates as a warning from the hook)."""
        cfg, M = self.config, self._modes
        w = WindowCapture(start_ns=time.time_ns())
        w.profiler_options = {k: bool(getattr(prof, k, False)) for k in
                              ("record_shapes", "with_stack", "with_modules", "with_flops", "profile_memory")}
        self.current = w
        w.rank_world = dist_rank_and_world()
        self._comms.start()
        self._syncs.start()
        w.comm_default_start = self._comms.default_start
        if w.profiler_options["with_modules"]:
            self._modules = ModuleRecorder()
            self._modules.start()
        if cfg.has(M.CPU_UTIL) or cfg.has(M.HOST_MEMORY):
            self._sampler = HostSampler(cfg.cpu_sample_interval_s, cfg.has(M.CPU_UTIL), cfg.has(M.HOST_MEMORY))
            self._sampler.start()
        if cfg.has(M.DEVICE):
            self.get_runtime().start()

    def on_stop(self, prof: Any) -> None:
        """The window ended (before torch's own stop)."""
        w = self.current
        if w is None:
            return
        self.current = None
        w.end_ns = time.time_ns()
        self._syncs.stop()
        w.comm_calls = self._comms.stop()
        w.comm_default_start = self._comms.default_start
        w.rank_world = dist_rank_and_world() or self._comms.rank_world or w.rank_world
        if self._modules is not None:
            w.module_intervals = self._modules.stop()
            self._modules = None
        if self._sampler is not None:
            w.host_samples = self._sampler.stop()
            self._sampler = None
        if self.runtime is not None and self.config.has(self._modes.DEVICE):
            self.runtime.stop()
        self.pending.append(w)

    def take_window(self) -> "tuple[int, WindowCapture | None]":
        """(window index, the oldest finished window's capture) for export."""
        idx = self.window_index
        self.window_index += 1
        return idx, (self.pending.popleft() if self.pending else None)
