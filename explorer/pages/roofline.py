"""Roofline page: ``analysis.figures.roofline_figure`` of the ``analysis.roofline`` rows kept by the engine /
bound filters, the op table; clicking a point links to the timeline with that op's instructions selected
(URL ``pick`` = the point's row of ``analysis.roofline``). Colouring and filters live in the URL."""
from __future__ import annotations

import numpy as np
import pandas as pd
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from analysis import figures

from .. import frames
from ..state import ROOF_COLORS, ViewState
from .common import Ctx, data_table, graph, guarded, note, search_of, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    pts = frames.roofline(ctx, state)
    engines = sorted(map(str, pts["engine"].unique()))
    bounds = sorted(map(str, pts["bound"].unique()))
    controls = html.Div([
        html.Label("Colour by "),
        dcc.RadioItems(id="rf-color", options=list(ROOF_COLORS), value=state.roof_color, inline=True),
        html.Label(" Engines ", style={"marginLeft": "14px"}),
        dcc.Dropdown(id="rf-engines", options=engines, value=list(state.engines or engines), multi=True,
                     style={"minWidth": "260px"}),
        html.Label(" Bound ", style={"marginLeft": "14px"}),
        dcc.Dropdown(id="rf-bounds", options=bounds, value=list(state.bounds or bounds), multi=True,
                     style={"minWidth": "200px"}),
    ], style={"display": "flex", "alignItems": "center", "flexWrap": "wrap", "gap": "4px"})
    body = [html.H2(f"Roofline: {trace.name}")]
    if not len(pts):
        body.append(note("Empty roofline: no op in this trace has FLOPs or bytes (the op model needs recorded "
                         "input shapes: capture with record_shapes=True), so nothing can be placed under the "
                         "roofs."))
    body += [controls, html.Div(id="rf-graph-box", children=graph(_figure(ctx, state, trace, pts), id="rf-graph")),
             html.Div(id="rf-selected", children=note("click a point to select its events on the timeline")),
             section("Ops on the roofline", data_table(_named_devices(trace, pts), id="rf-table", page_size=15,
                                                     analysis="roofline"))]
    return html.Div(body, id="roofline-page")


def _named_devices(trace, pts: pd.DataFrame) -> pd.DataFrame:
    """The rows with the device's name from the header instead of its position in ``header.devices``."""
    if "device" not in pts.columns:
        return pts
    names = {i: d.name or d.kind or f"device {i}" for i, d in enumerate(trace.header.devices)}
    out = pts.copy()
    out["device"] = [names.get(int(d), "unknown") for d in out["device"]]
    return out


def figure(trace, pts: pd.DataFrame, state: ViewState):
    """The analysis roofline figure of the rows of ``pts`` that pass the state's filters."""
    keep = np.ones(len(pts), dtype=bool)
    if state.engines is not None:
        keep &= pts["engine"].astype(str).isin(state.engines).to_numpy()
    if state.bounds is not None:
        keep &= pts["bound"].astype(str).isin(state.bounds).to_numpy()
    fig = figures.roofline_figure(trace, ops=pts[keep], color_by=state.roof_color)
    fig.update_layout(height=560, title=None, margin={"t": 30}, legend={"font": {"size": 12}})
    return fig


def _figure(ctx: Ctx, state: ViewState, trace, pts: pd.DataFrame):
    """:func:`figure`; without filters built once per trace and colouring (a plotly figure costs ~0.1 s)."""
    if state.engines is None and state.bounds is None:
        return frames.figure(ctx, state, f"roofline-page:{state.roof_color}", lambda t: figure(t, pts, state))
    return figure(trace, pts, state)


def warm(ctx: Ctx, state: ViewState) -> None:
    """Compute every frame this page shows (the explorer's precompute, :func:`explorer.frames.page_frames`)."""
    _figure(ctx, state, trace_or_error(ctx, state), frames.roofline(ctx, state))


def _graph(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    return graph(_figure(ctx, state, trace, frames.roofline(ctx, state)), id="rf-graph")


def _listed(value, options) -> tuple[str, ...] | None:
    """A filter's URL value: None when every option is chosen."""
    value = [str(v) for v in value or []]
    return None if set(value) >= set(map(str, options or [])) else tuple(value)


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("rf-graph-box", "children"), Output("url-out", "search", allow_duplicate=True),
                  Output("last-sync", "data", allow_duplicate=True),
                  Input("rf-color", "value"), Input("rf-engines", "value"), Input("rf-bounds", "value"),
                  State("rf-engines", "options"), State("rf-bounds", "options"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def redraw(color, engines, bounds, engine_opts, bound_opts, pathname, search):
        state = ctx.decode(pathname, search).with_(roof_color=color if color in ROOF_COLORS else "bound",
                                                engines=_listed(engines, engine_opts),
                                                bounds=_listed(bounds, bound_opts))
        search = search_of(state)
        return guarded(_graph, ctx, state), search, "/roofline" + search

    @app.callback(Output("rf-selected", "children"), Input("rf-graph", "clickData"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def select(cd, pathname, search):
        pts = (cd or {}).get("points") or [{}]
        custom = pts[0].get("customdata")
        if not isinstance(custom, list) or len(custom) < 4:
            raise PreventUpdate  # a ceiling line, not an op
        return guarded(_selected, ctx, ctx.decode(pathname, search), int(custom[3]))


def _selected(ctx: Ctx, state: ViewState, point: int):
    trace_or_error(ctx, state)  # the store's errors (not served, bad file) before the frames
    pts = frames.roofline(ctx, state)
    if point not in pts.index:
        return note(f"no roofline point {point} in this trace")
    rows = frames.roofline_point_rows(ctx, state, point)
    op = pts.loc[point, "op"]
    sel = ("instructions", int(rows[0])) if len(rows) else None
    return html.Div([html.B(str(op)), f" — {len(rows):,} instructions ",
                     dcc.Link("select them on the timeline", id="rf-timeline-link",
                              href=state.href(page="timeline", pick=point, sel=sel, t0=None, t1=None, q=""))])
