"""Compiled graphs of this process (torch-free): what ``torch.compile(backend="neuron")`` handed the device.

The backend registers each graph it compiles as a *graph program*: its aten nodes with the shapes and
dtypes of their inputs, where each input comes from (another node, a graph input, a parameter) and which
nodes are the graph's outputs. At run time every call of the graph is a host range named
``neuron::graph <id>``; the simulated runtime lowers the program once and runs it as one device launch.
Traces carry the programs they use in footer metadata (``GRAPHS_KEY``) so they can be re-simulated.
"""
from __future__ import annotations

import json
import threading
from typing import Any

__all__ = ["GRAPH_PREFIX", "GRAPHS_KEY", "register", "program", "programs_json", "parse_programs", "graph_id_of"]

#: name prefix of the host range of one compiled-graph call
GRAPH_PREFIX = "neuron::graph "
#: footer metadata key holding the programs of the graphs a trace calls (JSON: {id: program})
GRAPHS_KEY = "neuron.compiled_graphs"
FORMAT_VERSION = 1

_lock = threading.Lock()
_programs: dict[str, dict[str, Any]] = {}


def register(kind: str, prog: dict[str, Any]) -> str:
    """Store a graph program (``{"nodes": [...], "outputs": [...]}``); returns its id, e.g. ``"g3.fw"``."""
    with _lock:
        gid = f"g{len(_programs)}.{kind}"
        _programs[gid] = {"version": FORMAT_VERSION, "kind": kind, **prog}
        return gid


def program(gid: str) -> dict[str, Any] | None:
    """The program registered under ``gid`` in this process, or None."""
    return _programs.get(gid)


def graph_id_of(host_op_name: str) -> str | None:
    """The graph id of a ``neuron::graph <id>`` host range name, else None."""
    return host_op_name[len(GRAPH_PREFIX):] if host_op_name.startswith(GRAPH_PREFIX) else None


def programs_json(ids: list[str]) -> str:
    """The programs of ``ids`` known to this process as one JSON object (for ``GRAPHS_KEY``)."""
    return json.dumps({g: _programs[g] for g in ids if g in _programs}, separators=(",", ":"))


def parse_programs(text: str | None) -> dict[str, dict[str, Any]]:
    """Programs from a trace's ``GRAPHS_KEY`` metadata; {} when absent or unreadable (never raises)."""
    if not text:
        return {}
    try:
        v = json.loads(text)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(v, dict):
        return {}
    return {str(k): p for k, p in v.items() if isinstance(p, dict) and isinstance(p.get("nodes"), list)}
