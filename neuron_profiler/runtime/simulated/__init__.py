"""The simulated Neuron runtime: a first-order performance model of trn1/inf2/trn2/trn3 NeuronCores.

``SimulatedRuntime(target="trn2").emit(builder, host_ops)`` adds devices, engine instructions, DMA,
collectives, counters and host -> device flows for a window's host ops.
"""
from neuron_profiler.runtime.simulated.runtime import MODEL_VERSION, SimulatedRuntime

__all__ = ["SimulatedRuntime", "MODEL_VERSION"]
