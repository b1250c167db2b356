"""Register the name "neuron" for torch's PrivateUse1 backend so ``ProfilerActivity.PrivateUse1`` is accepted.

Only done when no real Neuron backend (torch_neuronx / TorchNeuron) is loaded and PrivateUse1 is still
unnamed. A stub ``torch.neuron`` device module reports no devices, so ``torch.accelerator.is_available()``
stays False and ``current_accelerator(check_available=True)`` stays None instead of raising.
"""
from __future__ import annotations

import sys
import types

import torch

BACKEND_NAME = "neuron"
_registered_here = False


def real_neuron_backend_loaded() -> bool:
    """True when torch_neuronx (or TorchNeuron) is imported in this process."""
    return any(name in sys.modules for name in ("torch_neuronx", "torch_neuron", "torchneuron"))


def _stub_module() -> types.ModuleType:
    mod = types.ModuleType("torch.neuron")
    mod.__doc__ = "Stub registered by neuron_profiler: no Neuron device is present (device events are simulated)."
    mod.is_available = lambda: False  # type: ignore[attr-defined]
    mod.device_count = lambda: 0  # type: ignore[attr-defined]
    mod.is_initialized = lambda: False  # type: ignore[attr-defined]
    mod.current_device = lambda: 0  # type: ignore[attr-defined]
    mod.synchronize = lambda device=None: None  # type: ignore[attr-defined]
    mod._is_in_bad_fork = lambda: False  # type: ignore[attr-defined]  # torch.manual_seed probes these two
    mod.manual_seed_all = lambda seed: None  # type: ignore[attr-defined]
    mod._is_neuron_profiler_stub = True  # type: ignore[attr-defined]
    return mod


def register_neuron_backend() -> str:
    """Make PrivateUse1 usable in the profiler; returns the PrivateUse1 backend name now in effect.

    Idempotent. Leaves an existing registration (a real Neuron backend or another PrivateUse1 device) alone.
    """
    global _registered_here
    current = torch._C._get_privateuse1_backend_name()
    if current != "privateuseone" or real_neuron_backend_loaded():
        return current
    torch.utils.rename_privateuse1_backend(BACKEND_NAME)
    if getattr(torch, BACKEND_NAME, None) is None:
        torch._register_device_module(BACKEND_NAME, _stub_module())
    _registered_here = True
    return BACKEND_NAME


def registered_by_us() -> bool:
    """True when this process's "neuron" PrivateUse1 name was registered by neuron_profiler (not a real backend)."""
    return _registered_here
