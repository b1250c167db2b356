"""Collectives page: per-collective algbw / busbw (analysis.collectives, analysis.figures.collectives_figure)
and, for a multi-rank group, the per-rank arrival skew heatmap (analysis.collectives_across_ranks,
analysis.figures.skew_heatmap)."""
from __future__ import annotations

from dash import dcc, html

import analysis
from analysis import figures

from .. import frames
from ..state import ViewState
from .common import Ctx, data_table, graph, guarded, note, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    obj = ctx.store.open(state.trace)
    trace = trace_or_error(ctx, state)
    parts = [html.H2(f"Collectives: {trace.name}"), section("Per collective (this rank)", guarded(_per_op, ctx, state))]
    if getattr(obj, "traces", None) is not None and len(obj.traces) > 1:
        parts.append(section(f"Across {len(obj.traces)} ranks", guarded(_across, ctx, state)))
    else:
        parts.append(_runs_served(ctx, state))
    return html.Div(parts, id="collectives-page")


def _runs_served(ctx: Ctx, state: ViewState):
    """For a single trace: links to the multi-rank runs served here (their collectives and skew heatmap)."""
    runs = [e for e in ctx.store.entries() if e.is_group]
    if not runs:
        return note("open a group of ranks (the “(N ranks)” entries) for the per-rank skew heatmap; none is "
                    "served here")
    return html.Div([note("runs of several ranks served here (collectives matched across ranks, skew heatmap):"),
                     html.Ul([html.Li(dcc.Link(e.label, href=state.href(trace=e.key, rank=None, t0=None, t1=None,
                                                                        sel=None), id=f"cc-run-{i}"))
                              for i, e in enumerate(runs)])], id="cc-runs")


def _per_op(ctx, state):
    df = frames.collectives(ctx, state)
    if not len(df):
        return note("no collective operations in this trace (single-process run, or collectives not captured)")
    origin = int(ctx.store.trace(state.trace, state.rank).time_range[0])
    parts = []
    bw = [c for c in ("bus_bandwidth", "busbw", "busbw_bytes_per_s") if c in df.columns]
    if bw and not df[bw[0]].fillna(0).gt(0).any():
        parts.append(note("Bus bandwidth is unknown for every collective here: the trace records no message "
                          "sizes (input/output size 0), so algbw and busbw cannot be computed."))
    return html.Div(parts + [graph(figures.collectives_figure(df), id="cc-bw", height=320),
                             data_table(df, id="cc-table", page_size=10, origin=origin, analysis="collectives",
                                        hidden=("row", "framework_op"))])


def _across(ctx, state):
    matched = frames.group(ctx, state, "collectives_across_ranks", analysis.collectives_across_ranks)
    if not len(matched):
        return note("no collective matched across ranks")
    skew = figures.skew_heatmap(matched)  # sized by its rows
    group = ctx.store.open(state.trace)
    origin = min(int(t.time_range[0]) for t in group.traces)  # times from the start of the group's first trace
    return html.Div([graph(skew, id="cc-skew"),
                     data_table(matched, id="cc-ranks-table", page_size=10, analysis="collectives_across_ranks",
                                origin=origin)])
