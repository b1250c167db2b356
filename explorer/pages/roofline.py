"""Roofline page: log-log scatter of ops (analysis.roofline) under the compute ceilings per dtype and the
memory roof (analysis.roofline_ceilings); filters; clicking a point links to its events on the timeline."""
from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

from ..rows import color_of
from ..state import ViewState, decode
from .common import Ctx, analysis_call, data_table, guarded, note, section, trace_or_error


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _frames(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    pts, err = analysis_call("roofline", trace)
    if err:
        raise RuntimeError(err)
    ceil, err = analysis_call("roofline_ceilings", trace)
    if err:
        raise RuntimeError(err)
    return trace, pts, ceil


def _layout(ctx: Ctx, state: ViewState):
    trace, pts, ceil = _frames(ctx, state)
    engines = sorted(map(str, pts["engine"].unique())) if len(pts) else []
    bounds = sorted(map(str, pts["bound"].unique())) if len(pts) else []
    controls = html.Div([
        html.Label("Colour by "),
        dcc.RadioItems(id="rf-color", options=["engine", "bound"], value="engine", inline=True),
        html.Label(" Engines ", style={"marginLeft": "14px"}),
        dcc.Dropdown(id="rf-engines", options=engines, value=engines, multi=True, style={"minWidth": "260px"}),
        html.Label(" Bound ", style={"marginLeft": "14px"}),
        dcc.Dropdown(id="rf-bounds", options=bounds, value=bounds, multi=True, style={"minWidth": "200px"}),
    ], style={"display": "flex", "alignItems": "center", "flexWrap": "wrap", "gap": "4px"})
    body = [html.H2(f"Roofline: {trace.name}")]
    if not len(pts):
        body.append(note("no op with FLOPs or bytes in this trace: nothing to place on the roofline"))
    body += [controls, dcc.Graph(id="rf-graph", figure=figure(pts, ceil, "engine"), config={"displaylogo": False}),
             html.Div(id="rf-selected", children=note("click a point to select its events")),
             section("Ops on the roofline", data_table(pts, id="rf-table", page_size=15))]
    return html.Div(body, id="roofline-page")


def figure(pts: pd.DataFrame, ceil: pd.DataFrame, color: str = "engine") -> go.Figure:
    """Scatter of ops (size by device time) with ceilings; draws the analysis frames, computes nothing."""
    fig = go.Figure()
    ai = pts["arithmetic_intensity"].to_numpy(dtype=float) if len(pts) else np.zeros(0)
    ok = np.isfinite(ai) & (ai > 0)
    lo = float(np.nanmin(ai[ok])) / 4 if ok.any() else 0.01
    hi = float(np.nanmax(ai[ok])) * 4 if ok.any() else 1e4
    if len(ceil):
        mem = ceil[ceil["kind"] == "memory"]
        comp = ceil[ceil["kind"] == "compute"]
        ridges = comp["ridge_point"].to_numpy(dtype=float)
        ridges = ridges[np.isfinite(ridges) & (ridges > 0)]
        if len(ridges):
            lo, hi = min(lo, float(ridges.min()) / 10), max(hi, float(ridges.max()) * 4)
        for r in mem.itertuples(index=False):
            if np.isfinite(r.bandwidth_bytes_per_s) and r.bandwidth_bytes_per_s > 0:
                top = float(comp["peak_flops_per_s"].max()) if len(comp) else r.bandwidth_bytes_per_s * hi
                x_end = min(hi, top / r.bandwidth_bytes_per_s)
                fig.add_trace(go.Scatter(x=[lo, x_end], y=[lo * r.bandwidth_bytes_per_s, x_end * r.bandwidth_bytes_per_s],
                                         mode="lines", name=f"{r.engine} roof", line={"dash": "dash", "color": "#444"},
                                         hovertemplate=f"{r.engine} roof: %{{y:.3g}} FLOP/s at %{{x:.3g}} FLOP/B<extra></extra>"))
        for r in comp.itertuples(index=False):
            x0 = float(r.ridge_point) if np.isfinite(r.ridge_point) else lo
            label = f"{r.engine} {r.dtype}".strip()
            fig.add_trace(go.Scatter(x=[x0, hi], y=[r.peak_flops_per_s, r.peak_flops_per_s], mode="lines",
                                     name=f"ceiling {label}", line={"color": color_of(label), "width": 1.5},
                                     hovertemplate=f"{label} peak %{{y:.3g}} FLOP/s<extra></extra>"))
    if len(pts):
        t = pts["device_time_ns"].to_numpy(dtype=float)
        size = 6 + 30 * np.sqrt(t / max(t.max(), 1))
        for key in sorted(map(str, pts[color].unique())):
            m = (pts[color].astype(str) == key).to_numpy() & ok
            if not m.any():
                continue
            sub = pts[m]
            hover = [f"{o} ({d}, {e})<br>AI {a:.3g} FLOP/B · {f:.3g} FLOP/s<br>{tt / 1e3:.4g} µs · {b}"
                     for o, d, e, a, f, tt, b in zip(sub["op"], sub["dtype"], sub["engine"],
                                                     sub["arithmetic_intensity"], sub["achieved_flops_per_s"],
                                                     sub["device_time_ns"], sub["bound"])]
            fig.add_trace(go.Scatter(x=sub["arithmetic_intensity"], y=sub["achieved_flops_per_s"], mode="markers",
                                     name=key, marker={"size": size[m], "color": color_of(key), "opacity": 0.75,
                                                       "line": {"width": 0.5, "color": "#333"}},
                                     customdata=[str(o) for o in sub["op"]], text=hover,
                                     hovertemplate="%{text}<extra></extra>"))
    fig.update_layout(height=560, xaxis={"type": "log", "title": "arithmetic intensity (FLOP/byte)"},
                      yaxis={"type": "log", "title": "achieved FLOP/s"}, hovermode="closest",
                      margin={"t": 30}, plot_bgcolor="white", legend={"font": {"size": 10}})
    return fig


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("rf-graph", "figure"), Input("rf-color", "value"), Input("rf-engines", "value"),
                  Input("rf-bounds", "value"), State("url", "pathname"), State("url", "search"),
                  prevent_initial_call=True)
    def redraw(color, engines, bounds, pathname, search):
        try:
            _, pts, ceil = _frames(ctx, decode(pathname, search))
        except Exception:  # noqa: BLE001
            raise PreventUpdate
        if len(pts):
            pts = pts[pts["engine"].astype(str).isin(engines or []) & pts["bound"].astype(str).isin(bounds or [])]
        return figure(pts, ceil, color if color in ("engine", "bound") else "engine")

    @app.callback(Output("rf-selected", "children"), Input("rf-graph", "clickData"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def select(cd, pathname, search):
        if not cd or not cd.get("points") or cd["points"][0].get("customdata") is None:
            raise PreventUpdate
        op = str(cd["points"][0]["customdata"])
        state = decode(pathname, search)
        return html.Div([html.B(op), " — ",
                         dcc.Link("select its events on the timeline", id="rf-timeline-link",
                                  href=state.href(page="timeline", q=op, t0=None, t1=None, sel=None))])
