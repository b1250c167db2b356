"""Collectives page: per-collective algbw / busbw (analysis.collectives, analysis.figures.collectives_figure)
and, for a multi-rank group, the per-rank arrival skew heatmap (analysis.collectives_across_ranks,
analysis.figures.skew_heatmap)."""
from __future__ import annotations

from dash import html

import analysis
from analysis import figures

from ..state import ViewState
from .common import Ctx, data_table, graph, guarded, note, section, trace_or_error


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
    df = analysis.collectives(trace)
    if not len(df):
        return note("no collective operations in this trace")
    return html.Div([graph(figures.collectives_figure(df), id="cc-bw", height=320),
                     data_table(df.reset_index(), id="cc-table", page_size=10)])


def _across(traceset):
    matched = analysis.collectives_across_ranks(traceset)
    if not len(matched):
        return note("no collective matched across ranks")
    skew = figures.skew_heatmap(matched)
    if skew.data:
        skew.update_layout(height=max(280, 18 * len(skew.data[0].y) + 100))
    return html.Div([graph(skew, id="cc-skew"),
                     data_table(matched.reset_index(drop=True), id="cc-ranks-table", page_size=10)])
