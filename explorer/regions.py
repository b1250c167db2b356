"""Regions of a trace (Neuron Explorer's Region Highlighter): profiler steps, collectives and top-level
module calls, each a named time range the Summary can be shown for (up to 3 side by side).

Regions come from :func:`analysis.regions` (steps, collectives, top-level modules); this module labels them.
Keys are short strings that travel in the URL (``region=step:3``, ``region=cc:0``, ``region=module:N``).
"""
from __future__ import annotations

import analysis

from .labels import fmt_ns

MAX_PER_KIND = 200


def regions(ctx, state) -> list[dict]:
    """``[{"key", "label", "start_ts", "end_ts"}]`` (absolute ns) of the state's trace; cached."""
    return ctx.store.memo(state.trace, (state.rank, "regions"), lambda: _regions(ctx, state))


def _regions(ctx, state) -> list[dict]:
    trace = ctx.store.trace(state.trace, state.rank)
    origin = int(trace.time_range[0])
    out = []
    for r in analysis.regions(trace, max_per_kind=MAX_PER_KIND).itertuples(index=False):
        if r.kind == "step":
            label = f"Step {r.number} ({fmt_ns(int(r.duration_ns))})"
        elif r.kind == "collective":
            label = f"{r.name} #{r.number} at {fmt_ns(int(r.start_ts) - origin)} ({fmt_ns(int(r.duration_ns))})"
        else:
            label = f"module {r.name} ({fmt_ns(int(r.duration_ns))})"
        out.append({"key": r.key, "label": label, "start_ts": int(r.start_ts), "end_ts": int(r.end_ts)})
    return out


def by_key(ctx, state, keys) -> list[dict]:
    """The regions named by ``keys`` (unknown keys are left out), in the given order, at most 3."""
    idx = {r["key"]: r for r in regions(ctx, state)}
    return [idx[k] for k in (keys or ()) if k in idx][:3]
