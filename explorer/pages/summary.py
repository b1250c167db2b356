"""Summary page, answer first: step time (and per optimizer step), MFU and its ceiling, where the time goes
(analysis.time_split as one bar) and the top recommendation; then the sections that apply to the trace:
compute engines (one utilisation chart, the TensorE FLOPs split of analysis.flops_breakdown), memory (HBM,
SBUF/PSUM, spills: analysis.summary_items), DMA (analysis.dma_bytes_by source and data type), collectives,
host and idle. Then notes, the ranks of a run, the steps (folded when there are few), the recommendations
with links to the timeline, up to 3 regions side by side, Neuron Explorer's own numbers for its profiles.
Every figure is a card in words and units; an unknown one says "unknown" and why."""
from __future__ import annotations

import math

import pandas as pd
from dash import Input, Output, State, dcc, html

import analysis
from analysis import figures
from analysis.units import format_value

from .. import frames
from ..bars import bar_list, column_bars, stacked_bar, stacked_columns
from ..labels import metric_label
from ..notes import note_list, notes_for
from ..regions import by_key, regions
from ..state import SEL_TABLES, ViewState
from .common import Ctx, data_table, graph, guarded, note, search_of, section, trace_or_error, window_href

#: Summary metrics shown in each section (in order); a metric the trace does not have is left out, one it has
#: as NaN reads "unknown" with the reason (the analysis's description)
ANSWER = ("step_time_mean_ns", "optimizer_step_time_mean_ns", "mfu_estimated_percent")
COMPUTE = ("hfu_estimated_percent", "model_flops", "transpose_flops", "mm_arithmetic_intensity",
           "peak_flops_bandwidth_ratio", "active_cores")
MEMORY = ("mbu_estimated_percent", "hbm_read_bytes", "hbm_write_bytes", "hbm_bandwidth_bytes_per_s")
DMA = ("dma_transfer_total_bytes", "dma_transfer_count", "dma_transfer_average_bytes", "small_dma_transfer_percent",
       "dma_active_time_percent")
COLLECTIVES = ("cc_op_count", "cc_op_active_time_percent", "comm_comp_overlap_percent")
HOST_IDLE = ("total_time", "step_count", "step_time_max_ns", "device_active_percent", "idle_percent",
             "idle_host_wait_percent", "idle_kernel_wait_percent", "idle_other_percent")
#: up to this many steps the step times are HTML bars (explorer.bars), beyond it a plotly graph
MAX_STEP_BARS = 40
#: engine rows of the Tensor engine: two rows of one TensorE, as in Neuron Explorer
TENSOR_NOTE = ("Tensor and TensorMatrix are the same TensorE on two rows, as in Neuron Explorer: the Tensor row "
               "holds the weight loads (LoadStationary), TensorMatrix the matmuls (MultiplyMoving).")


def _labels(df: pd.DataFrame) -> list[str]:
    lab = df["label"] if "label" in df.columns else [None] * len(df)
    return [metric_label(m, x) for m, x in zip(df["metric"], lab)]


def _known(v) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def card(metric: str, label: str, value, unit: str, description: str) -> html.Div:
    """One figure: its label and value in words and units; an unknown value says so and why."""
    known = _known(value)
    body = [html.Div(label, className="kpi-label"),
            html.Div(format_value(value, unit) if known else "unknown", className="kpi-value")]
    if not known:
        body.append(html.Div(_why(description), className="kpi-why", style={"fontSize": 11, "color": "#777"}))
    return html.Div(body, title=f"{description} ({metric})", className="kpi-card" + ("" if known else " unknown"),
                    **{"data-metric": metric, "data-value": repr(float(value)) if known else "nan"})


def _why(description: str) -> str:
    d = str(description)
    i = d.lower().find("nan")
    return d[i + 3:].lstrip(": ;(").rstrip(")") if i >= 0 else d


def cards(df: pd.DataFrame, metrics, id: str | None = None) -> html.Div:
    """Cards of the ``metrics`` rows of a summary-like frame (metric, value, unit, description[, label]),
    in the order given; metrics the frame does not have are left out."""
    rows = df.assign(_label=_labels(df)).set_index("metric")
    out = [card(m, rows.at[m, "_label"], rows.at[m, "value"], str(rows.at[m, "unit"]),
                str(rows.at[m, "description"] if "description" in rows.columns else rows.at[m, "note"]))
           for m in metrics if m in rows.index]
    kw = {"id": id} if id else {}
    return html.Div(out, className="kpi-cards", style={"display": "flex", "flexWrap": "wrap", "gap": "8px"}, **kw)


