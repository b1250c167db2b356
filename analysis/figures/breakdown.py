"""Figures of the HTA-comparable breakdowns (``analysis.breakdown``): kernel-type pie + top kernels,
temporal breakdown bars per rank, idle-time bars per stream, comm/comp overlap per rank.

Each builder takes the analysis DataFrame(s) or anything with the matching ``Trace`` method (``Trace``,
``TraceSet`` with per-trace methods) and returns a ``plotly.graph_objects.Figure``."""
from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analyses import hta
from ._common import empty_figure, short

_COLORS = {"COMPUTATION": "#4C78A8", "COMMUNICATION": "#F58518", "MEMORY": "#54A24B", "OTHER": "#B279A2",
           "idle": "#BAB0AC", "compute": "#4C78A8", "non_compute": "#F58518",
           "host_wait": "#E45756", "kernel_wait": "#EECA3B", "other": "#B279A2"}


def _traces(obj: Any) -> list:
    return list(getattr(obj, "traces", None) or [obj])


def kernel_breakdown_figure(obj: Any, top: int = 15) -> go.Figure:
    """Pie of device time by kernel type and bar chart of the ``top`` kernels by total time.

    ``obj``: a ``Trace`` or the ``(by_type, by_name)`` tuple of ``kernel_breakdown``."""
    if isinstance(obj, tuple):
        by_type, by_name = obj
    else:
        by_type, by_name = obj.kernel_breakdown()
    title = "GPU kernel breakdown (HTA definitions)"
    if by_type.empty or by_type["sum_ns"].sum() <= 0:
        return empty_figure(title, "no device kernels in this trace")
    fig = make_subplots(rows=1, cols=2, specs=[[{"type": "domain"}, {"type": "xy"}]],
                        subplot_titles=("time by kernel type", f"top {top} kernels by total time"))
    fig.add_trace(go.Pie(labels=by_type["kernel_type"], values=by_type["sum_ns"] / 1e6, hole=0.35,
                         marker_colors=[_COLORS.get(k.split(" ")[0], "#999") for k in by_type["kernel_type"]],
                         hovertemplate="%{label}<br>%{value:.3f} ms (%{percent})<extra></extra>"), 1, 1)
    t = by_name.head(top).iloc[::-1]
    fig.add_trace(go.Bar(x=t["sum_ns"] / 1e6, y=[short(n) for n in t["name"]], orientation="h",
                         marker_color=[_COLORS.get(k, "#999") for k in t["kernel_type"]],
                         customdata=t[["count", "mean_ns"]].to_numpy(),
                         hovertemplate="%{y}<br>%{x:.3f} ms total, %{customdata[0]} calls, "
                                       "mean %{customdata[1]:.0f} ns<extra></extra>", showlegend=False), 1, 2)
    fig.update_xaxes(title_text="total time (ms)", row=1, col=2)
    fig.update_layout(title=title, template="plotly_white", height=480)
    return fig


def temporal_breakdown_figure(obj: Any, hta_compatible: bool = False) -> go.Figure:
    """Stacked bars per rank: idle / compute / non-compute share of the device span; the title says the mode
    (exact ns, or ``hta_compatible``: HTA 0.5.0's, :data:`analysis.analyses.hta.MODE_LABEL`).

    ``obj``: a ``temporal_breakdown`` DataFrame (one row per rank), a ``Trace`` or a ``TraceSet``."""
    df = obj if isinstance(obj, pd.DataFrame) else pd.concat(
        [t.temporal_breakdown(hta_compatible=hta_compatible) for t in _traces(obj)], ignore_index=True)
    title = f"Temporal breakdown ({hta.MODE_LABEL if hta_compatible else hta.EXACT_LABEL}; share of the device span)"
    if df.empty or (df["kernel_time_ns"] <= 0).all():
        return empty_figure(title, "no device activity in this trace")
    fig = go.Figure()
    ranks = [f"rank {r}" for r in df["rank"]]
    for k in ("idle", "compute", "non_compute"):
        fig.add_trace(go.Bar(name=k.replace("_", "-"), x=ranks, y=df[f"{k}_time_pctg"], marker_color=_COLORS[k],
                             customdata=df[f"{k}_time_ns"] / 1e6,
                             hovertemplate="%{x}: %{y:.2f}% (%{customdata:.3f} ms)<extra>" + k + "</extra>"))
    fig.update_layout(barmode="stack", title=title, yaxis_title="% of kernel span", template="plotly_white")
    return fig


