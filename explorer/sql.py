"""Read-only SQL over a trace's tables with DuckDB (the Query page).

One in-memory DuckDB connection per open trace (or group of ranks) sees the trace tables as views of the
loaded DataFrames (no copy): ``host_ops``, ``instructions``, ``dma``, ``collectives``, ``counters``,
``flows``, ``tracks``, each with ``row_id`` (the event's id, as in the explorer's URLs) and ``rank``; for a
group of ranks every view holds all ranks. The connection is locked down before any user query:
``enable_external_access = false`` (no file, network, extension or Python-object access), configuration
locked, spilling off, a memory cap; only a single SELECT statement runs, for at most ``timeout_s`` seconds
(then it is interrupted), and at most ``max_rows`` rows come back. Errors are the engine's message.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import pandas as pd

TABLES = ("host_ops", "instructions", "dma", "collectives", "counters", "flows", "tracks")
EVENT_TABLES = ("host_ops", "instructions", "dma", "collectives")
DEFAULT_TIMEOUT_S = 10.0
MAX_ROWS = 10_000


class QueryError(ValueError):
    """A query that was refused or failed; the message is the engine's (or says what is allowed)."""


@dataclass
class Result:
    frame: pd.DataFrame
    truncated: bool
    seconds: float


class TraceDB:
    """The locked-down DuckDB connection of one trace or group (see module docstring)."""

    def __init__(self, traces: list, memory_limit: str = "1GB"):
        import duckdb

        self._duckdb = duckdb
        self.con = duckdb.connect(":memory:", config={"enable_external_access": False, "threads": 2,
                                                      "memory_limit": memory_limit, "temp_directory": ""})
        self.lock = threading.Lock()
        for name in TABLES:
            parts = []
            for k, t in enumerate(traces):
                df = t.table(name)
                view = f"_{name}_{k}"
                self.con.register(view, df.assign(row_id=df.index.to_numpy(), rank=int(t.rank)))
                parts.append(f"SELECT * FROM {view}")
            self.con.execute(f"CREATE VIEW {name} AS " + " UNION ALL BY NAME ".join(parts))
        self.con.execute("SET lock_configuration = true")
        self.ranks = [int(t.rank) for t in traces]

    def schema(self) -> pd.DataFrame:
        """table, column, type of every queryable view."""
        rows = self.con.execute("SELECT table_name, column_name, data_type FROM information_schema.columns "
                                "WHERE table_name IN (SELECT unnest(?)) ORDER BY table_name, ordinal_position",
                                [list(TABLES)]).fetchall()
        return pd.DataFrame(rows, columns=["table", "column", "type"])

    def check(self, sql: str) -> None:
        """Refuse anything but one SELECT statement (QueryError with the reason)."""
        if not sql.strip():
            raise QueryError("empty query")
        try:
            stmts = self.con.extract_statements(sql)
        except self._duckdb.Error as exc:
            raise QueryError(str(exc)) from None
        if len(stmts) != 1:
            raise QueryError(f"one statement at a time ({len(stmts)} given)")
        if stmts[0].type != self._duckdb.StatementType.SELECT:
            raise QueryError(f"read-only: only SELECT queries run here ({stmts[0].type.name} refused)")

    def run(self, sql: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = MAX_ROWS) -> Result:
        """Run one read-only query; raises QueryError with the engine's message (or the time limit)."""
        import time

        self.check(sql)
        with self.lock:
            timer = threading.Timer(timeout_s, self.con.interrupt)
            t = time.perf_counter()
            timer.start()
            try:
                res = self.con.execute(sql)
                cols = [d[0] for d in res.description or []]
                rows = res.fetchmany(max_rows + 1)
            except self._duckdb.InterruptException:
                raise QueryError(f"the query ran longer than the limit of {timeout_s:g} s and was stopped") from None
            except self._duckdb.Error as exc:
                raise QueryError(str(exc)) from None
            finally:
                timer.cancel()
            secs = time.perf_counter() - t
        frame = pd.DataFrame(rows[:max_rows], columns=_unique(cols))
        return Result(frame, len(rows) > max_rows, secs)


def _unique(cols: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for c in cols:
        n = seen.get(c, 0)
        seen[c] = n + 1
        out.append(c if n == 0 else f"{c}_{n}")
    return out


def event_table_of(sql: str) -> str | None:
    """The one event table a query reads (its rows' ``row_id`` then names events), else None."""
    import re

    hits = {t for t in EVENT_TABLES if re.search(rf"\b{t}\b", sql, re.IGNORECASE)}
    return hits.pop() if len(hits) == 1 else None
