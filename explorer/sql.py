"""Read-only SQL over a trace's tables with DuckDB (the Query page).

In-memory DuckDB connections of one open trace (or group of ranks) see the trace tables as views of the loaded
DataFrames (no copy): ``host_ops``, ``instructions``, ``dma``, ``collectives``, ``counters``, ``flows``,
``tracks``, each with ``row_id`` (the event's id, as in the explorer's URLs) and ``rank``; for a group of ranks
every view holds all ranks. Each connection is locked down before any user query: ``enable_external_access =
false`` (no file, network, extension or Python-object access), configuration locked, spilling off, a memory cap.

Each query takes a connection of its own from a small pool (``POOL`` connections over the same DataFrames,
made on demand; more concurrent queries wait for one, within their time limit), so concurrent viewers never see
"connection is busy". The whole query, parse included, runs on a worker thread under one deadline of
``timeout_s`` seconds: at the deadline the query is interrupted and the caller gets the time-limit error at
once (a connection still busy then, e.g. in DuckDB's parser, which an interrupt does not stop, is dropped
from the pool). Before DuckDB sees it, a query nested deeper than ``MAX_NESTING`` is refused (DuckDB's parser is
superlinear on deep nesting: 4,000 ``(`` take 16 s). Only a single SELECT statement runs, and at most
``max_rows`` rows come back. Errors are the engine's message, with the server's paths (home directory,
extension folders) replaced by ``<server path>``.
"""
from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

TABLES = ("host_ops", "instructions", "dma", "collectives", "counters", "flows", "tracks", "allocations")
EVENT_TABLES = ("host_ops", "instructions", "dma", "collectives")
DEFAULT_TIMEOUT_S = 10.0
MAX_ROWS = 10_000
#: Connections per trace: as many queries run at once (each DuckDB connection itself uses 2 threads).
POOL = 4
#: Deepest bracket nesting a query may have (real queries stay far below; DuckDB's own limit is 1000).
MAX_NESTING = 100
_MB = 1 << 20


class QueryError(ValueError):
    """A query that was refused or failed; the message is the engine's (or says what is allowed)."""


@dataclass
class Result:
    frame: pd.DataFrame
    truncated: bool
    seconds: float


