"""Synchronisation points of the captured program: where the host waits for the device.

On a real NeuronCore the host runs ahead of the device until it needs a result (``.item()``, ``.cpu()``,
``.tolist()``, printing a tensor, ``torch.neuron.synchronize()``). The simulated runtime projects the host
timeline from the captured op stream and must know these points; aten ops such as ``aten::item`` /
``aten::_local_scalar_dense`` show them by name, the rest are marked here with a ``record_function`` range
named ``neuron::sync <what>`` (category ``user_annotation`` in the trace).
"""
from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["SYNC_PREFIX", "mark_sync", "sync_range"]

#: Name prefix of the host ranges that mark a synchronisation point.
SYNC_PREFIX = "neuron::sync "


@contextlib.contextmanager
def sync_range(what: str) -> Iterator[None]:
    """A ``record_function`` range marking a host-device synchronisation (a no-op when torch is absent)."""
    try:
        from torch.autograd.profiler import record_function
    except ImportError:  # pragma: no cover - capture always has torch
        yield
        return
    with record_function(SYNC_PREFIX + what):
        yield


def mark_sync(what: str) -> None:
    """Record an instantaneous synchronisation point (e.g. ``torch.neuron.synchronize()``)."""
    with sync_range(what):
        pass
