"""Which device runtime a ``NeuronConfig`` gets, and making it.

``runtime="simulated"`` always simulates. ``runtime="hardware"`` needs everything
``HardwareRuntime.missing()`` checks. ``runtime="auto"`` simulates where there is no Neuron device, uses the
hardware where it can deliver device events, and raises ``RuntimeUnavailableError`` (what is missing, how to get
it, or ``runtime='simulated'``) where a device is present but its events cannot be captured: a Trainium user
never gets host-only traces, or modelled ones, without asking.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from neuron_profiler.runtime.base import DeviceRuntime, RuntimeUnavailableError
from neuron_profiler.runtime.hardware import HardwareRuntime
from neuron_profiler.runtime.simulated import SimulatedRuntime

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.config import NeuronConfig

__all__ = ["resolve_runtime", "make_runtime", "runtime_provider"]


def resolve_runtime(runtime: str) -> str:
    """``"hardware"`` or ``"simulated"`` for a ``runtime`` option; raises ``RuntimeUnavailableError`` when the
    hardware is asked for (or present, with "auto") but cannot deliver device events."""
    if runtime == "simulated":
        return "simulated"
    if runtime == "hardware":
        HardwareRuntime.check_available()
        return "hardware"
    if not HardwareRuntime.device_present():
        return "simulated"
    missing = HardwareRuntime.missing()
    if missing:
        raise RuntimeUnavailableError(
            "runtime='auto' found a Neuron device but cannot capture its device events, missing: "
            + "; ".join(missing) + ". Fix these, or pass runtime='simulated' for modelled device events "
            "(the trace then says simulated).")
    return "hardware"


def make_runtime(config: NeuronConfig, rank: int, kind: str | None = None) -> DeviceRuntime:
    """The device runtime of ``config`` for the process of ``rank`` (``kind`` = a ``resolve_runtime`` answer)."""
    kind = kind or resolve_runtime(config.runtime)
    if kind == "hardware":
        return HardwareRuntime(config)
    return SimulatedRuntime(target=config.target, max_events_per_nc=config.max_events_per_nc,
                            capture_enabled_for_nc=config.capture_enabled_for_nc, num_cores=config.num_cores,
                            rank=rank, host_model=config.host_model,
                            auto_cast=getattr(config, "auto_cast", "none"))


def runtime_provider(config: NeuronConfig) -> Callable[[int], DeviceRuntime]:
    """``rank -> runtime`` for capture: resolved now (errors surface before anything is profiled), built on
    first use. A simulated runtime places the process's core by rank (known only once torch.distributed is
    initialised, maybe inside the window), so there is one per rank seen; the hardware runtime is one."""
    kind = resolve_runtime(config.runtime)
    made: dict[int, DeviceRuntime] = {}

    def runtime_for(rank: int) -> DeviceRuntime:
        key = 0 if kind == "hardware" else rank
        if key not in made:
            made[key] = make_runtime(config, rank, kind)
        return made[key]
    return runtime_for
