"""The runtime interface: host op stream in, device events out.

Capture (``neuron_profiler.profiler``) knows only this interface. Two implementations exist:
``neuron_profiler.runtime.simulated.SimulatedRuntime`` (a performance model of trn1/inf2/trn2/trn3) and
``neuron_profiler.runtime.hardware.HardwareRuntime`` (real Neuron devices through the Neuron runtime's
inspect capture, converted from Neuron Explorer's Parquet output).

Lifecycle, driven by capture for each profiler active window::

    rt.start()                      # before the profiled code runs (cheap; no simulation here)
    ...profiled code...
    rt.stop()
    rt.emit(builder, host_ops)      # at export: add devices, tracks, device events and flows

``host_ops`` is the window's ``host_ops`` table as the trace reader returns it (index = row id in the
trace; columns as in ``schemas/neuron_trace.proto`` ``HostOpColumns``). Collectives are host ops whose
``args`` JSON holds Kineto's ``record_param_comms`` keys ("Collective name", "Process Group Name",
"Process Group Ranks", "Group size", "Seq", "In msg nelems", "Out msg nelems", "dtype").
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from neuron_profiler.trace.builder import TraceBuilder


class RuntimeUnavailableError(RuntimeError):
    """The requested runtime cannot run here (e.g. no Neuron device or torch_neuronx)."""


class DeviceRuntime(abc.ABC):
    """Produces the device side of a trace for the host ops captured in one profiler window."""

    #: True when device events are modelled rather than measured (recorded in the trace header).
    simulated: bool = True

    def start(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Begin device capture. Called when a profiler window becomes active."""

    def stop(self) -> None:  # noqa: B027 - optional hook
        """End device capture. Called when the window ends, before ``emit``."""

    @abc.abstractmethod
    def emit(self, builder: TraceBuilder, host_ops: pd.DataFrame) -> None:
        """Add this window's devices (header), tracks, instructions, DMA, collectives, counters and
        flows (host op -> device event) to ``builder``."""