def _value(df: pd.DataFrame, metric: str) -> float:
    v = df.loc[df["metric"] == metric, "value"]
    return float(v.iloc[0]) if len(v) and _known(v.iloc[0]) else math.nan


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
    group = ctx.store.open(state.trace)
    n_ranks = len(getattr(group, "traces", ()))
    name = next((e.label for e in ctx.store.entries() if e.key == state.trace), trace.name)
    if n_ranks > 1:
        title = f"Summary of the run {name}" + ("" if f"{n_ranks} ranks" in name else f" ({n_ranks} ranks)")
    else:
        title = f"Summary: {trace.name}"
    parts = [html.H2(title), html.Div(guarded(_body, ctx, state, origin, n_ranks), id="sum-body")]
    notes = notes_for(ctx, state)
    if notes:
        parts.append(section("Notes", note_list(notes, state, with_delete=False)))
    if n_ranks > 1:
        parts.append(section(f"Ranks ({n_ranks} traces of this run)", guarded(_ranks, ctx, state)))
    parts.append(guarded(_steps_section, ctx, state, origin))
    parts.append(section("Recommendations", guarded(_recommendations, ctx, state, origin)))
    parts.append(section("Compare regions", _region_picker(ctx, state),
                         html.Div(guarded(_figures, ctx, state), id="sum-figures")))
    if analysis.EXPLORER_SUMMARY_KEY in trace.header.metadata:
        parts.append(section("Neuron Explorer's numbers beside ours", guarded(_explorer_numbers, ctx, state)))
    entries = ctx.store.entries()
    if len(entries) > 1:
        parts.append(section("Traces served here", trace_list(entries, state)))
    return html.Div(parts, id="summary-page")


