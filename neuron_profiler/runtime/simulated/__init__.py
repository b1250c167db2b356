"""The simulated Neuron runtime: a performance model of trn1/inf2/trn2/trn3 NeuronCores.

``SimulatedRuntime(target="trn2").emit(builder, host_ops)`` projects the window's host timeline onto the
target's host, schedules the device work asynchronously on a NeuronCore (engines, DMA, collectives) and
adds devices, instructions, DMA, collectives, counters and flows. See ``docs/simulation.md``.
"""
from __future__ import annotations

from typing import Any

__all__ = ["SimulatedRuntime", "MODEL_VERSION"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from neuron_profiler.runtime.simulated import runtime
        return getattr(runtime, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
