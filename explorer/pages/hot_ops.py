"""Hot ops page: sortable, filterable grid (analysis.hot_ops), top-ops bar chart
(analysis.figures.hot_ops_figure), treemap by module (analysis.figures.module_treemap_figure).

Grouped by stack, rows are labelled by the innermost frames that distinguish them (the full stack stays in
the grid); grouped by module, unattributed device time is "(no module)". Below, device time per Python source
line with the line's text (:mod:`explorer.source`)."""
from __future__ import annotations

import plotly.graph_objects as go
from dash import Input, Output, State, html
from dash.exceptions import PreventUpdate

import analysis
from analysis import figures

from .. import frames
from ..labels import stack_labels
from ..source import source_section
from ..state import ViewState
from .common import Ctx, data_table, graph, guarded, note, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    import dash_mantine_components as dmc

    trace = trace_or_error(ctx, state)
    return html.Div([
        html.H2(f"Hot ops: {trace.name}"),
        dmc.SegmentedControl(id="ho-by", data=[{"label": f"by {g}", "value": g} for g in analysis.HOT_OPS_GROUPINGS],
                             value="op", size="xs"),
        html.Div(id="ho-body", children=guarded(body, ctx, state, "op")),
        section("Device time by module", guarded(_treemap, ctx, state)),
        section("Device time per source line", html.Div(guarded(source_section, ctx, state), id="src-body")),
    ], id="hot-ops-page")


def display_frame(df, by: str):
    """hot_ops rows as shown: readable stack labels, "(no module)" for unattributed time."""
    df = df.copy()
    if by in ("stack", "module"):
        keys = [str(k) for k in df.index]
        if by == "stack":
            df.insert(0, "stack_label", stack_labels(keys))
        df.index = [k if k.strip() else ("(no module)" if by == "module" else "(no stack)") for k in keys]
        df.index.name = by
    return df


def _bar_figure(ctx: Ctx, state: ViewState, by: str, shown):
    """The top-ops bar chart of the rows ``shown``, built once per trace and grouping."""
    fig_df = shown.set_index("stack_label") if by == "stack" else shown
    return frames.figure(ctx, state, f"hot_ops-page:{by}", lambda t: figures.hot_ops_figure(fig_df))


def warm(ctx: Ctx, state: ViewState) -> None:
    """Compute every frame this page shows (the explorer's precompute, :func:`explorer.frames.page_frames`)."""
    df = frames.hot_ops(ctx, state, "op")
    if len(df):
        _bar_figure(ctx, state, "op", display_frame(df, "op"))
    _treemap(ctx, state)


def body(ctx: Ctx, state: ViewState, by: str):
    df = frames.hot_ops(ctx, state, by)
    if not len(df):
        return note("no device work attributed to ops in this trace (device events without a launching host op)")
    shown = display_frame(df, by)
    return html.Div([graph(_bar_figure(ctx, state, by, shown), id="ho-bar"),
                     data_table(shown, id="ho-table", page_size=15, analysis="hot_ops",
                                labels={by: by.capitalize(), "stack_label": "Stack (innermost frames)"})])


def _treemap(ctx: Ctx, state: ViewState):
    fig = frames.figure(ctx, state, "module_treemap", figures.module_treemap_figure)
    if not fig.data or not len(getattr(fig.data[0], "labels", []) or []):
        return note("no module information in this trace (modules come from the capture's module hooks)")
    # the section heading names it; built once per trace (a copy of the shared frame, not on every page build)
    shown = frames.figure(ctx, state, "module_treemap-page",
                          lambda t: go.Figure(fig).update_layout(title=None, margin={"t": 10}, height=420))
    return graph(shown, id="ho-treemap")


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("ho-body", "children"), Input("ho-by", "value"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def regroup(by, pathname, search):
        if by not in analysis.HOT_OPS_GROUPINGS:
            raise PreventUpdate
        return guarded(body, ctx, ctx.decode(pathname, search), by)
