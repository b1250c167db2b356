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
    """Records ``(start_ns, end_ns, qualified_name)`` for every module forward call between start and stop."""

    def __init__(self) -> None:
        self.intervals: list[tuple[int, int, str]] = []
        self._local = threading.local()
        self._names: dict[int, dict[int, str]] = {}  # id(parent) -> {id(descendant): relative name}
        self._handles: list[Any] = []
        self._objs: dict[int, torch.nn.Module] = {}

    def _stack(self) -> list[tuple[str, int, int]]:
        st = getattr(self._local, "stack", None)
        if st is None:
            st = self._local.stack = []
        return st

    def _qualname(self, module: torch.nn.Module, stack: list[tuple[str, int, int]]) -> str:
        if not stack:
            return type(module).__name__
        parent_name, parent_id = stack[-1][0], stack[-1][1]
        rel = self._names.get(parent_id)
        if rel is None:
            rel = {}
            parent = self._objs.get(parent_id)
            if parent is not None:
                for name, sub in parent.named_modules():
                    if name:
                        rel.setdefault(id(sub), name)
            self._names[parent_id] = rel
        sub = rel.get(id(module))
        return f"{parent_name}.{sub}" if sub else f"{parent_name}.{type(module).__name__}"

    def _pre(self, module: torch.nn.Module, args: Any) -> None:
        st = self._stack()
        self._objs[id(module)] = module
        st.append((self._qualname(module, st), id(module), time.time_ns()))

    def _post(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        st = self._stack()
        if st and st[-1][1] == id(module):
            name, _, t0 = st.pop()
            self.intervals.append((t0, time.time_ns(), name))

    def start(self) -> None:
        """Install the global hooks."""
        self.intervals = []
        self._names = {}
        self._objs = {}
        mm = torch.nn.modules.module
        self._handles = [mm.register_module_forward_pre_hook(self._pre),
                         mm.register_module_forward_hook(self._post, always_call=True)]

    def stop(self) -> list[tuple[int, int, str]]:
        """Remove the hooks; returns the recorded intervals."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self._objs = {}
        self._names = {}
        return self.intervals
