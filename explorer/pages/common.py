"""Helpers shared by the page modules: the app context, error boxes, tables, graphs, links."""
from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import dash_ag_grid as dag
import pandas as pd
import plotly.graph_objects as go
from dash import dcc, html

from ..labels import column_label, column_unit
from ..state import ViewState, decode
from ..store import FramePending, TraceAccessError, TraceOpenError, TraceStore

LOG = logging.getLogger("explorer")


@dataclass
class Ctx:
    """What page builders need: the store (and through it the traces)."""

    store: TraceStore
    width_px: int = 1400
    wait_s: float | None = None  # how long a page waits for an analysis frame before showing "computing"
    precompute: bool = False  # the first page of a trace starts computing every page's frames in the background

    def decode(self, pathname: str | None, search: str | None) -> ViewState:
        """The URL's state, with the default trace when the URL names none (every page works from a bare URL)."""
        state = decode(pathname, search)
        return state if state.trace else state.with_(trace=self.store.default_key())

    def memo(self, key: str, state: ViewState, fn: Callable[[], Any]) -> Any:
        """``fn()`` computed once per (trace, rank, ``key``) while the trace is open (see TraceStore.memo)."""
        return self.store.memo(state.trace, (state.rank, key), fn)


def error_box(msg: str) -> html.Div:
    return html.Div([html.B("Error: "), html.Span(msg)], className="error-box",
                    style={"background": "#fdecea", "border": "1px solid #f5c2c0", "padding": "10px",
                           "margin": "10px 0", "color": "#611a15", "whiteSpace": "pre-wrap"})


def note(msg: str) -> html.Div:
    return html.Div(msg, className="note", style={"color": "#555", "margin": "8px 0", "fontStyle": "italic"})


def guarded(build: Callable[..., Any], *args, **kw) -> Any:
    """Run a page/section builder; any failure becomes an error box instead of a crashed callback."""
    try:
        return build(*args, **kw)
    except FramePending as exc:
        if exc.future is None or exc.store is None:
            return pending_box()
        from ..push import pending_section  # (push imports the store only)

        return pending_section(exc.store, exc.future, lambda: guarded(build, *args, **kw))
    except (TraceAccessError, TraceOpenError) as exc:
        return error_box(redact_paths(str(exc)))
    except Exception as exc:  # noqa: BLE001 - show a short message, log the traceback, keep serving
        LOG.exception("page section %s failed", getattr(build, "__qualname__", build))
        return error_box(short_error(exc))


_PATH_RE = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\\/\s:'\"]+){2,}")


def pending_box() -> html.Div:
    """A section whose analysis is still running: says so; the page is pushed again as soon as it is ready
    (``explorer.push``: the page's long-poll on the frames it waits for, no reload interval)."""
    return html.Div(html.Span("Computing this section's analysis… it appears here when ready."),
                    className="note nx-pending")


def redact_paths(text: str) -> str:
    """``text`` with every filesystem path cut to its last component (no server paths in the browser)."""
    return _PATH_RE.sub(lambda m: "…/" + re.split(r"[\\/]", m.group(0))[-1], text)


def short_error(exc: BaseException) -> str:
    """One line for the browser: the exception type and message, paths redacted (:func:`redact_paths`);
    the server log keeps the traceback and the full message."""
    msg = redact_paths(str(exc)).splitlines()
    text = f"{type(exc).__name__}: {msg[0] if msg else ''}".rstrip(": ")
    return (text[:300] + "…" if len(text) > 300 else text) + " (details in the server log)"


def section(title: str, *children) -> html.Div:
    return html.Div([html.H3(title, style={"margin": "18px 0 6px"}), *children], className="section")


def _cell(v):
    if isinstance(v, float):
        return None if math.isnan(v) or math.isinf(v) else v
    if hasattr(v, "item"):
        v = v.item()
        return None if isinstance(v, float) and (math.isnan(v) or math.isinf(v)) else v
    return v if isinstance(v, (int, str, bool)) or v is None else str(v)