def temporal_breakdown_note(obj: Any) -> str:
    """One line to show beside :func:`temporal_breakdown_figure` (default mode): which mode its numbers come
    from, HTA 0.5.0-compatible idle share of each rank, and why the two differ (:data:`hta.IDLE_WHY`)."""
    parts = []
    for t in _traces(obj)[:8]:
        ours = t.temporal_breakdown().iloc[0]["idle_time_pctg"]
        theirs = t.temporal_breakdown(hta_compatible=True).iloc[0]["idle_time_pctg"]
        parts.append(f"{'rank ' + str(t.rank) + ': ' if len(_traces(obj)) > 1 else ''}{ours:.1f} % idle "
                     f"({hta.EXACT_LABEL}), {theirs:.1f} % ({hta.MODE_LABEL})")
    return (f"Bars: {hta.EXACT_LABEL}, the definition of the Summary's Device idle. " + "; ".join(parts)
            + ". " + hta.IDLE_WHY)


def idle_time_figure(obj: Any, ratio: bool = True) -> go.Figure:
    """Idle time per stream split into host_wait / kernel_wait / other (``ratio``: shares, else ms).

    ``obj``: an ``idle_time_breakdown`` DataFrame or a ``Trace``."""
    df = obj if isinstance(obj, pd.DataFrame) else obj.idle_time_breakdown()
    title = "Idle time breakdown per stream"
    if df.empty:
        return empty_figure(title, "no kernels on any stream")
    engines = {} if isinstance(obj, pd.DataFrame) else _engine_names(obj.tracks, df["stream"].unique())
    fig = go.Figure()
    for cat in ("host_wait", "kernel_wait", "other"):
        d = df[df["idle_category"] == cat]
        y = d["idle_time_ratio"] * 100 if ratio else d["idle_time_ns"] / 1e6
        fig.add_trace(go.Bar(name=cat.replace("_", " "), y=y, marker_color=_COLORS[cat],
                             x=[f"rank {r} · {engines.get(s, f'stream {s}')}" for r, s in zip(d["rank"], d["stream"])]))
    fig.update_layout(barmode="stack", title=title, template="plotly_white", xaxis_title="rank · stream or engine",
                      yaxis_title="% of the stream's idle time" if ratio else "idle time (ms)")
    return fig


def _engine_names(tracks: pd.DataFrame, streams: Any) -> dict[int, str]:
    """Stream id -> "<core> <engine>" for the ids that are Neuron engine tracks (their idle is per engine)."""
    out = {}
    for s in streams:
        s = int(s)
        if s in tracks.index and str(tracks.at[s, "kind"]) == "engine":
            parent = int(tracks.at[s, "parent"])
            core = str(tracks.at[parent, "name"]) + " " if parent in tracks.index else ""
            out[s] = f"{core}{tracks.at[s, 'name']}"
    return out


def comm_comp_overlap_figure(obj: Any) -> go.Figure:
    """Bar per rank: % of communication time overlapped by computation."""
    df = obj if isinstance(obj, pd.DataFrame) else pd.concat([t.comm_comp_overlap() for t in _traces(obj)],
                                                             ignore_index=True)
    title = "Communication overlapped by computation"
    if df.empty or df["comp_comm_overlap_pctg"].isna().all():
        return empty_figure(title, "no communication kernels in this trace")
    fig = go.Figure(go.Bar(x=[f"rank {r}" for r in df["rank"]], y=df["comp_comm_overlap_pctg"],
                           marker_color=_COLORS["COMMUNICATION"]))
    fig.update_layout(title=title, yaxis_title="% of communication time", yaxis_range=[0, 100],
                      template="plotly_white")
    return fig


__all__ = ["kernel_breakdown_figure", "temporal_breakdown_figure", "temporal_breakdown_note", "idle_time_figure",
           "comm_comp_overlap_figure"]
