"""Memory page: SBUF/PSUM buffers over time (which tensor held which bytes of every partition, spills),
occupancy against capacity, HBM held over time by kind against capacity (``analysis.memory_*``,
``analysis.hbm_usage`` and their figure builders). A trace without these events says "not recorded" and why."""
from __future__ import annotations

import math

import pandas as pd
from dash import html

import analysis
from analysis import figures
from analysis.units import format_value

from .. import frames
from ..state import ViewState
from .common import Ctx, data_table, graph, guarded, note, section, trace_or_error

#: the numbers shown first, in order
CARDS = ("sbuf_peak_bytes", "sbuf_peak_percent", "psum_peak_bytes", "psum_peak_percent", "spilled_buffers",
         "spill_reload_bytes", "hbm_peak_bytes", "hbm_peak_percent")
TOP_BUFFERS = 200


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def _summary(ctx: Ctx, state: ViewState) -> pd.DataFrame:
    return frames.figure(ctx, state, "memory_summary", analysis.memory_summary)


def _value(df: pd.DataFrame, metric: str) -> float:
    v = df.loc[df["metric"] == metric, "value"]
    return float(v.iloc[0]) if len(v) else math.nan


def _card(row: pd.Series) -> html.Div:
    """One number in words and units; an unknown one says "unknown" and why."""
    v = float(row["value"])
    known = not math.isnan(v)
    body = [html.Div(str(row["label"]), className="kpi-label"),
            html.Div(format_value(v, str(row["unit"])) if known else "unknown", className="kpi-value")]
    if not known:  # the section below gives the whole reason once; the card keeps it short
        why = "not recorded" if str(row["note"]).startswith("not recorded:") else str(row["note"])
        body.append(html.Div(why, className="kpi-why", style={"fontSize": 11, "color": "#777"}))
    return html.Div(body, title=str(row["note"]), className="kpi-card" + ("" if known else " unknown"),
                    **{"data-metric": str(row["metric"]), "data-value": repr(v) if known else "nan"})


def _cards(df: pd.DataFrame) -> html.Div:
    """The CARDS in order; a share of capacity is left out when its peak is unknown (its card says why)."""
    rows = df.set_index("metric", drop=False)
    shown = [m for m in CARDS if m in rows.index
             and not (m.endswith("_peak_percent") and math.isnan(_value(df, m.replace("_percent", "_bytes"))))]
    return html.Div([_card(rows.loc[m]) for m in shown], id="memory-cards", className="kpi-cards",
                    style={"display": "flex", "flexWrap": "wrap", "gap": "8px"})


def _layout(ctx: Ctx, state: ViewState):
    trace = trace_or_error(ctx, state)
    s = _summary(ctx, state)
    has_alloc = _value(s, "allocations_recorded") > 0
    has_hbm = _value(s, "hbm_recorded") > 0
    why_alloc = str(s.loc[s["metric"] == "allocations_recorded", "note"].iloc[0])
    why_hbm = str(s.loc[s["metric"] == "hbm_recorded", "note"].iloc[0])
    parts = [html.H2(f"Memory: {trace.name}"), _cards(s),
             note("Time axes: ms from the trace start. Drag on a chart to zoom, double-click to reset.")]
    if trace.simulated and (has_alloc or has_hbm):
        parts.append(note("Simulated: buffers and HBM held come from the simulated runtime's model of the captured "
                          "program (docs/simulation.md), not from a device."))
    if has_alloc:
        parts += [section("SBUF buffers over time", guarded(_gantt, ctx, state, s, "SBUF")),
                  section("PSUM buffers over time", guarded(_gantt, ctx, state, s, "PSUM")),
                  section("SBUF and PSUM held against capacity",
                          guarded(lambda: graph(_occupancy(ctx, state), id="memory-occupancy", height=320))),
                  section(f"Largest buffers (top {TOP_BUFFERS} by bytes x time held)",
                          guarded(_buffers_table, ctx, state))]
    else:
        parts.append(section("SBUF and PSUM buffers", note(f"Unknown: {why_alloc}.")))
    if has_hbm:
        parts.append(section("HBM held over time",
                             guarded(lambda: graph(_hbm(ctx, state), id="memory-hbm", height=360))))
    else:
        parts.append(section("HBM held over time", note(f"Unknown: {why_hbm}.")))
    return html.Div(parts, id="memory-page")


def _occupancy(ctx: Ctx, state: ViewState):
    return frames.figure(ctx, state, "memory_occupancy_figure",
                         lambda t: figures.memory_occupancy_figure(t, *t.time_range))


def _hbm(ctx: Ctx, state: ViewState):
    return frames.figure(ctx, state, "hbm_usage_figure", lambda t: figures.hbm_usage_figure(t, *t.time_range))


def _gantt_figure(ctx: Ctx, state: ViewState, s: pd.DataFrame, buffer: str):
    cap = _value(s, f"{buffer.lower()}_capacity_bytes")
    return frames.figure(ctx, state, f"memory_gantt_{buffer}",
                         lambda t: figures.memory_allocations_figure(t, buffer=buffer, capacity_bytes=cap,
                                                                     t0=t.time_range[0], t1=t.time_range[1]))


def _gantt(ctx: Ctx, state: ViewState, s: pd.DataFrame, buffer: str):
    return graph(_gantt_figure(ctx, state, s, buffer), id=f"memory-gantt-{buffer.lower()}", height=380)


def _top(ctx: Ctx, state: ViewState) -> pd.DataFrame:
    return frames.figure(ctx, state, "memory_allocations_top",
                         lambda t: analysis.memory_allocations(t, top=TOP_BUFFERS))


def warm(ctx: Ctx, state: ViewState) -> None:
    """Compute every frame this page shows (the explorer's precompute, :func:`explorer.frames.page_frames`)."""
    s = _summary(ctx, state)
    if _value(s, "allocations_recorded") > 0:
        for buffer in ("SBUF", "PSUM"):
            _gantt_figure(ctx, state, s, buffer)
        _occupancy(ctx, state)
        _top(ctx, state)
    if _value(s, "hbm_recorded") > 0:
        _hbm(ctx, state)


def _buffers_table(ctx: Ctx, state: ViewState):
    top = _top(ctx, state)
    return data_table(top, id="memory-buffers-table", page_size=10, analysis="memory_allocations",
                      origin=trace_or_error(ctx, state).time_range[0], hidden=("end_ts", "partition"))