def df_records(df: pd.DataFrame, limit: int = 5000) -> list[dict]:
    """DataFrame -> JSON-safe records with full precision (the grid formats for display)."""
    df = df.head(limit)
    cols = [str(c) for c in df.columns]
    return [{c: _cell(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]


def table_frame(df: pd.DataFrame, origin: int | None = None, analysis: str | None = None) -> pd.DataFrame:
    """The frame as a grid shows it: a named index becomes a column, an unnamed one is dropped (no pandas
    ``index`` column); absolute timestamps become ns from the trace start when ``origin`` is given."""
    named = [n for n in (df.index.names or []) if n is not None]
    out = df.reset_index() if named else df.reset_index(drop=True)
    if origin is not None:
        for c in out.columns:
            if column_unit(str(c), analysis) == "ts" and pd.api.types.is_numeric_dtype(out[c]):
                out[c] = out[c] - origin
    return out


def data_table(df: pd.DataFrame, id: str | dict, page_size: int = 20, limit: int = 5000,
               link_col: str | None = None, origin: int | None = None, height: int | None = None,
               analysis: str | None = None, unit_col: str | None = None, hidden: tuple[str, ...] = (),
               labels: dict[str, str] | None = None, wrap: tuple[str, ...] = (), widths: dict[str, int] | None = None):
    """A dash-ag-grid of ``df`` (sortable, filterable, resizable): headers and units from the analysis
    registry (the columns of ``analysis`` first), values formatted by unit (durations, timestamps from the
    trace start, exact byte counts, GB/s, TFLOP/s) while the raw numbers stay in the grid for sorting and
    copying. ``link_col`` holds markdown links; ``unit_col`` names a column holding each row's unit (rows of
    mixed units: numbers without a unit of their own are formatted in it); ``hidden`` columns stay in the
    data (for copying) but are not shown; ``labels`` overrides headers; ``wrap`` columns (long text such as
    notes) wrap inside a wider cell instead of being cut; ``widths`` sets minimum widths (px) so that headers
    and labels are not cut."""
    df = table_frame(df, origin, analysis)
    cols = []
    for c in df.columns:
        c = str(c)
        spec = {"field": c, "headerName": (labels or {}).get(c) or column_label(c, analysis), "headerTooltip": c}
        unit = column_unit(c, analysis)
        if c in hidden:
            spec["hide"] = True
        if widths and c in widths:
            spec["minWidth"] = widths[c]
        if c in wrap:
            spec.update(wrapText=True, autoHeight=True, flex=3, minWidth=320,
                        cellStyle={"lineHeight": "1.35", "paddingTop": "4px", "paddingBottom": "4px"})
        if c == link_col:
            spec.update(cellRenderer="markdown", sortable=False, filter=False,
                        cellRendererParams={"linkTarget": "_self"})
        elif pd.api.types.is_bool_dtype(df[c]):
            spec["valueFormatter"] = {"function": "params.value === true ? 'yes' : params.value === false ? 'no' : ''"}
        elif pd.api.types.is_numeric_dtype(df[c]):
            fmt = f"params.data.{unit_col}" if unit_col and not unit else repr(unit)
            spec.update(type="rightAligned", filter="agNumberColumnFilter",
                        valueFormatter={"function": f"fmtUnit(params.value, {fmt})"})
            if unit == "ts":
                spec["headerName"] += " (from trace start)"
        cols.append(spec)
    n = min(len(df), limit)
    # the page-size choices must hold the page size, or AG Grid shows an empty selector
    opts = {"pagination": n > page_size, "paginationPageSize": page_size,
            "paginationPageSizeSelector": sorted({page_size, 50, 100, 500}), "enableCellTextSelection": True,
            "ensureDomOrder": True, "tooltipShowDelay": 300}
    if height is None:
        opts["domLayout"] = "autoHeight"
    # many columns: size each to its content (scroll sideways) instead of squeezing
    wide = sum(not c.get("hide") for c in cols) > 8
    col_def = {"sortable": True, "filter": True, "resizable": True, "minWidth": 90, "wrapHeaderText": True,
               "autoHeaderHeight": True}
    if not wide:
        col_def["flex"] = 1
    return dag.AgGrid(id=id, columnDefs=cols, rowData=df_records(df, limit), dashGridOptions=opts,
                      defaultColDef=col_def, columnSize="autoSize" if wide else "responsiveSizeToFit",
                      className="ag-theme-quartz nx-grid",
                      style={"height": f"{height}px"} if height else {"width": "100%"})


def graph(fig, id: str | dict | None = None, height: int | None = None) -> dcc.Graph:
    if height is not None and fig is not None:  # on a copy: the figure may be a cached frame shared by all pages
        fig = go.Figure(fig).update_layout(height=height)
    kw = {"id": id} if id is not None else {}
    return dcc.Graph(figure=fig, config={"displaylogo": False}, **kw)


def trace_or_error(ctx: Ctx, state: ViewState):
    """The single trace of the state (raises the store's errors)."""
    if not state.trace:
        raise TraceAccessError("no trace selected")
    return ctx.store.trace(state.trace, state.rank)


def search_of(state: ViewState) -> str:
    """The ``?query`` part of the state's URL ('' when everything is default)."""
    href = state.href()
    return href[href.index("?"):] if "?" in href else ""


def window_href(state: ViewState, origin: int, start_ts: int, end_ts: int, sel=None, pad: float = 0.1) -> str:
    """Timeline URL showing absolute [start_ts, end_ts] with a margin."""
    a, b = int(start_ts) - origin, int(end_ts) - origin
    d = max(b - a, 1000)
    return state.href(page="timeline", t0=int(a - pad * d), t1=int(b + pad * d), sel=sel)
