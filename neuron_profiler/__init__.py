"""neuron_profiler: a profiler and trace explorer for PyTorch on AWS Trainium (Neuron).

``NeuronConfig``, ``ProfileMode``, ``NeuronProfiler`` and ``profile`` are loaded lazily so that importing this
package (e.g. for the trace reader) does not import torch.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_LAZY = {"NeuronConfig": "neuron_profiler.config", "ProfileMode": "neuron_profiler.modes",
         "NeuronProfiler": "neuron_profiler.profiler", "profile": "neuron_profiler.profiler"}

__all__ = ["NeuronConfig", "ProfileMode", "NeuronProfiler", "profile", "__version__"]


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'neuron_profiler' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
