"""Register the name "neuron" for torch's PrivateUse1 backend so ``ProfilerActivity.PrivateUse1`` is accepted,
without changing what the program sees of its devices.

Only done when no real Neuron backend (torch_neuronx / TorchNeuron) is loaded and PrivateUse1 is still
unnamed. Three registrations, all needed:

- the name (``torch.utils.rename_privateuse1_backend``), which the profiler checks;
- a stub ``torch.neuron`` device module reporting no devices, so ``torch.accelerator.is_available()`` stays
  False and ``torch.get_device_module("neuron")`` answers; its ``synchronize()`` marks a synchronisation
  point for the simulator (``capture.sync``);
- PrivateUse1 hooks (``torch._C._acc.register_python_privateuseone_hook``) answering "not built, not
  available". Without them every API that asks torch for the current accelerator
  (``torch._C._get_accelerator()``: ``dist.barrier()``, ``torch.get_device_module()``, pinned memory)
  raises "Please register PrivateUse1HooksInterface"; with them those APIs see a CPU-only machine.

No device guard is registered: torch would then count one "neuron" device.
"""
from __future__ import annotations

import sys
import types

import torch

from neuron_profiler.capture.sync import mark_sync

BACKEND_NAME = "neuron"
_registered_here = False
_hooks: torch._C._acc.PrivateUse1Hooks | None = None  # kept alive for the process (torch holds a raw pointer)


class NoDeviceHooks(torch._C._acc.PrivateUse1Hooks):
    """PrivateUse1 hooks of a backend that has a name but no device: not built, not available."""

    def is_built(self) -> bool:
        return False

    def is_available(self) -> bool:
        return False

    def has_primary_context(self, device_index: int) -> bool:
        return False


def real_neuron_backend_loaded() -> bool:
    """True when torch_neuronx (or TorchNeuron) is imported in this process."""
    return any(name in sys.modules for name in ("torch_neuronx", "torch_neuron", "torchneuron"))


def _synchronize(device: object = None) -> None:
    """``torch.neuron.synchronize()``: no device to wait for; marks the synchronisation point for the simulator."""
    mark_sync("torch.neuron.synchronize")


def _stub_module() -> types.ModuleType:
    mod = types.ModuleType("torch.neuron")
    mod.__doc__ = "Stub registered by neuron_profiler: no Neuron device is present (device events are simulated)."
    mod.is_available = lambda: False  # type: ignore[attr-defined]
    mod.device_count = lambda: 0  # type: ignore[attr-defined]
    mod.is_initialized = lambda: False  # type: ignore[attr-defined]
    mod.current_device = lambda: 0  # type: ignore[attr-defined]
    mod.synchronize = _synchronize  # type: ignore[attr-defined]
    mod._is_in_bad_fork = lambda: False  # type: ignore[attr-defined]  # torch.manual_seed probes these two
    mod.manual_seed_all = lambda seed: None  # type: ignore[attr-defined]
    mod._is_neuron_profiler_stub = True  # type: ignore[attr-defined]
    return mod


def register_neuron_backend() -> str:
    """Make PrivateUse1 usable in the profiler; returns the PrivateUse1 backend name now in effect.

    Idempotent. Leaves an existing registration (a real Neuron backend or another PrivateUse1 device) alone.
    """
    global _registered_here, _hooks
    current = torch._C._get_privateuse1_backend_name()
    if current != "privateuseone" or real_neuron_backend_loaded():
        return current
    torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    if getattr(torch, BACKEND_NAME, None) is None:
        torch._register_device_module(BACKEND_NAME, _stub_module())
    hooks = NoDeviceHooks()
    if torch._C._acc.register_python_privateuseone_hook(hooks):
        _hooks = hooks
    _registered_here = True
    return BACKEND_NAME


def registered_by_us() -> bool:
    """True when this process's "neuron" PrivateUse1 name was registered by neuron_profiler (not a real backend)."""
    return _registered_here
