"""Module hierarchy for host ops (``with_modules``): global forward hooks record, while a window is
active, when each ``nn.Module`` call starts and ends and its qualified name ("GPT.blocks.0.attn.c_attn").

Host ops are later attributed to the innermost module call that contains them in time (clocks: both
sides are Unix-epoch nanoseconds; measured agreement ~1 us).

The recorder also names the model the window ran (:meth:`ModuleRecorder.model`): the outermost module with
parameters, unwrapped from ``torch.compile`` / DDP / FSDP wrappers, that took the most forward time; capture
writes it to ``header.metadata["model"]`` (and its parameter count to ``"model_parameters"``), which the
analysis uses to pair traces of one model (eager vs compiled, two ranks).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import torch

#: wrappers whose inner module is the model: attribute holding it
_WRAPPERS = {"OptimizedModule": "_orig_mod", "DistributedDataParallel": "module", "DataParallel": "module",
             "FullyShardedDataParallel": "_fsdp_wrapped_module"}


def unwrapped(module: torch.nn.Module) -> torch.nn.Module:
    """The model inside ``torch.compile`` / DDP / DataParallel / FSDP wrappers (``module`` itself otherwise)."""
    for _ in range(8):
        attr = _WRAPPERS.get(type(module).__name__)
        inner = getattr(module, attr, None) if attr else None
        if not isinstance(inner, torch.nn.Module):
            return module
        module = inner
    return module


class ModuleRecorder:
    """Records ``(start_ns, end_ns, qualified_name)`` for every module forward call between start and stop.

    Holds no reference to any module beyond the calls in progress (dropping the last reference to e.g. a DDP
    module from inside a profiler callback can block on its communication threads)."""

    def __init__(self) -> None:
        self.intervals: list[tuple[int, int, str]] = []
        self._local = threading.local()
        self._names: dict[int, dict[int, str]] = {}  # id(parent) -> {id(descendant): relative name}
        self._handles: list[Any] = []
        self._roots: dict[str, list[int]] = {}  # model class name -> [forward ns, parameters]
        self._root_info: dict[int, tuple[str, int]] = {}  # id(root module) -> (class name, parameters)

    def _stack(self) -> list[tuple[str, torch.nn.Module, int]]:
        st = getattr(self._local, "stack", None)
        if st is None:
            st = self._local.stack = []
        return st

    def _qualname(self, module: torch.nn.Module, stack: list[tuple[str, torch.nn.Module, int]]) -> str:
        if not stack:
            return type(module).__name__
        parent_name, parent = stack[-1][0], stack[-1][1]
        rel = self._names.get(id(parent))
        if rel is None:
            rel = {}
            for name, sub in parent.named_modules():
                if name:
                    rel.setdefault(id(sub), name)
            self._names[id(parent)] = rel
        sub = rel.get(id(module))
        return f"{parent_name}.{sub}" if sub else f"{parent_name}.{type(module).__name__}"

    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        if torch.compiler.is_compiling():  # inside torch.compile tracing: a hook here would break the graph
            return
        st = self._stack()
        if not st and id(module) not in self._root_info:
            self._root_info[id(module)] = _model_info(module)
        st.append((self._qualname(module, st), module, time.time_ns()))

    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        st = self._stack()
        if st and st[-1][1] is module:
            name, _, t0 = st.pop()
            t1 = time.time_ns()
            self.intervals.append((t0, t1, name))
            if not st:
                cls, params = self._root_info.get(id(module), ("", 0))
                if params > 0 and cls != "GraphModule":  # a model, not a loss module or a compiled graph
                    entry = self._roots.setdefault(cls, [0, params])
                    entry[0] += t1 - t0

    def start(self) -> None:
        """Install the global hooks."""
        self.intervals = []
        self._names = {}
        self._roots, self._root_info = {}, {}
        mm = torch.nn.modules.module
        self._handles = [mm.register_module_forward_pre_hook(self._pre),
                         mm.register_module_forward_hook(self._post, always_call=True)]

    def stop(self) -> list[tuple[int, int, str]]:
        """Remove the hooks; returns the recorded intervals."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._names = {}
        self._root_info = {}
        return self.intervals

    def model(self) -> dict[str, str]:
        """``{"model": class name, "model_parameters": count}`` of the outermost module with parameters that
        took the most forward time in the window (wrappers unwrapped); ``{}`` when no module ran."""
        if not self._roots:
            return {}
        name, (_, params) = max(self._roots.items(), key=lambda kv: kv[1][0])
        return {"model": name, "model_parameters": str(params)}


def _model_info(module: torch.nn.Module) -> tuple[str, int]:
    """(class name of the unwrapped model, its parameter count) of a root module call."""
    inner = unwrapped(module)
    try:
        params = sum(int(p.numel()) for p in inner.parameters())
    except Exception:  # noqa: BLE001 - an exotic module: named, parameters unknown
        params = 0
    return type(inner).__name__, params
