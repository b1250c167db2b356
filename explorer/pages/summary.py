"""Summary page: KPI cards (analysis.summary), for a group of ranks the ranks on one time axis
(analysis.rank_timeline + rank_timeline_figure) and their load balance (analysis.rank_balance +
rank_balance_figure), steps (analysis.steps + steps_figure) and the temporal
breakdown (analysis.figures.temporal_breakdown_figure), ranked recommendations with links that open the
timeline at the cited time range."""
from __future__ import annotations

import math

import pandas as pd
from dash import dcc, html

import analysis
from analysis import figures
from analysis.units import format_value

from ..state import SEL_TABLES, ViewState
from .common import Ctx, data_table, graph, guarded, note, section
from .common import trace_or_error, window_href

KEY_METRICS = ("step_time_mean_ns", "total_time", "mfu_estimated_percent", "hfu_estimated_percent",
               "mbu_estimated_percent", "device_active_percent")


def kpi_cards(df: pd.DataFrame) -> html.Div:
    rows = df.copy()
    rows["_key"] = [0 if m in KEY_METRICS else 1 for m in rows["metric"]]
    rows = rows.sort_values("_key", kind="stable")
    cards = []
    for m, v, u, d in zip(rows["metric"], rows["value"], rows["unit"], rows["description"]):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        cards.append(html.Div([html.Div(str(m), style={"fontSize": 11, "color": "#555"}),
                               html.Div(format_value(v, str(u)), style={"fontSize": 20, "fontWeight": "bold"})],
                              title=str(d), className="kpi-card",
                              style={"border": "1px solid #ddd", "borderRadius": "6px", "padding": "8px 12px",
                                     "minWidth": "150px", "background": "#fafafa"}))
    return html.Div(cards, id="kpi-cards", style={"display": "flex", "flexWrap": "wrap", "gap": "8px"})


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    origin = int(trace.time_range[0])
    parts = [html.H2(f"Summary: {trace.name} (rank {trace.rank})")]
    if getattr(trace, "simulated", False):
        parts.append(note("Device events in this trace come from the simulated Neuron runtime."))
    if trace.loss_report():  # a partial file (truncated, unreadable chunks): say what is missing
        parts.append(html.Div(f"Incomplete trace file: {trace.loss_report()}", id="loss-banner", className="note",
                              style={"color": "#8a1c1c", "background": "#fdecea", "padding": "6px 10px"}))
    parts.append(section("Key figures", guarded(lambda: kpi_cards(analysis.summary(trace)))))
    group = ctx.store.open(state.trace)
    if len(getattr(group, "traces", ())) > 1:
        parts.append(section(f"Ranks ({len(group.traces)} traces of this group)", guarded(_ranks, group, state)))
    parts.append(section("Steps", guarded(_steps, trace, state, origin)))
    parts.append(section("Recommendations", guarded(_recommendations, trace, state, origin)))
    entries = ctx.store.entries()
    if len(entries) > 1:
        parts.append(section("Traces served here", trace_list(entries, state)))
    return html.Div(parts, id="summary-page")


def _steps(trace, state: ViewState, origin: int):
    st = analysis.steps(trace)
    out = []
    if len(st):
        st = st.copy()
        st["timeline"] = [f"[open]({window_href(state, origin, a, b, pad=0.02)})"
                          for a, b in zip(st["start_ts"], st["end_ts"])]
        out.append(data_table(st, id="steps-table", page_size=10, link_col="timeline"))
        out.append(graph(figures.steps_figure(st), id="steps-fig", height=300))
    else:
        out.append(note("no profiler steps in this trace"))
    out.append(guarded(lambda: graph(figures.temporal_breakdown_figure(trace), id="step-breakdown-fig",
                                     height=320)))
    return html.Div(out)


def _ranks(group, state: ViewState):
    """The group's ranks on one time axis (analysis.rank_timeline) and their load balance
    (analysis.rank_balance), each table row linking to that rank's summary."""
    df = analysis.rank_balance(group)
    df.insert(0, "open", [f"[rank {r}]({state.href(page='summary', rank=int(r))})" for r in df["rank"]])
    return html.Div([graph(figures.rank_timeline_figure(analysis.rank_timeline(group)), id="rank-timeline-fig"),
                     graph(figures.rank_balance_figure(df), id="rank-balance-fig"),
                     data_table(df, id="rank-balance-table", page_size=16, link_col="open")])


def _recommendations(trace, state: ViewState, origin: int):
    rec = analysis.recommendations(trace)
    if not len(rec):
        return note("no recommendation fired for this trace")
    items = []
    for i, r in enumerate(rec.itertuples(index=False)):
        d = r._asdict()
        link = None
        s, e = d.get("start_ts"), d.get("end_ts")
        if s is not None and e is not None and not pd.isna(s) and not pd.isna(e) and int(e) >= int(s):
            link = dcc.Link("show on timeline", href=window_href(state, origin, int(s), max(int(e), int(s) + 1)),
                          className="rec-link", style={"marginLeft": "8px"})
        cited = _cited_event_link(trace, state, origin, d.get("event_table"), d.get("event_rows"))
        if cited is not None:
            link = html.Span([link, cited]) if link is not None else cited
        saved = d.get("est_time_saved_ns")
        saved_txt = f" · est. saving {float(saved) / 1e6:.3g} ms" if saved is not None and not pd.isna(saved) else ""
        items.append(html.Li([html.B(f"[{d.get('severity', '')}] {d.get('title', d.get('rule', ''))}"), link,
                              html.Div(str(d.get("evidence", "")), style={"fontSize": 13}),
                              html.Div(f"Action: {d.get('action', '')}{saved_txt}",
                                       style={"fontSize": 13, "color": "#264"})],
                             style={"marginBottom": "8px"}))
    return html.Ol(items, id="recommendations")


def _cited_event_link(trace, state: ViewState, origin: int, table, rows):
    """Link that opens the timeline on the first event a recommendation cites, selected."""
    if table not in SEL_TABLES or rows is None or not len(rows):
        return None
    df = trace.table(table)
    rid = int(rows[0])
    if rid not in df.index:
        return None
    s = int(df.loc[rid, "start_ts"])
    e = s + int(df.loc[rid, "duration_ns"])
    return dcc.Link(f"first of {len(rows)} cited events", className="rec-event-link", style={"marginLeft": "8px"},
                    href=window_href(state, origin, s, e, sel=(table, rid), pad=2.0))


def trace_list(entries, state: ViewState) -> html.Ul:
    """Links to every served trace; the ranks of one run are listed under their group."""
    grouped = {m for e in entries if e.is_group for m in e.members}
    items = []
    for e in entries:
        if e.is_group:
            items.append(html.Li([dcc.Link(e.label, href=state.href(trace=e.key, rank=None, t0=None, t1=None, sel=None)),
                                  html.Ul([html.Li(dcc.Link(m, href=state.href(trace=m, rank=None, t0=None, t1=None,
                                                                               sel=None))) for m in e.members])]))
        elif e.key not in grouped:
            items.append(html.Li(dcc.Link(e.label, href=state.href(trace=e.key, rank=None, t0=None, t1=None, sel=None))))
    return html.Ul(items, id="trace-list")
