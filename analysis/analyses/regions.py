"""Regions of a trace (Neuron Explorer's Region Highlighter): profiler steps, collectives and top-level module
calls, each a named time range a summary can be computed for.

Steps come from :func:`analysis.steps`, collectives from the collectives table, modules from the host ops'
``module`` column (the span from the first start to the last end of the calls of each top-level module,
``a.b`` of ``a.b.c``).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..registry import Column, register
from .steps import steps

__all__ = ["REGION_SPEC", "REGION_COLUMNS", "regions"]

REGION_SPEC = (Column("key", "", "Key", "step:N, cc:K or module:K (stable within a trace)"),
               Column("kind", "", "Kind", "step, collective or module"),
               Column("name", "", "Name", "Step number, collective operation or module"),
               Column("number", "count", "Number", "Step number, or position among the regions of its kind"),
               Column("start_ts", "ns", "Start"), Column("end_ts", "ns", "End", "At least start + 1 ns"),
               Column("duration_ns", "ns", "Duration", "The event's recorded duration (modules: end - start)"))
REGION_COLUMNS = [c.name for c in REGION_SPEC]


@register("regions", columns=REGION_SPEC)
def regions(trace, max_per_kind: int = 200) -> pd.DataFrame:
    """The regions of a trace, at most ``max_per_kind`` of each kind, steps first, then collectives, then
    modules; columns ``key``, ``kind``, ``name``, ``number``, ``start_ts``, ``end_ts``, ``duration_ns`` (ns,
    absolute)."""
    out = []
    for r in steps(trace).head(max_per_kind).itertuples(index=False):
        out.append((f"step:{int(r.step)}", "step", str(int(r.step)), int(r.step), int(r.start_ts), int(r.end_ts),
                    int(r.duration_ns)))
    cc = trace.table("collectives", ["start_ts", "duration_ns", "operation"]).head(max_per_kind)
    for k, (s, d, op) in enumerate(zip(cc["start_ts"].tolist(), cc["duration_ns"].tolist(),
                                       cc["operation"].astype(str).tolist())):
        out.append((f"cc:{k}", "collective", op, k, int(s), int(s) + max(int(d), 1), int(d)))
    out += _module_regions(trace, max_per_kind)
    return pd.DataFrame(out, columns=REGION_COLUMNS)


def _module_regions(trace, max_per_kind: int) -> list[tuple]:
    host = trace.table("host_ops", ["start_ts", "duration_ns", "module"])
    if not len(host) or "module" not in host.columns:
        return []
    mod = host["module"].astype(str).to_numpy()
    top = np.array([m.split(".")[0] + "." + m.split(".")[1] if m.count(".") >= 1 else m for m in mod])
    s = host["start_ts"].to_numpy()
    e = s + host["duration_ns"].to_numpy()
    out = []
    for k, m in enumerate([m for m in dict.fromkeys(top.tolist()) if m][:max_per_kind]):
        sel = top == m
        a, b = int(s[sel].min()), int(e[sel].max())
        out.append((f"module:{k}", "module", m, k, a, b, b - a))
    return out