def _frames(ctx: Ctx, state: ViewState) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(analysis.summary, analysis.summary_items as summary rows) of the trace."""
    sm = frames.summary(ctx, state)
    items = frames.figure(ctx, state, "summary_items", analysis.summary_items)
    return sm, items.rename(columns={"note": "description"})


def _body(ctx: Ctx, state: ViewState, origin: int, n_ranks: int) -> html.Div:
    """The answer first, then the sections that apply to this trace (compute engines, memory, DMA,
    collectives, host and idle)."""
    sm, items = _frames(ctx, state)
    both = pd.concat([sm, items], ignore_index=True)
    out = [section("The answer", _answer(ctx, state, both, origin, n_ranks))]
    engines = sm[sm["metric"].str.endswith("_active_percent") & (sm["metric"] != "device_active_percent")]
    if engines["value"].notna().any():
        out.append(section("Compute engines", _compute(ctx, state, both, engines)))
    sbuf_psum = [m for m in ("sbuf_usage_mean_percent", "sbuf_usage_max_percent", "psum_usage_mean_percent",
                             "psum_usage_max_percent") if _known(_value(items, m))]
    has_dma = _value(sm, "dma_transfer_count") > 0
    spill = ["spill_save_bytes", "spill_reload_bytes", "spill_reload_share_percent"] if has_dma else []
    if _known(_value(sm, "hbm_total_bytes")) or sbuf_psum:
        out.append(section("Memory", cards(both, MEMORY + tuple(sbuf_psum) + tuple(spill), id="memory-cards")))
    if has_dma:
        out.append(section("DMA", _dma(ctx, state, sm)))
    if _value(sm, "cc_op_count") > 0 or n_ranks > 1:
        out.append(section("Collectives", cards(sm, COLLECTIVES, id="collective-cards")))
    idle = tuple(m for m in HOST_IDLE if m != "step_count" or _value(sm, m) > 0)  # "0 steps": see Steps
    out.append(section("Host and idle", cards(sm, idle, id="idle-cards")))
    return html.Div(out)


def _answer(ctx: Ctx, state: ViewState, both: pd.DataFrame, origin: int, n_ranks: int) -> html.Div:
    """Step time (and per optimizer step), MFU and its ceiling, where the time goes, the top recommendation."""
    out = []
    if n_ranks > 1:
        out.append(note(f"Figures of rank {state.rank or 0}, one of the run's {n_ranks} ranks; the Ranks section "
                        "compares them all."))
    out.append(cards(both, ANSWER + ("mfu_max_achievable_estimated_percent",), id="answer-cards"))
    ts = frames.figure(ctx, state, "time_split", analysis.time_split)
    out.append(html.Div("Where the time goes (each nanosecond charged to the first of compute, collectives, "
                        "DMA, other device work active then, else idle):", style={"fontSize": 13, "marginTop": 6}))
    out.append(html.Div(stacked_bar(frames.named(ctx, state, "fig:time_split"), id="time-split-fig"),
                        **{"data-split": ",".join(f"{p}={v:.6g}" for p, v in zip(ts["part"], ts["percent"]))}))
    rec = frames.recommendations(ctx, state)
    if len(rec):
        r = rec.iloc[0]
        saved = r.get("est_time_saved_ns")
        txt = f" · est. saving {format_value(float(saved), 'ns')}" if _known(saved) else ""
        out.append(html.Div([html.B("Top recommendation: "), html.Span(f"[{r['severity']}] {r['title']}"),
                             html.Div(f"Action: {r['action']}{txt}", style={"fontSize": 13, "color": "#264"})],
                            id="top-recommendation", style={"marginTop": 6}))
    else:
        out.append(note("no recommendation fired for this trace"))
    return html.Div(out)


def _compute(ctx: Ctx, state: ViewState, both: pd.DataFrame, engines: pd.DataFrame) -> html.Div:
    """Per-engine utilisation as one chart, the TensorE FLOPs split, the compute figures."""
    out = [bar_list(frames.named(ctx, state, "fig:engines"), id="engine-fig")]
    if {"Tensor_active_percent", "TensorMatrix_active_percent"} <= set(engines["metric"]):
        out.append(note(TENSOR_NOTE))
    fb = frames.figure(ctx, state, "flops_breakdown", analysis.flops_breakdown)
    out.append(html.Div("Matrix-engine capacity (peak × active cores × analysed time), split as Neuron Explorer splits "
                        "TensorE FLOPs:",
                        style={"fontSize": 13}))
    out.append(stacked_bar(frames.named(ctx, state, "fig:flops_breakdown"), id="flops-fig"))
    out.append(data_table(fb, id="flops-table", page_size=4, analysis="flops_breakdown", wrap=("note",),
                          widths={"note": 520}))
    # throttling is a Trainium TensorE mechanism: its cards show where the trace has the counter
    thr = tuple(m for m in ("throttling_percent", "throttle_active_time_percent") if _known(_value(both, m)))
    out.append(cards(both, COMPUTE + thr, id="compute-cards"))
    return html.Div(out)


def _dma(ctx: Ctx, state: ViewState, sm: pd.DataFrame) -> html.Div:
    """DMA figures, and the bytes by source and by data type side by side."""
    figs = []
    for by in ("source", "data_type"):
        df = frames.figure(ctx, state, f"dma_bytes_by:{by}", lambda t, b=by: analysis.dma_bytes_by(t, by=b))
        tips = {str(g): f"{g}: {int(b):,} B ({p:.1f}%)" for g, b, p in zip(df["group"], df["bytes"], df["percent"])}
        bars = bar_list(frames.named(ctx, state, f"fig:dma_bytes_by:{by}"), id=f"dma-{by}-fig", tips=tips)
        figs.append(html.Div(bars, style={"flex": "1 1 480px"}))
    return html.Div([cards(sm, DMA, id="dma-cards"), html.Div(figs, style={"display": "flex", "flexWrap": "wrap"})])


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
    return note("the figures above are of the whole trace; choose up to 3 regions to see theirs side by side")


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


def _steps_section(ctx: Ctx, state: ViewState, origin: int):
    """Steps: open when there are more than 3, else folded (a chart of 2 bars says little)."""
    n = len(frames.steps(ctx, state))
    body = _steps(ctx, state, origin)
    if n > 3:
        return section(f"Steps ({n})", body)
    return html.Details([html.Summary(html.H3(f"Steps ({n}) and the temporal breakdown",
                                              style={"display": "inline", "margin": "18px 0 6px"})), body],
                        id="steps-fold", className="section")


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
        fig = frames.named(ctx, state, "fig:steps")  # HTML bars (no plotly.js to load) unless there are many steps
        out.append(column_bars(fig, id="steps-fig") if len(st) <= MAX_STEP_BARS else graph(fig, id="steps-fig"))
    else:
        out.append(note("no profiler steps in this trace (a capture without prof.step() calls): the whole trace "
                        "is one region"))
    out.append(guarded(lambda: stacked_columns(frames.figure(ctx, state, "temporal", figures.temporal_breakdown_figure),
                                               id="step-breakdown-fig")))
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
