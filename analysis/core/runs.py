"""Which traces form one run (the ranks of one job) and which stand alone.

A folder of traces is not a run by itself. Two traces belong to the same run when

1. they carry the same non-empty ``header.run_id`` (our capture and ``import_kineto_dir`` set one per run), or
2. they carry the same Kineto ``group_trace_id``, or
3. both have Kineto ``distributedInfo`` with a world size above 1 that agrees apart from the rank (backend,
   world size, process groups), and their time ranges overlap (the ranks of one job are profiled together).

Anything else is a run of its own, so unrelated traces are never compared as ranks.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["run_key", "run_label", "group_runs"]


def _distributed(header) -> dict | None:
    raw = header.metadata.get("kineto.distributedInfo", "")
    try:
        d = json.loads(raw) if raw and raw[0] == "{" else None
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def run_key(trace) -> tuple:
    """The identity of a trace's run: ("run", run_id), ("group", group_trace_id), ("distributed", job
    description) or ("trace", own identity)."""
    h = trace.header
    if h.run_id:
        return ("run", str(h.run_id))
    gid = h.metadata.get("kineto.group_trace_id", "")
    if gid:
        return ("group", str(gid))
    d = _distributed(h)
    if d is not None and isinstance(d.get("world_size"), int) and d["world_size"] > 1:
        job = {k: v for k, v in d.items() if k not in ("rank", "local_rank")}
        return ("distributed", json.dumps(job, sort_keys=True))
    return ("trace", str(trace.path) if trace.path is not None else f"{trace.name}@{id(trace.whole())}")


def run_label(key: tuple) -> str:
    """A short human label of a :func:`run_key`."""
    kind, value = key
    if kind in ("run", "group"):
        return value if kind == "run" else f"group {value}"
    if kind == "distributed":
        d = json.loads(value)
        return f"{d.get('backend', 'distributed')} job of {d.get('world_size')} ranks"
    return f"trace {value}"


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def group_runs(traces: Iterable[Any]) -> list[list[Any]]:
    """Traces split into runs (in order of their first trace). Traces matched only by distributed info are
    grouped by overlapping time ranges (connected components), so two jobs with the same configuration
    profiled at different times stay apart."""
    out: list[list[Any]] = []
    index: dict[tuple, list[list[Any]]] = {}
    for t in traces:
        key = run_key(t)
        cands = index.setdefault(key, [])
        if key[0] != "distributed":
            if cands:
                cands[0].append(t)
            else:
                g = [t]
                cands.append(g)
                out.append(g)
            continue
        tr = t.time_range
        hit = [g for g in cands if any(_overlap(tr, o.time_range) for o in g)]
        if not hit:
            g = [t]
            cands.append(g)
            out.append(g)
            continue
        keep = hit[0]
        keep.append(t)
        for g in hit[1:]:  # t bridges several groups: merge them
            keep.extend(g)
            cands.remove(g)
            out.remove(g)
    return out
