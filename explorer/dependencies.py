"""The timeline's Dependencies panel: the selected event's predecessors (what it waited for) and successors (what
waited for it), from :func:`analysis.event_dependencies` (flows and semaphore waits), each a link that opens the
event on the timeline, and :func:`analysis.figures.dependencies_figure` below them."""
from __future__ import annotations

import pandas as pd
from dash import Input, Output, State, dcc, html
from dash.exceptions import PreventUpdate

import analysis

from .labels import fmt_ns
from .pages.common import Ctx, error_box, guarded, note, window_href
from .state import ViewState, timeline_state

LISTED = 100  # links listed per direction (the figure and the count cover the rest)
HEADINGS = {"predecessor": "Waited for (predecessors)", "successor": "Waited for it (successors)"}


def dependencies_panel(ctx: Ctx, state: ViewState | None):
    """The panel's content for the selected event of ``state`` (a hint without one)."""
    if state is None or not state.sel:
        return note("Click a slice to see what it waited for and what waited for it.")
    if state.sel[0] == "hierarchy":
        return note("A module span has no dependencies of its own: click one of its ops or instructions.")
    return guarded(_panel, ctx, state)


def _gap(direction: str, gap: int) -> str:
    if gap < 0:
        return f"overlaps it by {fmt_ns(-gap)}"
    return f"ended {fmt_ns(gap)} before" if direction == "predecessor" else f"starts {fmt_ns(gap)} after"


def _item(state: ViewState, origin: int, r: pd.Series, table: str) -> html.Li:
    s, e = int(r["start_ts"]), int(r["start_ts"]) + int(r["duration_ns"])
    text = f"{r['name'] or '(unnamed)'} ({r['table']} #{int(r['row_id'])})"
    parts: list = [dcc.Link(text, href=window_href(state, origin, s, e, sel=(str(r["table"]), int(r["row_id"])),
                                                   pad=1.0), className="jump nx-dep-link"),
                   html.Span(f" · {r['relation']} · {r['track']} · {_gap(str(r['direction']), int(r['gap_ns']))}",
                             className="nx-hint")]
    if int(r["via_row"]) >= 0 and int(r["via_row"]) != state.sel[1]:
        parts += [html.Span(" · via ", className="nx-hint"),
                  dcc.Link(f"wait #{int(r['via_row'])}", href=state.href(page="timeline",
                                                                         sel=("instructions", int(r["via_row"])),
                                                                         t0=state.t0, t1=state.t1),
                           className="jump")]
    return html.Li(parts)


def _panel(ctx: Ctx, state: ViewState):
    table, rid = state.sel
    index = ctx.store.timeline(state.trace, state.rank)
    deps = analysis.event_dependencies(index.trace, table, int(rid))
    head = html.Div(f"{table} #{rid}: {int((deps['direction'] == 'predecessor').sum())} predecessors, "
                    f"{int((deps['direction'] == 'successor').sum())} successors", className="nx-strong",
                    id="tl-deps-title")
    if deps.empty:
        return html.Div([head, note("No flow or semaphore wait links this event to another one.")])
    parts = [head]
    for direction, heading in HEADINGS.items():
        sub = deps[deps["direction"] == direction]
        if len(sub):
            more = f" ({LISTED} of {len(sub)} listed)" if len(sub) > LISTED else ""
            parts += [html.H5(heading + more),
                      html.Ol([_item(state, index.origin, r, table) for _, r in sub.head(LISTED).iterrows()],
                              className=f"nx-deps nx-deps-{direction}")]
    fig = analysis.figures.dependencies_figure(index.trace, table, int(rid), compact=True)
    fig.update_layout(height=min(fig.layout.height or 300, 600), title=None, margin=dict(t=10, b=10, r=10))
    parts.append(dcc.Graph(figure=fig, config={"displayModeBar": False}, id="tl-deps-graph"))
    return html.Div(parts, className="details")


def register_dependencies(app, ctx: Ctx) -> None:
    """The panel follows the selected event (``tl-sel``) while the Dependencies tab is open, and is built when
    the tab opens: the first lookup of a trace builds its dependency index (0.5-1.2 s per million
    instructions), which a user who never opens the tab does not pay."""

    @app.callback(Output("tl-deps", "children"), Input("tl-sel", "data"), Input("tl-tabs", "value"),
                  State("tl-meta", "data"), prevent_initial_call=True)
    def show(sel, tab, meta):
        if tab != "deps" or not meta:
            raise PreventUpdate
        try:
            state = timeline_state(meta, sel=sel)
        except Exception as exc:  # noqa: BLE001 - a malformed selection shows a one-line error
            return error_box(str(exc))
        return dependencies_panel(ctx, state)
