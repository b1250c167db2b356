"""Load balance across ranks: where each rank's device time goes, and which ranks make the others wait."""
from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..analyses.ranks import RANK_LANES, rank_balance, rank_timeline
from ._common import empty_figure, frame

_PARTS = (("compute_time_ns", "compute", "#4C78A8"), ("non_compute_time_ns", "non-compute", "#F58518"),
          ("idle_time_ns", "idle", "#BAB0AC"))


def rank_balance_figure(obj) -> go.Figure:
    """Left: per rank (and window), stacked horizontal bars of compute / non-compute / idle device time (ms)
    with the mean step time as a marker. Right: the waiting each rank caused at collectives by arriving
    last (ms). ``obj``: a TraceSet, a list of Traces or a :func:`analysis.rank_balance` DataFrame."""
    df = frame(obj, rank_balance)
    title = "Load balance across ranks"
    if df.empty:
        return empty_figure(title, "no traces")
    multi_window = df["window"].nunique() > 1
    labels = [f"rank {r}" + (f" w{w}" if multi_window else "") for r, w in zip(df["rank"], df["window"])]
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, column_widths=[0.7, 0.3], horizontal_spacing=0.04,
                        subplot_titles=("device time per rank", "wait caused at collectives"))
    for col, name, color in _PARTS:
        fig.add_trace(go.Bar(y=labels, x=df[col] / 1e6, name=name, orientation="h", marker_color=color,
                             hovertemplate="%{y}: %{x:.3f} ms " + name + "<extra></extra>"), 1, 1)
    if df["step_time_mean_ns"].notna().any():
        fig.add_trace(go.Scatter(y=labels, x=df["step_time_mean_ns"] / 1e6, mode="markers", name="mean step time",
                                 marker={"symbol": "line-ns-open", "size": 18, "color": "#222"},
                                 customdata=df["step_time_vs_median"],
                                 hovertemplate="%{y}: step %{x:.3f} ms (%{customdata:.2f}x the median)"
                                               "<extra></extra>"), 1, 1)
    fig.add_trace(go.Bar(y=labels, x=df["total_wait_caused_ns"] / 1e6, orientation="h", name="wait caused",
                         marker_color="#E45756", customdata=df[["times_last"]].to_numpy(),
                         hovertemplate="%{y}: %{x:.3f} ms, arrived last %{customdata[0]} times<extra></extra>"),
                  1, 2)
    if not (df["total_wait_caused_ns"] > 0).any():  # say why the right panel is empty
        fig.add_annotation(text="no rank made another wait<br>at a collective", showarrow=False,
                           xref="x2 domain", yref="y2 domain", x=0.5, y=0.5, font={"color": "#666"})
        fig.update_xaxes(range=[0, 1], row=1, col=2)  # not plotly's -1..1 around an all-zero bar
    fig.update_xaxes(title_text="ms", row=1, col=1)
    fig.update_xaxes(title_text="ms", row=1, col=2)
    fig.update_layout(title=title, barmode="stack", template="plotly_white",
                      height=max(300, 34 * len(labels) + 170), yaxis={"autorange": "reversed"},
                      legend={"orientation": "h", "y": -0.35}, margin={"b": 110})
    return fig


_LANE_COLORS = {"steps": "#9D9D9D", "compute": "#4C78A8", "communication": "#F58518", "memory": "#54A24B"}


def rank_timeline_figure(obj, max_intervals: int = 1000) -> go.Figure:
    """All ranks on one time axis (ms from the run's first event): per rank its steps and its device time by
    kind (compute / communication / memory), one row each; paler where an interval merges short bursts with
    gaps between them. Misaligned communication rows show who arrives late. ``obj``: a TraceSet, a list of
    Traces or a :func:`analysis.rank_timeline` DataFrame."""

    df = frame(obj, rank_timeline, max_intervals=max_intervals)
    title = "Ranks over time"
    if df.empty:
        return empty_figure(title, "no steps or device activity in these traces")
    t0 = int(df["start_ts"].min())
    span = max(int(df["end_ts"].max()) - t0, 1)
    multi_window = df["window"].nunique() > 1
    rows = df[["rank", "window"]].drop_duplicates().itertuples(index=False)
    order = [f"rank {r}" + (f" w{w}" if multi_window else "") + f" · {lane}" for r, w in rows for lane in RANK_LANES]
    label = ("rank " + df["rank"].astype(str) + (" w" + df["window"].astype(str) if multi_window else "")
              + " · " + df["lane"].astype(str))
    present = set(label)
    order = [o for o in order if o in present]
    fig = go.Figure()
    for lane, color in _LANE_COLORS.items():
        m = (df["lane"] == lane).to_numpy()
        if not m.any():
            continue
        d = df[m]
        length = (d["end_ts"] - d["start_ts"]).to_numpy()
        fill = d["busy_ns"].to_numpy() / np.maximum(length, 1)
        fig.add_trace(go.Bar(
            y=label[m], base=(d["start_ts"] - t0) / 1e6, x=np.maximum(length, span / 2000) / 1e6, orientation="h",
            name=lane, marker={"color": color, "opacity": np.clip(0.35 + 0.65 * fill, 0, 1), "line": {"width": 0}},
            customdata=np.column_stack([d["label"], length / 1e6, d["busy_ns"] / 1e6]),
            hovertemplate="%{y}<br>%{customdata[0]}: %{base:.3f} ms + %{customdata[1]:.3f} ms"
                          "<br>busy %{customdata[2]:.3f} ms<extra></extra>"))
    fig.update_layout(title=title, template="plotly_white", barmode="overlay", bargap=0.15,
                      height=max(300, 18 * len(order) + 140), xaxis_title="time (ms from the first event)",
                      yaxis={"categoryorder": "array", "categoryarray": order[::-1]},
                      legend={"orientation": "h", "y": -0.12})
    return fig
