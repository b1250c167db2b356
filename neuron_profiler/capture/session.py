"""Per-``NeuronConfig`` capture state: what is recorded while a profiler window is active, handed to
``NeuronProfiler.export_trace`` when the window ends.

Only cheap recorders run in the hot path (collective wrappers, module hooks when ``with_modules``, the host
counter thread); the device runtime is simulated at export. The session is created once per config, by
``NeuronProfiler`` (see ``capture.hooks.session_for``).
"""
from __future__ import annotations

import collections
import os
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from neuron_profiler.capture import run_clock
from neuron_profiler.capture.comms import GROUP_ERRORS, CommRecorder, Problems
from neuron_profiler.capture.counters import HostSampler
from neuron_profiler.capture.modules import ModuleRecorder
from neuron_profiler.capture.sync import SyncRecorder
from neuron_profiler.modes import ProfileMode

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.config import NeuronConfig
    from neuron_profiler.runtime.base import DeviceRuntime

PROFILER_FLAGS = ("record_shapes", "with_stack", "with_modules", "with_flops", "profile_memory")


@dataclass
class WindowCapture:
    """What one active window recorded besides Kineto's events."""

    start_ns: int
    end_ns: int = 0
    comm_calls: list[dict[str, Any]] = field(default_factory=list)
    comm_default_start: dict[str, Any] | None = None
    module_intervals: list[tuple[int, int, str]] = field(default_factory=list)
    model: dict[str, str] = field(default_factory=dict)  # ModuleRecorder.model(): the model the window ran
    host_samples: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    profiler_options: dict[str, Any] = field(default_factory=dict)
    rank_world: tuple[int, int] | None = None
    ordinal: int = 0             # windows opened before this one (the same count on every rank)
    run_start_ns: int | None = None  # rank 0's start of the same window (run_clock), when known
    problems: list[str] = field(default_factory=list)
    dry_run: str = ""            # "meta" / "fake" when the window ran on meta or fake tensors (capture.dryrun)
    list_dtypes: dict[tuple, Any] | None = None  # element dtypes of tensor lists (capture.tensor_lists)


def dist_rank_and_world(problems: Problems | None = None) -> tuple[int, int] | None:
    """(rank, world_size) from torch.distributed when it is initialised, else None (a failure to read them is
    recorded in ``problems``)."""
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        return dist.get_rank(), dist.get_world_size()
    except GROUP_ERRORS as exc:
        if problems is not None:
            problems.add(f"torch.distributed is initialised but rank/world size are unreadable ({exc!r})")
        return None


def rank_and_world(seen: tuple[int, int] | None = None,
                   problems: Problems | None = None) -> tuple[int, int, str]:
    """(rank, world_size, where they came from): torch.distributed when initialised, else ``seen`` (what the
    window observed before the process group was destroyed), else RANK / WORLD_SIZE, else (0, 1)."""
    live = dist_rank_and_world(problems)
    if live is not None:
        return live[0], live[1], "torch.distributed"
    if seen is not None:
        return seen[0], seen[1], "torch.distributed during the window"
    env_rank, env_world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    try:
        if env_rank is not None:
            return int(env_rank), int(env_world or 1), "RANK/WORLD_SIZE environment"
    except ValueError:
        if problems is not None:
            problems.add(f"RANK={env_rank!r} / WORLD_SIZE={env_world!r} are not integers")
    return 0, 1, "default (no process group, no RANK)"


