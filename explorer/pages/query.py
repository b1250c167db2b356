"""SQL page (``/query``): read-only DuckDB SQL over the trace tables (every rank of a group), the result
in the grid, a chart of a chosen column, and links that show timestamped rows on the timeline."""
from __future__ import annotations

import pandas as pd
from dash import Input, Output, State, html
from dash.exceptions import PreventUpdate

from ..labels import column_unit
from ..sql import QueryError, TraceDB, event_table_of
from ..state import ViewState
from .common import Ctx, data_table, error_box, graph, guarded, note, search_of, section, window_href

EXAMPLE = ("SELECT name, count(*) AS calls, sum(duration_ns) AS total_ns, min(start_ts) AS first_ts\n"
           "FROM instructions\nGROUP BY name\nORDER BY total_ns DESC\nLIMIT 20")


def layout(ctx: Ctx, state: ViewState):
    return guarded(_layout, ctx, state)


def database(ctx: Ctx, state: ViewState) -> TraceDB:
    """The trace's (or group's) DuckDB connection, built once while the trace is open."""
    obj = ctx.store.open(state.trace)
    traces = list(getattr(obj, "traces", None) or [obj])
    return ctx.store.memo(state.trace, "sql", lambda: TraceDB(traces))


def _layout(ctx: Ctx, state: ViewState):
    import dash_mantine_components as dmc

    try:
        db = database(ctx, state)
    except ImportError:
        return html.Div([html.H2("SQL"), error_box("the SQL page needs DuckDB: pip install 'neuron-profiler[sql]'")],
                         id="query-page")
    sql = state.sql or EXAMPLE
    schema = db.schema()
    tables = [html.Details([html.Summary(t), html.Div(", ".join(f"{c} ({ty.lower()})" for c, ty in
                                                              zip(g["column"], g["type"])), className="nx-hint")])
              for t, g in schema.groupby("table", sort=False)]
    ranks = f" over {len(db.ranks)} ranks (column rank)" if len(db.ranks) > 1 else ""
    return html.Div([
        html.H2("SQL over the trace"),
        note(f"Read-only DuckDB SQL{ranks}. Tables: host_ops, instructions, dma, collectives, counters, flows, "
             "tracks; times in ns (start_ts is absolute: subtract the trace start for relative times), row_id "
             "is the event id. No file access; one SELECT; 10 s limit; the first 10,000 rows."),
        html.Div([
            html.Div([dmc.Textarea(id="q-sql", value=sql, autosize=True, minRows=5, maxRows=16,
                                   styles={"input": {"fontFamily": "ui-monospace, monospace", "fontSize": "13px"}}),
                      dmc.Group([dmc.Button("Run", id="q-run", size="sm"),
                                 html.Span(id="q-status", className="nx-hint")], mt=6)], style={"flex": 1}),
            html.Div([html.B("Tables"), *tables], className="nx-schema"),
        ], className="nx-row-top"),
        html.Div(id="q-out", children=result_view(ctx, state, sql) if state.sql else None),
    ], id="query-page")


def result_view(ctx: Ctx, state: ViewState, sql: str, column: str | None = None):
    """The result grid and chart of ``sql`` (the engine's message when it fails)."""
    return guarded(_result, ctx, state, sql, column)


def _result(ctx: Ctx, state: ViewState, sql: str, column: str | None):
    import dash_mantine_components as dmc

    db = database(ctx, state)
    try:
        res = db.run(sql)
    except QueryError as exc:
        return html.Div(html.Pre(str(exc)), className="error-box", id="q-error")
    df = res.frame
    trace = ctx.store.trace(state.trace, state.rank)
    origin = int(trace.time_range[0])
    df = _with_links(df, state, origin, event_table_of(sql))
    numeric = [c for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and c not in ("row_id", "rank")]
    plain = [c for c in numeric if column_unit(str(c), "") != "ts"]  # absolute timestamps chart poorly
    col = column if column in numeric else ((plain or numeric)[-1] if numeric else None)
    what = f"{len(df):,} rows{' (first 10,000 shown)' if res.truncated else ''} in {res.seconds * 1000:.0f} ms"
    chart = None
    if col is not None and len(df):
        chart = html.Div([dmc.Select(id="q-col", data=numeric, value=col, size="xs", w=260, label="Chart column"),
                          html.Div(graph(_chart(df, col, origin), id="q-chart", height=300), id="q-chart-box")])
    return html.Div([html.Div(what, className="nx-strong", id="q-count"), chart,
                     section("Result", data_table(df, id="q-table", page_size=20, link_col="timeline",
                                                  origin=origin, analysis=""))])


