"""Device runtimes: where device events come from (the simulated Neuron runtime or real hardware)."""
from neuron_profiler.runtime.base import DeviceRuntime, RuntimeUnavailableError

__all__ = ["DeviceRuntime", "RuntimeUnavailableError"]