class CaptureSession:
    """Drives the recorders and the device runtime for one ``NeuronConfig``.

    ``runtime_for(rank)`` returns the device runtime for a rank (see ``neuron_profiler.runtime.factory``).
    ``unwritten`` lists the windows whose trace could not be written since the last one that was; the next
    written window records them.
    """

    def __init__(self, config: NeuronConfig, runtime_for: Callable[[int], DeviceRuntime]) -> None:
        self.config = config
        self.runtime_for = runtime_for
        self.window_index = 0
        self._opened = 0
        #: finished windows not yet exported, per profiler (a profiler of this config whose windows nobody
        #: exports holds only its own, and drops them when it goes away)
        self.pending: weakref.WeakKeyDictionary[Any, collections.deque[WindowCapture]] = weakref.WeakKeyDictionary()
        self.current: WindowCapture | None = None
        self.unwritten: list[dict[str, Any]] = []
        self._started: DeviceRuntime | None = None
        self._comms = CommRecorder()
        self._syncs = SyncRecorder()
        self._modules: ModuleRecorder | None = None
        self._sampler: HostSampler | None = None
        self._shapes_forced: weakref.WeakSet[Any] = weakref.WeakSet()
        self._unhook_init: Callable[[], None] | None = None  # run_clock.publish_after_init of the open window
        self._dry_modes: list[Any] = []

    def on_prepare(self, prof: Any) -> None:
        """The profiler is about to set up Kineto for a window. The device model needs every op's input
        shapes, so with DEVICE mode shapes are recorded even when the profiler was built without
        ``record_shapes`` (the trace header keeps what was asked for)."""
        if self.config.has(ProfileMode.DEVICE) and not getattr(prof, "record_shapes", True):
            prof.record_shapes = True
            self._shapes_forced.add(prof)

    def on_start(self, prof: Any) -> None:
        """A window became active. The window is registered first so exports stay paired with windows even if
        a recorder fails to start (the failure is reported by the hook)."""
        cfg = self.config
        w = WindowCapture(start_ns=time.time_ns())
        w.profiler_options = {k: bool(getattr(prof, k, False)) for k in PROFILER_FLAGS}
        if prof in self._shapes_forced:
            w.profiler_options["record_shapes_requested"] = False
        self.current = w
        w.rank_world = dist_rank_and_world(self._comms.problems)
        w.ordinal, self._opened = self._opened, self._opened + 1
        if w.rank_world is None:  # no process group yet: rank 0 publishes once init_process_group ran
            self._unhook_init = run_clock.publish_after_init(cfg.run_id or "", w.ordinal, w.start_ns,
                                                             self._comms.problems)
        elif w.rank_world[0] == 0 and w.rank_world[1] > 1:
            run_clock.publish_start(cfg.run_id or "", w.ordinal, w.start_ns, self._comms.problems)
        self._comms.start()
        self._syncs.start()
        w.comm_default_start = self._comms.default_start
        if w.profiler_options["with_modules"]:
            self._modules = ModuleRecorder()
            self._modules.start()
        if cfg.has(ProfileMode.CPU_UTIL) or cfg.has(ProfileMode.HOST_MEMORY):
            self._sampler = HostSampler(cfg.cpu_sample_interval_s, cfg.has(ProfileMode.CPU_UTIL),
                                        cfg.has(ProfileMode.HOST_MEMORY))
            self._sampler.start()
        if cfg.has(ProfileMode.DEVICE):
            self._enter_dry_run(w)
            rank = rank_and_world(w.rank_world, self._comms.problems)[0]
            self._started = self.runtime_for(rank)
            self._started.start()

    def on_stop(self, prof: Any) -> None:
        """The window ended (before torch's own stop)."""
        w = self.current
        if w is None:
            return
        self.current = None
        w.end_ns = time.time_ns()
        self.pending.setdefault(prof, collections.deque()).append(w)  # first: a failing recorder must not unpair
        self._exit_dry_run(w)  # next: a failing recorder must not leave the dry-run modes on the program
        self._syncs.stop()
        w.comm_calls = self._comms.stop()
        w.comm_default_start = self._comms.default_start
        w.rank_world = dist_rank_and_world(self._comms.problems) or self._comms.rank_world or w.rank_world
        unhook, self._unhook_init = self._unhook_init, None
        late = unhook is not None
        if unhook is not None:
            unhook()
        if w.rank_world is not None and w.rank_world[1] > 1:
            w.run_start_ns = w.start_ns if w.rank_world[0] == 0 else \
                run_clock.shared_start(self.config.run_id or "", w.ordinal, self._comms.problems,
                                       run_clock.LATE_WAIT_S if late else 0.0)
        if self._modules is not None:
            w.model = self._modules.model()
            w.module_intervals = self._modules.stop()
            self._modules = None
        if self._sampler is not None:
            w.host_samples = self._sampler.stop()
            self._sampler = None
        w.problems = self._comms.problems.take() + w.problems
        started, self._started = self._started, None
        if started is not None:
            started.stop()

    def _enter_dry_run(self, w: WindowCapture) -> None:
        """On meta or fake tensors, push the dry-run modes (``capture.dryrun``) for the window."""
        from neuron_profiler.capture import dryrun
        w.dry_run = dryrun.dry_run_kind()
        if not w.dry_run:
            return
        modes: list[Any] = [dryrun.ListDtypeRecorder()]
        if w.dry_run == "meta":
            modes.append(dryrun.MetaAsDevice())
        for m in modes:
            m.__enter__()
            self._dry_modes.append(m)

    def _exit_dry_run(self, w: WindowCapture) -> None:
        """Pop the dry-run modes (last pushed first) and keep what they recorded."""
        while self._dry_modes:
            m = self._dry_modes.pop()
            try:
                m.__exit__(None, None, None)
            except (RuntimeError, AssertionError) as exc:  # the program popped modes out of order
                w.problems.append(f"the dry-run mode {type(m).__name__} could not be popped ({exc!r})")
            if hasattr(m, "dtypes"):
                w.list_dtypes = m.dtypes
            if getattr(m, "compiled_meta", False):
                from neuron_profiler.capture.dryrun import COMPILED_META
                w.problems.append(COMPILED_META)

    def take_window(self, prof: Any) -> tuple[int, WindowCapture | None]:
        """(window index, the oldest finished window of ``prof``) for export."""
        idx = self.window_index
        self.window_index += 1
        queue = self.pending.get(prof)
        return idx, (queue.popleft() if queue else None)