class TraceDB:
    """The locked-down DuckDB connections of one trace or group (see module docstring). ``memory_limit_mb`` is
    shared by the pool (each connection gets its part)."""

    def __init__(self, traces: list, memory_limit_mb: int = 1024, pool: int = POOL):
        import duckdb

        self._duckdb = duckdb
        self._frames: list[tuple[str, list[tuple[str, pd.DataFrame]]]] = []
        for name in TABLES:
            parts = []
            for k, t in enumerate(traces):
                df = t.table(name)
                parts.append((f"_{name}_{k}", df.assign(row_id=df.index.to_numpy(), rank=int(t.rank))))
            self._frames.append((name, parts))
        self.ranks = [int(t.rank) for t in traces]
        self._size = max(1, int(pool))
        self._memory_mb = max(64, int(memory_limit_mb) // self._size)
        self._idle: queue.LifoQueue = queue.LifoQueue()
        self._lock = threading.Lock()
        self._made = 0
        self._idle.put(self._connect())  # the first one now: a broken setup fails here, not in a query
        self._made = 1

    def _connect(self):
        con = self._duckdb.connect(":memory:", config={"enable_external_access": False, "threads": 2,
                                                       "memory_limit": f"{self._memory_mb}MB", "temp_directory": ""})
        for name, parts in self._frames:
            for view, df in parts:
                con.register(view, df)
            con.execute(f"CREATE VIEW {name} AS " + " UNION ALL BY NAME ".join(f"SELECT * FROM {v}" for v, _ in parts))
        con.execute("SET lock_configuration = true")
        return con

    def _acquire(self, deadline: float):
        """An idle connection, a new one while the pool has room, else the first one freed before ``deadline``."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            make = self._made < self._size
            if make:
                self._made += 1
        if make:
            try:
                return self._connect()
            except BaseException:
                with self._lock:
                    self._made -= 1
                raise
        try:
            return self._idle.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise QueryError("the other queries running on this trace took the whole time limit; try again") \
                from None

    def _drop(self, con) -> None:
        """Forget a connection that may still be busy (it is closed by its worker once done)."""
        with self._lock:
            self._made -= 1

    def _call(self, fn: Callable[[Any], Any], timeout_s: float, sql: str = "") -> Any:
        """``fn(connection)`` on a worker thread, the whole of it within ``timeout_s`` seconds."""
        deadline = time.monotonic() + timeout_s
        con = self._acquire(deadline)
        box: dict[str, Any] = {}
        done = threading.Event()
        abandoned = threading.Event()

        def work() -> None:
            try:
                box["value"] = fn(con)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["error"] = exc
            finally:
                done.set()
                if abandoned.is_set():
                    con.close()

        threading.Thread(target=work, name="explorer-sql", daemon=True).start()
        if not done.wait(max(0.0, deadline - time.monotonic())):
            con.interrupt()
            if not done.wait(0.5):  # still busy (the parser does not check for interrupts): leave it behind
                abandoned.set()
                if done.is_set():
                    con.close()
                self._drop(con)
                raise QueryError(f"the query ran longer than the limit of {timeout_s:g} s and was stopped")
        self._idle.put(con)
        if "error" in box:
            exc = box["error"]
            if isinstance(exc, self._duckdb.InterruptException):
                raise QueryError(f"the query ran longer than the limit of {timeout_s:g} s and was stopped")
            if isinstance(exc, self._duckdb.Error):
                raise QueryError(scrub(str(exc), sql)) from None
            raise exc
        return box["value"]

    def schema(self) -> pd.DataFrame:
        """table, column, type of every queryable view."""
        rows = self._call(lambda con: con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_name IN "
            "(SELECT unnest(?)) ORDER BY table_name, ordinal_position", [list(TABLES)]).fetchall(), DEFAULT_TIMEOUT_S)
        return pd.DataFrame(rows, columns=["table", "column", "type"])

    def _check(self, con, sql: str) -> None:
        """Refuse anything but one SELECT statement (QueryError with the reason)."""
        stmts = con.extract_statements(sql)
        if len(stmts) != 1:
            raise QueryError(f"one statement at a time ({len(stmts)} given)")
        if stmts[0].type != self._duckdb.StatementType.SELECT:
            raise QueryError(f"read-only: only SELECT queries run here ({stmts[0].type.name} refused)")

    def check(self, sql: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Refuse anything but one SELECT statement (QueryError with the reason), parse within ``timeout_s``."""
        _precheck(sql)
        self._call(lambda con: self._check(con, sql), timeout_s, sql)

    def run(self, sql: str, timeout_s: float = DEFAULT_TIMEOUT_S, max_rows: int = MAX_ROWS) -> Result:
        """Run one read-only query, parse included, within ``timeout_s``; raises QueryError with the engine's
        message (or the time limit)."""
        _precheck(sql)

        def query(con) -> tuple[list[str], list]:
            self._check(con, sql)
            res = con.execute(sql)
            return [d[0] for d in res.description or []], res.fetchmany(max_rows + 1)

        t = time.perf_counter()
        cols, rows = self._call(query, timeout_s, sql)
        secs = time.perf_counter() - t
        frame = pd.DataFrame(rows[:max_rows], columns=_unique(cols))
        return Result(frame, len(rows) > max_rows, secs)


def _precheck(sql: str) -> None:
    """What is refused before DuckDB parses: an empty query, nesting deeper than ``MAX_NESTING`` (outside string
    literals and quoted names)."""
    if not sql.strip():
        raise QueryError("empty query")
    depth = deepest = 0
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > MAX_NESTING:
        raise QueryError(f"the query nests brackets {deepest} deep; at most {MAX_NESTING} levels run here")


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:/[^\s'\"/:;,()]+){2,}/?")


def scrub(msg: str, sql: str = "") -> str:
    """``msg`` with the server's file paths (two or more components, not written in the query itself) replaced by
    ``<server path>``: DuckDB names its extension folder under the home directory, for example."""
    return _PATH.sub(lambda m: m.group(0) if m.group(0) in sql else "<server path>", msg)


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
