"""Module hierarchy for host ops (``with_modules``): global forward hooks record, while a window is
active, when each ``nn.Module`` call starts and ends and its qualified name ("GPT.blocks.0.attn.c_attn").

Host ops are later attributed to the innermost module call that contains them in time (clocks: both
sides are Unix-epoch nanoseconds; measured agreement ~1 us).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import torch


class ModuleRecorder:
    """Records ``(start_ns, end_ns, qualified_name)`` for every module forward call between start and stop.

    Holds no reference to any module beyond the calls in progress (dropping the last reference to e.g. a DDP
    module from inside a profiler callback can block on its communication threads)."""

    def __init__(self) -> None:
        self.intervals: list[tuple[int, int, str]] = []
        self._local = threading.local()
        self._names: dict[int, dict[int, str]] = {}  # id(parent) -> {id(descendant): relative name}
        self._handles: list[Any] = []

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
        st.append((self._qualname(module, st), module, time.time_ns()))

    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if torch.compiler.is_compiling():
            return
        st = self._stack()
        if st and st[-1][1] is module:
            name, _, t0 = st.pop()
            self.intervals.append((t0, time.time_ns(), name))

    def start(self) -> None:
        """Install the global hooks."""
        self.intervals = []
        self._names = {}
        mm = torch.nn.modules.module
        self._handles = [mm.register_module_forward_pre_hook(self._pre),
                         mm.register_module_forward_hook(self._post, always_call=True)]

    def stop(self) -> list[tuple[int, int, str]]:
        """Remove the hooks; returns the recorded intervals."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._names = {}
        return self.intervals
