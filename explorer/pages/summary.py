"""Summary page: KPI cards (analysis.summary, labelled in words and units), the Summary of up to 3 regions
side by side (steps, collectives, modules: explorer.regions), the notes of the trace, for a group of ranks
the ranks on one time axis and their load balance, steps, the temporal breakdown, ranked recommendations
with links that open the timeline at the cited time range."""
from __future__ import annotations

import math

import pandas as pd
from dash import Input, Output, State, dcc, html

import analysis
from analysis import figures
from analysis.units import format_value

from .. import frames
from ..labels import metric_label
from ..notes import note_list, notes_for
from ..regions import by_key, regions
from ..state import SEL_TABLES, ViewState
from .common import Ctx, data_table, graph, guarded, note, search_of, section, trace_or_error, window_href

KEY_METRICS = ("step_time_mean_ns", "total_time", "mfu_estimated_percent", "hfu_estimated_percent",
               "mbu_estimated_percent", "device_active_percent")


def _labels(df: pd.DataFrame) -> list[str]:
    lab = df["label"] if "label" in df.columns else [None] * len(df)
    return [metric_label(m, x) for m, x in zip(df["metric"], lab)]


def kpi_cards(df: pd.DataFrame) -> html.Div:
    rows = df.copy()
    rows["_label"] = _labels(rows)
    rows["_key"] = [0 if m in KEY_METRICS else 1 for m in rows["metric"]]
    rows = rows.sort_values("_key", kind="stable")
    cards = []
    for m, lab, v, u, d in zip(rows["metric"], rows["_label"], rows["value"], rows["unit"], rows["description"]):
        if v is None or (isinstance(v, float) and math.isnan(v)):
            continue
        cards.append(html.Div([html.Div(lab, className="kpi-label"),
                               html.Div(format_value(v, str(u)), className="kpi-value")],
                              title=f"{d} ({m})", className="kpi-card", **{"data-metric": str(m)}))
    return html.Div(cards, id="kpi-cards", style={"display": "flex", "flexWrap": "wrap", "gap": "8px"})


def region_table(ctx: Ctx, state: ViewState, chosen: list[dict]) -> html.Table:
    """The Summary of each chosen region side by side (metric rows, one column per region)."""
    cols = [frames.summary(ctx, state, (r["start_ts"], r["end_ts"])) for r in chosen]
    base = cols[0]
    head = html.Tr([html.Th("Metric")] + [html.Th(r["label"]) for r in chosen])
    body = []
    for i, (m, lab, u) in enumerate(zip(base["metric"], _labels(base), base["unit"])):
        vals = [c["value"].iloc[i] if i < len(c) and c["metric"].iloc[i] == m else math.nan for c in cols]
        if all(isinstance(v, float) and math.isnan(v) for v in vals):
            continue
        body.append(html.Tr([html.Td(lab, title=m)] + [html.Td(format_value(v, str(u))) for v in vals]))
    return html.Table([html.Thead(head), html.Tbody(body)], className="nx-regions", id="region-table")


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    origin = int(trace.time_range[0])
    parts = [html.H2(f"Summary: {trace.name} (rank {trace.rank})")]
    parts.append(section("Key figures", _region_picker(ctx, state),
                         html.Div(guarded(_figures, ctx, state), id="sum-figures")))
    if analysis.EXPLORER_SUMMARY_KEY in trace.header.metadata:
        parts.append(section("Neuron Explorer's numbers beside ours", guarded(_explorer_numbers, ctx, state)))
    notes = notes_for(ctx, state)
    if notes:
        parts.append(section("Notes", note_list(notes, state, with_delete=False)))
    group = ctx.store.open(state.trace)
    if len(getattr(group, "traces", ())) > 1:
        parts.append(section(f"Ranks ({len(group.traces)} traces of this group)", guarded(_ranks, ctx, state)))
    parts.append(section("Steps", guarded(_steps, ctx, state, origin)))
    parts.append(section("Recommendations", guarded(_recommendations, ctx, state, origin)))
    entries = ctx.store.entries()
    if len(entries) > 1:
        parts.append(section("Traces served here", trace_list(entries, state)))
    return html.Div(parts, id="summary-page")


def _region_picker(ctx: Ctx, state: ViewState):
    import dash_mantine_components as dmc

    opts = guarded(regions, ctx, state)
    if not isinstance(opts, list) or not opts:
        return None
    return dmc.MultiSelect(id="sum-regions", data=[{"value": r["key"], "label": r["label"]} for r in opts],
                           value=[r["key"] for r in by_key(ctx, state, state.regions)], maxValues=3,
                           searchable=True, clearable=True, size="xs", w=620,
                           placeholder="Whole trace; choose up to 3 regions (steps, collectives, modules) to "
                                       "compare them side by side", mb=8)


def _figures(ctx: Ctx, state: ViewState):
    chosen = by_key(ctx, state, state.regions)
    if chosen:
        return region_table(ctx, state, chosen)
    return kpi_cards(frames.summary(ctx, state))


