"""Names of trace events that one part of the project writes and another reads (a leaf module: it imports
nothing, so capture, which writes them, and the simulated runtime, which reads them, both depend on it rather
than on each other)."""
from __future__ import annotations

__all__ = ["SYNC_PREFIX"]

#: Name prefix of the host ranges that mark a synchronisation point (``neuron::sync Tensor.cpu``): written by
#: :mod:`neuron_profiler.capture.sync`, read by the simulated runtime to project where the host waits.
SYNC_PREFIX = "neuron::sync "
