"""Regions of a trace (Neuron Explorer's Region Highlighter): profiler steps, collectives and top-level
module calls, each a named time range the Summary can be shown for (up to 3 side by side).

Regions come from analysis frames (``analysis.steps``, ``analysis.collectives``) and, for modules, from
the host ops' ``module`` column (the span from the first to the last outermost call of each module).
Keys are short strings that travel in the URL (``region=step:3``, ``region=cc:0``, ``region=module:N``).
"""
from __future__ import annotations

import numpy as np

from . import frames
from .labels import fmt_ns

MAX_PER_KIND = 200


def regions(ctx, state) -> list[dict]:
    """``[{"key", "label", "start_ts", "end_ts"}]`` (absolute ns) of the state's trace; cached."""
    return ctx.store.memo(state.trace, (state.rank, "regions"), lambda: _regions(ctx, state))


def _regions(ctx, state) -> list[dict]:

    trace = ctx.store.trace(state.trace, state.rank)
    origin = int(trace.time_range[0])
    out = []
    st = frames.steps(ctx, state)
    for r in st.head(MAX_PER_KIND).itertuples(index=False):
        out.append({"key": f"step:{int(r.step)}", "label": f"Step {int(r.step)} ({fmt_ns(int(r.duration_ns))})",
                    "start_ts": int(r.start_ts), "end_ts": int(r.end_ts)})
    cc = trace.table("collectives", ["start_ts", "duration_ns", "operation"])
    for k, (s, d, op) in enumerate(zip(cc["start_ts"].tolist()[:MAX_PER_KIND], cc["duration_ns"].tolist(),
                                       cc["operation"].astype(str).tolist())):
        out.append({"key": f"cc:{k}", "label": f"{op} #{k} at {fmt_ns(int(s) - origin)} ({fmt_ns(int(d))})",
                    "start_ts": int(s), "end_ts": int(s) + max(int(d), 1)})
    host = trace.table("host_ops", ["start_ts", "duration_ns", "module"])
    if len(host) and "module" in host.columns:
        mod = host["module"].astype(str).to_numpy()
        top = np.array([m.split(".")[0] + "." + m.split(".")[1] if m.count(".") >= 1 else m for m in mod])
        s = host["start_ts"].to_numpy()
        e = s + host["duration_ns"].to_numpy()
        names = [m for m in dict.fromkeys(top.tolist()) if m][:MAX_PER_KIND]
        for k, m in enumerate(names):
            sel = top == m
            a, b = int(s[sel].min()), int(e[sel].max())
            out.append({"key": f"module:{k}", "label": f"module {m} ({fmt_ns(b - a)})", "start_ts": a, "end_ts": b})
    return out


def by_key(ctx, state, keys) -> list[dict]:
    """The regions named by ``keys`` (unknown keys are left out), in the given order, at most 3."""
    idx = {r["key"]: r for r in regions(ctx, state)}
    return [idx[k] for k in (keys or ()) if k in idx][:3]