def _explorer_numbers(ctx: Ctx, state: ViewState):
    """analysis.neuron_explorer_comparison: Explorer's Summary (kept by the importer) beside analysis.summary,
    each value in its row's unit, with how the definitions differ."""
    df = frames.explorer_comparison(ctx, state)
    if not len(df):
        return note("this profile's Neuron Explorer Summary holds no numbers")
    both = int((df["ours"].notna() & df["neuron_explorer"].notna()).sum())
    return html.Div([note(f"{both} metrics measured by both tools; each side uses its own time base and peaks "
                          "(the notes say how the definitions differ). Metrics only one tool reports follow, "
                          "the other side unknown."),
                     data_table(df, id="ne-compare-table", page_size=25, analysis="neuron_explorer_comparison",
                                unit_col="unit", hidden=("unit", "metric"), wrap=("note",),
                                widths={"label": 270, "difference": 150, "explorer_field": 250})])


def _steps(ctx: Ctx, state: ViewState, origin: int):
    st = frames.steps(ctx, state)
    out = []
    if len(st):
        st = st.copy()
        st["timeline"] = [f"[open]({window_href(state, origin, a, b, pad=0.02)})"
                          for a, b in zip(st["start_ts"], st["end_ts"])]
        out.append(note(f"Step boundary: {analysis.STEP_BOUNDARY}."))
        out.append(data_table(st, id="steps-table", page_size=10, link_col="timeline", origin=origin,
                              analysis="steps"))
        out.append(graph(figures.steps_figure(st), id="steps-fig", height=300))
    else:
        out.append(note("no profiler steps in this trace (a capture without prof.step() calls): the whole trace "
                        "is one region"))
    out.append(guarded(lambda: graph(frames.figure(ctx, state, "temporal", figures.temporal_breakdown_figure),
                                     id="step-breakdown-fig", height=320)))
    out.append(guarded(lambda: note(frames.figure(ctx, state, "temporal-note", figures.temporal_breakdown_note))))
    return html.Div(out)


def _ranks(ctx: Ctx, state: ViewState):
    """The group's ranks on one time axis (analysis.rank_timeline), their load balance (analysis.rank_balance),
    each table row linking to that rank's summary, and the cross-rank findings (stragglers, slow links): one
    pass of analysis.cross_rank_report that reads each rank's file once, one rank in memory at a time, so a
    run of hundreds of ranks is not held in this process."""
    x = frames.group(ctx, state, "cross_rank", lambda ts: analysis.cross_rank_report(ts, keep_loaded=False))
    df = x["rank_balance"].copy()
    df.insert(0, "open", [f"[rank {r}]({state.href(page='summary', rank=int(r))})" for r in df["rank"]])
    rr = x["run_recommendations"]
    found = html.Ol([html.Li([html.B(f"[{r.severity}] {r.title}"), html.Div(str(r.evidence), style={"fontSize": 13})])
                     for r in rr.itertuples(index=False)], id="run-findings") if len(rr) else \
        note("no straggler (no rank makes the others wait more than 1% of the run) and no slow link")
    return html.Div([graph(figures.rank_timeline_figure(x["rank_timeline"]), id="rank-timeline-fig"),
                     graph(figures.rank_balance_figure(df), id="rank-balance-fig"), found,
                     data_table(df, id="rank-balance-table", page_size=16, link_col="open")])


def _recommendations(ctx: Ctx, state: ViewState, origin: int):
    trace = trace_or_error(ctx, state)
    rec = frames.recommendations(ctx, state)
    if not len(rec):
        return note("no recommendation fired for this trace")
    items = []
    for r in rec.itertuples(index=False):
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
        known = saved is not None and not pd.isna(saved)
        saved_txt = f" · est. saving {format_value(float(saved), 'ns')}" if known else ""
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
    df = trace.table(table, ["start_ts", "duration_ns"])
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
    reset = dict(rank=None, t0=None, t1=None, sel=None, regions=None, notes=None)
    items = []
    for e in entries:
        if e.is_group:
            items.append(html.Li([dcc.Link(e.label, href=state.href(trace=e.key, **reset)),
                                  html.Ul([html.Li(dcc.Link(m, href=state.href(trace=m, **reset)))
                                           for m in e.members])]))
        elif e.key not in grouped:
            items.append(html.Li(dcc.Link(e.label, href=state.href(trace=e.key, **reset))))
    return html.Ul(items, id="trace-list")


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("sum-figures", "children"), Output("url-out", "search", allow_duplicate=True),
                  Output("last-sync", "data", allow_duplicate=True), Input("sum-regions", "value"),
                  State("url", "pathname"), State("url", "search"), prevent_initial_call=True)
    def pick_regions(keys, pathname, search):
        state = ctx.decode(pathname, search).with_(regions=tuple(keys or ())[:3] or None)
        s = search_of(state)
        return guarded(_figures, ctx, state), s, "/summary" + s
