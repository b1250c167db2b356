"""Load balance across ranks: where each rank's device time goes, and which ranks make the others wait."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..ranks import rank_balance
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
    fig.update_xaxes(title_text="ms", row=1, col=1)
    fig.update_xaxes(title_text="ms", row=1, col=2)
    fig.update_layout(title=title, barmode="stack", template="plotly_white",
                      height=max(300, 34 * len(labels) + 170), yaxis={"autorange": "reversed"},
                      legend={"orientation": "h", "y": -0.25})
    return fig