def _with_links(df: pd.DataFrame, state: ViewState, origin: int, table: str | None) -> pd.DataFrame:
    """A "timeline" column of links for rows with a start (``start_ts``, with ``duration_ns`` / ``end_ts``)."""
    if "start_ts" not in df.columns or not len(df) or not pd.api.types.is_numeric_dtype(df["start_ts"]):
        return df
    start = df["start_ts"].fillna(origin).astype("int64")
    if "duration_ns" in df.columns and pd.api.types.is_numeric_dtype(df["duration_ns"]):
        end = start + df["duration_ns"].fillna(0).astype("int64")
    elif "end_ts" in df.columns and pd.api.types.is_numeric_dtype(df["end_ts"]):
        end = df["end_ts"].fillna(origin).astype("int64")
    else:
        end = start + 1
    rid = df["row_id"] if table and "row_id" in df.columns else None
    links = []
    for k, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        sel = (table, int(rid.iloc[k])) if rid is not None and pd.notna(rid.iloc[k]) else None
        rank = int(df["rank"].iloc[k]) if "rank" in df.columns and pd.notna(df["rank"].iloc[k]) else state.rank
        links.append(f"[show]({window_href(state.with_(rank=rank), origin, s, max(e, s + 1), sel=sel, pad=1.0)})")
    out = df.copy()
    out.insert(0, "timeline", links)
    return out


def _chart(df: pd.DataFrame, col: str, origin: int):
    """Bars of ``col`` per row, labelled by the first text column; absolute timestamps from the trace start."""
    import plotly.graph_objects as go

    from ..labels import column_label

    labels = None
    for c in df.columns:
        if c not in (col, "timeline") and not pd.api.types.is_numeric_dtype(df[c]):
            labels = df[c].astype(str)
            break
    x = list(range(len(df)))  # one bar per row, even when labels repeat; long labels cut, whole in the hover
    full = labels.tolist() if labels is not None else [str(i) for i in x]
    short = [t if len(t) <= 28 else t[:27] + "…" for t in full]
    y, title = df[col], column_label(col, "")
    if column_unit(str(col), "") == "ts":
        y, title = (df[col] - origin) / 1e6, title + " (ms from trace start)"
    elif column_unit(str(col), "") == "ns":
        y, title = df[col] / 1e6, title + " (ms)"
    fig = go.Figure(go.Bar(x=x, y=y, marker_color="#4C78A8", hovertext=full, hoverinfo="text+y"))
    fig.update_layout(margin={"t": 20, "l": 60, "r": 10, "b": 80}, yaxis_title=title, plot_bgcolor="white")
    fig.update_xaxes(tickvals=x, ticktext=short, tickangle=-45 if len(x) > 8 else 0, automargin=True)
    return fig


def register(app, ctx: Ctx) -> None:
    @app.callback(Output("q-out", "children"), Output("url-out", "search", allow_duplicate=True),
                  Output("last-sync", "data", allow_duplicate=True), Output("q-status", "children"),
                  Input("q-run", "n_clicks"), State("q-sql", "value"), State("url", "pathname"),
                  State("url", "search"), prevent_initial_call=True)
    def run(_n, sql, pathname, search):
        state = ctx.decode(pathname, search).with_(sql=(sql or "")[:4000])
        s = search_of(state)
        return result_view(ctx, state, state.sql), s, "/query" + s, ""

    @app.callback(Output("q-chart-box", "children"), Input("q-col", "value"), State("q-sql", "value"),
                  State("url", "pathname"), State("url", "search"), prevent_initial_call=True)
    def rechart(col, sql, pathname, search):
        if not col:
            raise PreventUpdate
        state = ctx.decode(pathname, search)
        try:
            df = database(ctx, state).run(sql or "").frame
        except QueryError as exc:
            return error_box(str(exc))
        if col not in df.columns:
            raise PreventUpdate
        origin = int(ctx.store.trace(state.trace, state.rank).time_range[0])
        return graph(_chart(df, col, origin), id="q-chart", height=300)
