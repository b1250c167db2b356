"""Collectives page: per-collective algbw / busbw (analysis.collectives) and, for a multi-rank group, the
per-rank arrival skew heatmap (analysis.collectives_across_ranks / collective_skew_matrix)."""
from __future__ import annotations

import plotly.graph_objects as go
from dash import html

from ..state import ViewState
from .common import Ctx, analysis_call, data_table, error_box, graph, guarded, note, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    obj = ctx.store.open(state.trace)
    trace = trace_or_error(ctx, state)
    parts = [html.H2(f"Collectives: {trace.name}"), section("Per collective (this rank)", guarded(_per_op, trace))]
    if getattr(obj, "traces", None) is not None and len(obj.traces) > 1:
        parts.append(section(f"Across {len(obj.traces)} ranks", guarded(_across, obj)))
    else:
        parts.append(note("open a group of ranks (the “(N ranks)” entries) for the per-rank skew heatmap"))
    return html.Div(parts, id="collectives-page")


def _per_op(trace):
    df, err = analysis_call("collectives", trace)
    if err:
        return error_box(err)
    if not len(df):
        return note("no collective operations in this trace")
    origin = int(trace.time_range[0])
    fig = go.Figure()
    for col, name in (("algbw_bytes_per_s", "algbw"), ("busbw_bytes_per_s", "busbw")):
        fig.add_trace(go.Scatter(x=(df["start_ts"] - origin) / 1e3, y=df[col] / 1e9, mode="markers", name=name,
                                 text=df["operation"].astype(str),
                                 hovertemplate="%{text}: %{y:.4g} GB/s at %{x:.4g} µs<extra>" + name + "</extra>"))
    fig.update_layout(xaxis_title="start (µs from trace start)", yaxis_title="GB/s", height=320, margin={"t": 20})
    return html.Div([graph(fig, id="cc-bw"), data_table(df.reset_index(), id="cc-table", page_size=10)])


def _across(traceset):
    matched, err = analysis_call("collectives_across_ranks", traceset)
    if err:
        return error_box(err)
    if not len(matched):
        return note("no collective matched across ranks")
    skew, err = analysis_call("collective_skew_matrix", matched)
    if err:
        return error_box(err)
    fig = go.Figure(go.Heatmap(z=skew.to_numpy() / 1e3, x=[f"rank {c}" for c in skew.columns],
                               y=[str(i) for i in skew.index], colorscale="Reds",
                               colorbar={"title": "arrival delay (µs)"},
                               hovertemplate="%{y} %{x}: %{z:.4g} µs late<extra></extra>"))
    fig.update_layout(height=max(280, 18 * len(skew) + 100), margin={"t": 20, "l": 160})
    return html.Div([graph(fig, id="cc-skew"), data_table(matched.reset_index(drop=True), id="cc-ranks-table",
                                                            page_size=10)])
