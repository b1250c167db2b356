"""Synchronisation points of the captured program: where the host waits for the device.

On a real NeuronCore the host runs ahead of the device until it needs a result (``.item()``, ``.cpu()``,
``.tolist()``, printing a tensor, ``torch.neuron.synchronize()``). The simulated runtime projects the host
timeline from the captured op stream and must know these points; aten ops such as ``aten::item`` /
``aten::_local_scalar_dense`` show them by name, the rest are marked here with a ``record_function`` range
named ``neuron::sync <what>`` (category ``user_annotation`` in the trace).
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator

from neuron_profiler.eventnames import SYNC_PREFIX

__all__ = ["SYNC_PREFIX", "SYNC_METHODS", "SyncRecorder", "mark_sync", "sync_range"]


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


#: torch.Tensor methods that hand device data to the host (each one is a synchronisation point on a device)
SYNC_METHODS = ("cpu", "tolist", "numpy", "__repr__", "__format__", "__bool__", "__float__", "__int__")


class SyncRecorder:
    """While active, marks every call of ``SYNC_METHODS`` with a ``neuron::sync Tensor.<name>`` range (only the
    outermost one when they nest, e.g. ``__repr__`` calling ``tolist``). On this machine the tensors live on
    the CPU and these calls are free, but on a NeuronCore each one waits for the device."""

    def __init__(self) -> None:
        self._saved: dict[str, object] = {}
        import threading
        self._local = threading.local()

    def _wrap(self, name: str, orig):  # noqa: ANN001, ANN202
        local = self._local

        def wrapper(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            if getattr(local, "busy", False):
                return orig(*args, **kwargs)
            local.busy = True
            try:
                with sync_range(f"Tensor.{name}"):
                    return orig(*args, **kwargs)
            finally:
                local.busy = False
        wrapper.__wrapped__ = orig  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(orig, "__name__", name)
        wrapper.__doc__ = getattr(orig, "__doc__", None)
        return wrapper

    def start(self) -> None:
        """Wrap the methods (idempotent)."""
        import torch
        if self._saved:
            return
        for name in SYNC_METHODS:
            orig = torch.Tensor.__dict__.get(name, getattr(torch.Tensor, name, None))
            if orig is None:
                continue
            self._saved[name] = torch.Tensor.__dict__.get(name, _MISSING)
            setattr(torch.Tensor, name, self._wrap(name, getattr(torch.Tensor, name)))

    def stop(self) -> None:
        """Restore the original methods."""
        import torch
        for name, orig in self._saved.items():
            if orig is _MISSING:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, orig)
        self._saved = {}


_MISSING = object()
