"""Memory figures: SBUF/PSUM buffers as a Gantt chart (address against time), occupancy against capacity,
HBM held over time by kind against capacity."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from ..analyses.memory import NO_ALLOCATIONS, NO_HBM, hbm_usage, memory_allocations, memory_occupancy
from ._common import empty_figure, frame

KIND_COLORS = {"tiles": "#1f77b4", "resident": "#2ca02c", "accumulator": "#9467bd", "": "#7f7f7f"}
SPILL_COLOR = "#d62728"
HBM_COLORS = {"weights": "#1f77b4", "gradients": "#ff7f0e", "optimizer state": "#2ca02c",
              "activations": "#9467bd", "allocated": "#1f77b4"}
BUFFER_COLORS = {"SBUF": "#1f77b4", "PSUM": "#9467bd"}
MAX_BUFFERS = 4000
MAX_POINTS = 4000


def _ms(ts: np.ndarray, t0: int) -> np.ndarray:
    return (np.asarray(ts, np.int64) - t0) / 1e6


def _peak_per_bin(g: pd.DataFrame, cols: tuple[str, ...]) -> pd.DataFrame:
    """A step series cut to ``MAX_POINTS`` time bins, each holding the largest value of its bin (peaks kept)."""
    ts = g["ts"].to_numpy(np.int64)
    edges = np.linspace(ts[0], ts[-1] + 1, MAX_POINTS + 1)
    b = np.clip(np.searchsorted(edges, ts, side="right") - 1, 0, MAX_POINTS - 1)
    out = g.assign(_bin=b).groupby("_bin", sort=True).agg({"ts": "min", **{c: "max" for c in cols},
                                                          **{c: "first" for c in g.columns
                                                             if c not in cols and c != "ts"}})
    return out.reset_index(drop=True)


def _x_range(fig: go.Figure, t0: int, t1: int | None) -> go.Figure:
    if t1 is not None:
        fig.update_xaxes(range=[0.0, (t1 - t0) / 1e6])
    return fig


def _rects(d: pd.DataFrame, t0: int) -> tuple[list, list]:
    """x, y of closed rectangles (time in ms, address in KiB) separated by None, for one filled scatter."""
    xs, ys = [], []
    s, e = _ms(d["start_ts"].to_numpy(), t0), _ms(d["end_ts"].to_numpy(), t0)
    lo, hi = d["start_address"].to_numpy() / 1024, d["end_address"].to_numpy() / 1024
    for a, b, c, z in zip(s, e, lo, hi):
        xs += [a, b, b, a, a, None]
        ys += [c, c, z, z, c, None]
    return xs, ys


def memory_allocations_figure(obj, buffer: str = "SBUF", core: str | None = None, t0: int | None = None,
                              capacity_bytes: float | None = None, max_buffers: int = MAX_BUFFERS,
                              t1: int | None = None) -> go.Figure:
    """Gantt chart of one memory's buffers on one core: each buffer a rectangle from its allocation to its
    free (x, ms) over its byte range inside each partition (y, KiB), coloured by kind, spilled buffers red.
    ``obj``: a Trace or a memory_allocations DataFrame; ``core``: None = the first; ``capacity_bytes``: the
    memory's per-core capacity (drawn as the top of a partition); above ``max_buffers`` the buffers with the
    most byte-time are drawn and the title says how many. ``t0`` / ``t1``: the time axis (absolute ns; default:
    the buffers' own span), so that several charts of one trace line up."""
    df = frame(obj, memory_allocations)
    title = f"{buffer} buffers over time"
    if df.empty:
        return empty_figure(title, NO_ALLOCATIONS)
    d = df[df["buffer"] == buffer]
    if core is not None:
        d = d[d["core"] == core]
    elif len(d):
        d = d[d["core"] == d["core"].iloc[0]]
    if d.empty:
        return empty_figure(title, f"no {buffer} buffers recorded")
    t0 = int(df["start_ts"].min()) if t0 is None else t0
    n = len(d)
    if n > max_buffers:
        d = d.loc[(d["bytes"] * d["duration_ns"]).nlargest(max_buffers).index].sort_values("start_ts")
        title += f" ({max_buffers:,} of {n:,} buffers with the most byte-time)"
    fig = go.Figure()
    for (kind, spill), g in d.groupby([d["tensor_kind"], d["spill"]], sort=True):
        xs, ys = _rects(g, t0)
        name = ("spilled " if spill else "") + (kind or "unknown")
        color = SPILL_COLOR if spill else KIND_COLORS.get(kind, "#7f7f7f")
        fig.add_scatter(x=xs, y=ys, fill="toself", mode="lines", line={"width": 0.5, "color": color},
                        fillcolor=color, opacity=0.55, name=name, hoverinfo="skip", legendgroup=name)
        mid = g.assign(x=_ms((g["start_ts"] + g["end_ts"]) // 2, t0),
                       y=(g["start_address"] + g["end_address"]) / 2048)
        fig.add_scatter(x=mid["x"], y=mid["y"], mode="markers", marker={"size": 3, "color": color, "opacity": 0.0},
                        showlegend=False, legendgroup=name,
                        customdata=np.stack([g["tensor_name"], g["bytes"] / 1024, g["duration_ns"] / 1e3,
                                             g["start_address"] / 1024, g["end_address"] / 1024, g["op"]], axis=1),
                        hovertemplate="%{customdata[0]}<br>%{customdata[1]:,.1f} KiB over all partitions, held "
                                      "%{customdata[2]:,.1f} µs<br>bytes %{customdata[3]:,.2f}-%{customdata[4]:,.2f}"
                                      " KiB of each partition<br>op %{customdata[5]}<extra></extra>")
    if capacity_bytes and capacity_bytes == capacity_bytes:
        top = capacity_bytes / max(int(d["num_partitions"].max()), 1) / 1024
        fig.add_hline(y=top, line_dash="dash", line_color="#444",
                      annotation_text=f"capacity {top:,.0f} KiB per partition", annotation_position="top left")
    fig.update_layout(title=title, xaxis_title="time (ms from the trace start)",
                      yaxis_title=f"address in each of {int(d['num_partitions'].max())} partitions (KiB)",
                      template="plotly_white", legend_title_text="buffer kind")
    return _x_range(fig, t0, t1)


def memory_occupancy_figure(obj, t0: int | None = None, t1: int | None = None) -> go.Figure:
    """Share of capacity held over time per core and memory (step lines, percent), with the 100 % capacity
    line; bytes in the hover. ``obj``: a Trace or a memory_occupancy DataFrame; ``t0`` / ``t1`` the time axis."""
    df = frame(obj, memory_occupancy)
    title = "SBUF and PSUM held over time (share of capacity)"
    if df.empty:
        return empty_figure(title, NO_ALLOCATIONS)
    t0 = int(df["ts"].min()) if t0 is None else t0
    fig = go.Figure()
    thinned = False
    for (core, buf), g in df.groupby(["core", "buffer"], sort=True):
        if len(g) > MAX_POINTS:
            g, thinned = _peak_per_bin(g, ("bytes", "percent")), True
        fig.add_scatter(x=_ms(g["ts"].to_numpy(), t0), y=g["percent"], mode="lines", line_shape="hv",
                        name=f"{buf} ({core})", line={"color": BUFFER_COLORS.get(str(buf)), "width": 1},
                        customdata=np.stack([g["bytes"] / 2**20, g["capacity_bytes"] / 2**20], axis=1),
                        hovertemplate=f"{buf} {core}: " + "%{y:.1f} % (%{customdata[0]:,.2f} of "
                                      "%{customdata[1]:,.0f} MiB)<extra></extra>")
    fig.add_hline(y=100, line_dash="dash", line_color="#444", annotation_text="capacity",
                  annotation_position="top left")
    if thinned:
        title += f" (the peak of each of {MAX_POINTS:,} time bins)"
    fig.update_layout(title=title, xaxis_title="time (ms from the trace start)", yaxis_title="percent of capacity",
                      yaxis_range=[0, 105], template="plotly_white")
    return _x_range(fig, t0, t1)


def hbm_usage_figure(obj, t0: int | None = None, t1: int | None = None) -> go.Figure:
    """HBM held over time: stacked areas per kind (weights, gradients, optimizer state, activations; GiB), or
    one line of a Kineto trace's allocated bytes; the title gives the peak against the device's capacity,
    drawn as a line when the peak is above a quarter of it. ``obj``: a Trace or an hbm_usage DataFrame; ``t0`` /
    ``t1`` the time axis."""
    df = frame(obj, hbm_usage)
    if df.empty:
        return empty_figure("HBM usage over time", NO_HBM)
    t0 = int(df["ts"].min()) if t0 is None else t0
    dev = df["device"].iloc[0]
    d = df[df["device"] == dev]
    tot = d[d["kind"].isin(["total", "allocated"])]
    peak = float(tot["bytes"].max()) if len(tot) else float(d["bytes"].max())
    cap = float(d["capacity_bytes"].iloc[0])
    kinds = [k for k in HBM_COLORS if k in set(d["kind"]) and k != "allocated"] or ["allocated"]
    grid = np.unique(d["ts"].to_numpy(np.int64))
    if len(grid) > MAX_POINTS:  # evenly thinned, keeping the instant of the peak
        keep = np.linspace(0, len(grid) - 1, MAX_POINTS).astype(np.int64)
        at_peak = tot["ts"].to_numpy(np.int64)[np.argmax(tot["bytes"].to_numpy())] if len(tot) else grid[0]
        grid = np.unique(np.append(grid[keep], at_peak))
    fig = go.Figure()
    for k in kinds:
        g = d[d["kind"] == k].sort_values("ts")
        idx = np.searchsorted(g["ts"].to_numpy(np.int64), grid, side="right") - 1
        y = np.where(idx >= 0, g["bytes"].to_numpy()[np.maximum(idx, 0)], 0.0) / 2**30
        fig.add_scatter(x=_ms(grid, t0), y=y, mode="lines", line_shape="hv", stackgroup="hbm", name=k,
                        line={"color": HBM_COLORS.get(k)}, hovertemplate=f"{k}: " + "%{y:,.3f} GiB<extra></extra>")
    share = f", {100 * peak / cap:.1f} % of {cap / 2**30:,.0f} GiB" if cap == cap and cap > 0 else \
        " (capacity unknown)"
    if cap == cap and cap > 0 and peak > cap / 4:
        fig.add_hline(y=cap / 2**30, line_dash="dash", line_color="#444", annotation_text="capacity")
    fig.update_layout(title=f"HBM held over time on {dev}: peak {peak / 2**30:,.3f} GiB{share}",
                      xaxis_title="time (ms from the trace start)", yaxis_title="GiB", template="plotly_white",
                      legend_title_text="held as")
    return _x_range(fig, t0, t1)
