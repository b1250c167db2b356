"""The dependencies of one event on a time axis: its predecessors, the event, its successors."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analyses.dependencies import event_dependencies
from ._common import empty_figure, short

COLORS = {"predecessor": "#1f77b4", "successor": "#ff7f0e", "event": "#2ca02c"}


def dependencies_figure(obj, table: str = "instructions", row: int = -1, compact: bool = False) -> go.Figure:
    """One bar per related event (predecessors, then the event itself when ``obj`` is a Trace, then
    successors), from its start to its end in µs from the earliest of them; the hover names the event, the
    relation and the wait it went through. ``obj``: a Trace (with ``table`` / ``row``) or an
    :func:`analysis.event_dependencies` frame. ``compact``: bars labelled "table #row" only, no legend (for a
    narrow panel)."""
    if isinstance(obj, pd.DataFrame):
        df, me = obj, None
    else:
        df = event_dependencies(obj, table, row)
        ev = obj.table(table, ("start_ts", "duration_ns")) if table in ("host_ops", "instructions", "dma",
                                                                           "collectives") else None
        me = ev.loc[row] if ev is not None and row in ev.index else None
    if df.empty:
        return empty_figure("Dependencies", "no predecessors or successors recorded for this event")
    bars = [(f"{t} #{r}" if compact else short(f"{n} ({t} #{r})", 50), d, int(s), int(dur),
             f"{n}: {d}, {rel}" + (f" via wait #{v}" if v >= 0 else ""))
            for n, t, r, d, s, dur, rel, v in zip(df["name"], df["table"], df["row_id"], df["direction"],
                                                  df["start_ts"], df["duration_ns"], df["relation"], df["via_row"])]
    if me is not None:
        k = int((df["direction"] == "predecessor").sum())
        label = "this event" if compact else f"this event ({table} #{row})"
        bars.insert(k, (label, "event", int(me["start_ts"]), int(me["duration_ns"]), "the selected event"))
    origin = min(b[2] for b in bars)
    fig = go.Figure()
    for kind in ("predecessor", "event", "successor"):
        sel = [b for b in bars if b[1] == kind]
        if sel:
            fig.add_trace(go.Bar(y=[f"{i}. {b[0]}" for i, b in enumerate(bars, 1) if b[1] == kind],
                                 x=np.maximum([b[3] / 1e3 for b in sel], 1e-3),
                                 base=[(b[2] - origin) / 1e3 for b in sel], orientation="h", name=kind,
                                 marker_color=COLORS[kind], hovertext=[b[4] for b in sel]))
    fig.update_layout(title="Dependencies", xaxis_title="µs from the earliest event shown", template="plotly_white",
                      barmode="overlay", height=max(220, 26 * len(bars) + 120), margin=dict(l=20),
                      yaxis=dict(autorange="reversed", automargin=True), legend=dict(orientation="h", y=-0.25),
                      showlegend=not compact)
    return fig
