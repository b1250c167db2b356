"""Helpers shared by the page modules: the app context, error boxes, tables, graphs, links."""
from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd
from dash import dash_table, dcc, html

from ..state import ViewState
from ..store import TraceAccessError, TraceOpenError, TraceStore

LOG = logging.getLogger("explorer")


@dataclass
class Ctx:
    """What page builders need: the store (and through it the traces)."""

    store: TraceStore
    width_px: int = 1400


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
    except (TraceAccessError, TraceOpenError) as exc:
        return error_box(redact_paths(str(exc)))
    except Exception as exc:  # noqa: BLE001 - show a short message, log the traceback, keep serving
        LOG.exception("page section %s failed", getattr(build, "__qualname__", build))
        return error_box(short_error(exc))


_PATH_RE = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\\/\s:'\"]+){2,}")


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
        if math.isnan(v):
            return None
        return float(f"{v:.6g}")
    if hasattr(v, "item"):
        return v.item()
    return v if isinstance(v, (int, str, bool)) or v is None else str(v)


def df_records(df: pd.DataFrame, limit: int = 2000) -> list[dict]:
    """DataFrame -> JSON-safe records (6 significant digits for floats)."""
    df = df.head(limit)
    cols = [str(c) for c in df.columns]
    return [{c: _cell(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]


def data_table(df: pd.DataFrame, id: str | dict, page_size: int = 20, limit: int = 2000,
               link_col: str | None = None) -> dash_table.DataTable:
    """Sortable, filterable table (``link_col`` holds markdown links)."""
    cols = []
    for c in df.columns:
        spec = {"name": str(c), "id": str(c)}
        if c == link_col:
            spec["presentation"] = "markdown"
        elif pd.api.types.is_numeric_dtype(df[c]):
            spec["type"] = "numeric"
        cols.append(spec)
    return dash_table.DataTable(id=id, columns=cols, data=df_records(df, limit), sort_action="native",
                                filter_action="native", page_size=page_size,
                                style_table={"overflowX": "auto"},
                                style_cell={"fontFamily": "monospace", "fontSize": 12, "maxWidth": 420,
                                            "overflow": "hidden", "textOverflow": "ellipsis"},
                                markdown_options={"link_target": "_self"})


def graph(fig, id: str | dict | None = None, height: int | None = None) -> dcc.Graph:
    if height is not None and fig is not None:
        fig.update_layout(height=height)
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
