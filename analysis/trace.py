"""``Trace`` / ``TraceSet``: the tables of one trace file as lazily loaded DataFrames, plus ``load()``.

Tables follow the reader conventions (index = row id, strings Categorical, timestamps int64 ns, REF columns
int64 with -1 = none). A ``Trace`` restricted by ``window()`` / ``select_steps()`` keeps the rows that overlap
the window (same row ids) and shares the parent's loaded tables.

Everything a ``Trace`` hands out is the caller's to change: tables and memoised analysis results are copies
(shallow and free under pandas copy-on-write, see :mod:`analysis.core.memo`), so ``h = t.hot_ops();
h["device_time_self_ns"] = 0`` changes nothing else. The analysis methods (``t.summary()``, ``t.hot_ops()``,
...) come from :mod:`analysis.methods`; each computes once per trace (window) and arguments.
"""
from __future__ import annotations

import inspect
import os
import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.trace import read_trace

from .core.memo import handout
from .core.runs import group_runs, run_key, run_label
from .core.tables import ANALYSIS_COLUMNS, TABLE_NAMES, WINDOW_COLUMNS, columns_of_table
from .methods import TraceAnalyses, TraceSetAnalyses

__all__ = ["Trace", "TraceSet", "load", "TABLE_NAMES", "ANALYSIS_COLUMNS", "columns_of_table"]

_LOCKS_GUARD = threading.Lock()  # creates the per-key memo locks


class Trace(TraceAnalyses):
    """One trace (one rank, one profiler window).

    Build with :func:`analysis.load` or :meth:`Trace.from_builder` (tests). ``source`` is anything with
    ``.header`` (``schemas.pb.Header``) and ``.table(name) -> DataFrame``: the trace reader's file object or a
    ``TraceBuilder``.
    """

    def __init__(self, source: Any, *, path: str | os.PathLike | None = None, name: str | None = None,
                 window: tuple[int, int] | None = None, _shared: dict | None = None):
        self._source = source
        self.path: Path | None = Path(path) if path is not None else None
        self._name = name
        self._window = (int(window[0]), int(window[1])) if window is not None else None
        # loaded whole tables and whole-trace memo, shared by every window of this trace
        self._shared = _shared if _shared is not None else {"tables": {}, "complete": set(), "memo": {}}
        self._tables: dict[tuple, pd.DataFrame] = {}
        self._memo: dict[Hashable, Any] = {}
        self._memo_locks: dict[Hashable, Any] = {}
        if self._window is None:
            self._shared.setdefault("whole", self)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_builder(cls, builder: Any, name: str = "builder") -> Trace:
        """Wrap an in-memory ``TraceBuilder`` (tables as written so far)."""
        return cls(builder, name=name)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> Trace:
        """Open a ``.nprof`` file lazily (raises ``TraceFormatError`` on a bad file)."""
        return cls(read_trace(path), path=path)

    # ------------------------------------------------------------------ identity
    @property
    def header(self):
        """The ``schemas.pb.Header`` of the trace."""
        return self._source.header

    @property
    def name(self) -> str:
        """Display name: the file stem, else ``header.metadata['name']``, else 'trace'."""
        if self._name:
            return self._name
        if self.path is not None:
            n = self.path.name
            for suf in (".nprof", ".gz", ".json"):
                n = n[: -len(suf)] if n.endswith(suf) else n
            return n
        return self.header.metadata.get("name", "trace") if self.header is not None else "trace"

    @property
    def rank(self) -> int:
        return int(self.header.rank)

    @property
    def simulated(self) -> bool:
        return bool(self.header.simulated)

    def loss_report(self) -> str | None:
        """What the trace file is missing (truncated, unreadable chunks, an inconsistent index), None when it is
        complete: the reader's ``TraceFile.loss_report()`` (None for an in-memory builder)."""
        report = getattr(self._source, "loss_report", None)
        return report() if callable(report) else None

    @property
    def is_kineto_import(self) -> bool:
        """True for traces imported from torch.profiler (Kineto) JSON (``header.source_format``)."""
        return self.header is not None and self.header.source_format == "kineto-json"

    @property
    def run(self) -> str:
        """Label of the run this trace belongs to (:func:`analysis.core.runs.run_label`): its run id, its Kineto
        group trace id or distributed job, else the trace itself."""
        return run_label(run_key(self))

    @property
    def window_bounds(self) -> tuple[int, int] | None:
        """(start_ns, end_ns) of the restriction, or None for the whole trace."""
        return self._window

    @property
    def devices(self) -> pd.DataFrame:
        """One row per ``header.devices`` entry, in header order (``position`` = the row's position, the key
        ``tracks.device`` refers to). Columns: position, index (the vendor's device id, e.g. Kineto's), kind,
        name, simulated, num_cores, ``peak_flops_per_s_<dtype>`` (per core, dense matrix FLOP/s, one column
        per listed dtype), ``vector_flops_per_s_<engine>``, hbm_bandwidth_bytes_per_s (device),
        hbm_bandwidth_per_core_bytes_per_s, dma_bandwidth_per_core_bytes_per_s, hbm_capacity_bytes,
        interconnect_bandwidth_bytes_per_s, tensor_engine_num_rows, tensor_engine_num_cols, source. Unknown
        numbers are NaN."""
        return self.memo("devices", self._devices_frame, shared=True)

    def _devices_frame(self) -> pd.DataFrame:
        def nz(v: float) -> float:
            return float(v) if v else np.nan  # 0 = unknown in the format

        rows = []
        for pos, d in enumerate(self.header.devices):
            s = d.spec
            r = {"position": pos, "index": int(d.index), "kind": d.kind, "name": d.name,
                 "simulated": bool(d.simulated), "num_cores": int(s.num_cores) or 1,
                 "hbm_bandwidth_bytes_per_s": nz(s.hbm_bandwidth_bytes_per_s),
                 "hbm_bandwidth_per_core_bytes_per_s": nz(s.hbm_bandwidth_per_core_bytes_per_s),
                 "dma_bandwidth_per_core_bytes_per_s": nz(s.dma_bandwidth_per_core_bytes_per_s),
                 "hbm_capacity_bytes": nz(s.hbm_capacity_bytes),
                 "interconnect_bandwidth_bytes_per_s": nz(s.interconnect_bandwidth_bytes_per_s),
                 "tensor_engine_num_rows": int(s.tensor_engine_num_rows),
                 "tensor_engine_num_cols": int(s.tensor_engine_num_cols), "source": s.source}
            for k, v in s.peak_flops_per_s.items():
                r[f"peak_flops_per_s_{k}"] = nz(v)
            for k, v in s.vector_flops_per_s.items():
                r[f"vector_flops_per_s_{k}"] = nz(v)
            rows.append(r)
        cols = ["position", "index", "kind", "name", "simulated", "num_cores", "hbm_bandwidth_bytes_per_s",
                "hbm_bandwidth_per_core_bytes_per_s", "dma_bandwidth_per_core_bytes_per_s", "hbm_capacity_bytes",
                "interconnect_bandwidth_bytes_per_s", "tensor_engine_num_rows", "tensor_engine_num_cols", "source"]
        return pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols)

    def device_spec(self, position: int | None = None):
        """The ``pb.HardwareSpec`` of the device at ``position`` in ``header.devices`` (the key ``tracks.device``
        holds; not the vendor id ``Device.index``); None / -1: the first device. None when absent."""
        devs = list(self.header.devices)
        if not devs:
            return None
        pos = 0 if position is None or position < 0 else int(position)
        return devs[pos].spec if pos < len(devs) else None

    # ------------------------------------------------------------------ memo
    def memo(self, key: Hashable, compute: Callable[[], Any], *, shared: bool = False) -> Any:
        """``compute()`` once per key, handed out as a copy the caller owns (:func:`analysis.core.memo.handout`).
        Concurrent callers of one key wait for the first one's result instead of computing it again.

        ``shared=True`` keeps the value with the whole trace, for results that do not depend on the window
        (device peaks, per-host-op work); otherwise each window has its own."""
        store = self._shared["memo"] if shared else self._memo
        if key not in store:  # once per key also when threads ask at the same time (the explorer's workers)
            locks = self._shared.setdefault("memo_locks", {}) if shared else self._memo_locks
            with _LOCKS_GUARD:
                lock = locks.setdefault(key, threading.RLock())
            with lock:
                if key not in store:
                    store[key] = compute()
        return handout(store[key])

    def has_memo(self, key: Hashable, *, shared: bool = False) -> bool:
        """Whether :meth:`memo` already holds ``key`` (of this trace or window; ``shared``: of the whole trace), so
        a caller can derive a value from a frame that is already computed rather than from the tables."""
        return key in (self._shared["memo"] if shared else self._memo)

    def clear_memo(self, *, shared: bool = True) -> None:
        """Forget derived results (tables stay loaded): of this trace (window), and of the whole trace when
        ``shared`` (the default)."""
        self._memo.clear()
        if shared:
            self._shared["memo"].clear()
            whole = self._shared.get("whole")
            if whole is not None and whole is not self:
                whole._memo.clear()

    def release(self) -> None:
        """Forget every loaded table and derived result of this trace, of its whole trace and shared by its
        windows (they load again on demand): frees a rank's memory at once after it has been reduced (a Trace
        and its windows reference each other, so without this only the cyclic garbage collector frees them)."""
        whole = self._shared.pop("whole", None)
        for t in {id(x): x for x in (self, whole) if x is not None}.values():
            t._tables.clear()
            t._memo.clear()
        for k in ("tables", "memo"):
            self._shared[k].clear()
        self._shared["complete"].clear()

    # ------------------------------------------------------------------ tables
    def _load_table(self, name: str, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
        """The unrestricted table (shared by all windows) with at least ``columns`` (None: all). Columns load
        on demand: a table first read for the analyses gets its other columns added when a caller wants them.
        Threads asking for one table at the same time (the explorer's workers) read it once."""
        cache, complete = self._shared["tables"], self._shared["complete"]
        have = cache.get(name)
        if have is not None and (name in complete or (columns is not None and set(columns) <= set(have.columns))):
            return have
        with _LOCKS_GUARD:
            lock = self._shared.setdefault("table_locks", {}).setdefault(name, threading.RLock())
        with lock:
            return self._load_table_locked(name, columns)

    def _load_table_locked(self, name: str, columns: tuple[str, ...] | None) -> pd.DataFrame:
        cache, complete = self._shared["tables"], self._shared["complete"]
        have = cache.get(name)
        if have is not None and (name in complete or (columns is not None and set(columns) <= set(have.columns))):
            return have  # another thread loaded it while this one waited
        if not _accepts_columns(self._source):
            df = self._source.table(name)
        else:
            order = columns_of_table(name)
            want = order if columns is None else list(columns)
            missing = [c for c in want if have is None or c not in have.columns]
            df = self._source.table(name, columns=missing)
            if have is not None:
                df = pd.concat([have, df], axis=1)
            df = df[[c for c in order if c in df.columns]]
        if columns is None or set(df.columns) >= set(columns_of_table(name)):
            complete.add(name)
        cache[name] = df
        return df

    def whole_table(self, name: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """The unrestricted table (all rows, whatever the window), with at least ``columns`` (None: all)."""
        if name not in TABLE_NAMES:
            raise ValueError(f"unknown table {name!r}; valid: {', '.join(TABLE_NAMES)}")
        cols = tuple(columns) if columns is not None else None
        df = self._load_table(name, cols)
        return handout(df if cols is None else df[list(cols)])

    def table(self, name: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """A table as a DataFrame (restricted to the window, if any). ``name`` in ``TABLE_NAMES``; ``columns``
        (default all) limits what is loaded and returned."""
        if name not in TABLE_NAMES:
            raise ValueError(f"unknown table {name!r}; valid: {', '.join(TABLE_NAMES)}")
        cols = tuple(columns) if columns is not None else None
        key = (name, cols)
        if key not in self._tables:
            if cols is not None and (name, None) in self._tables:  # the whole table is already here
                df = self._tables[(name, None)][list(cols)]
            else:
                need = None if cols is None else tuple(dict.fromkeys(cols + WINDOW_COLUMNS.get(name, ())))
                df = self._load_table(name, need)
                if self._window is not None:
                    df = self._restrict(name, df)
                if cols is not None:
                    df = df[list(cols)]
            self._tables[key] = df
        return handout(self._tables[key])

    def analysis_table(self, name: str) -> pd.DataFrame:
        """``table(name)`` with only the columns the analyses read (:data:`ANALYSIS_COLUMNS`): same rows and
        index, cheaper to load on big traces."""
        cols = ANALYSIS_COLUMNS.get(name)
        return self.table(name, cols) if cols is not None else self.table(name)

    def _restrict(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
        assert self._window is not None
        lo, hi = self._window
        if name == "tracks":
            return df
        if name == "counters":
            ts = df["ts"].to_numpy()
            return df[(ts >= lo) & (ts < hi)]
        if name == "flows":
            # keep a link when either end is in the window (a launch may start before it)
            keep = np.zeros(len(df), dtype=bool)
            for side in ("src", "dst"):
                tab = df[f"{side}_table"].astype("category")
                codes, rows = tab.cat.codes.to_numpy(), df[f"{side}_row"].to_numpy()
                for code, t in enumerate(tab.cat.categories.astype(str)):  # a few table names
                    if t in TABLE_NAMES and t not in ("flows", "tracks", "counters"):
                        m = codes == code
                        keep[m] |= _member(rows[m], self.table(t, WINDOW_COLUMNS.get(t)).index.to_numpy())
            return df[keep]
        start = df["start_ts"].to_numpy()
        end = start + df["duration_ns"].to_numpy()
        # Overlap, and zero-length events that sit inside the window.
        m = (start < hi) & ((end > lo) | ((end == start) & (start >= lo)))
        return df[m]

    host_ops = property(lambda self: self.table("host_ops"), doc="Framework (host) events.")
    instructions = property(lambda self: self.table("instructions"),
                            doc="Device work (Neuron instructions, GPU kernels).")
    dma = property(lambda self: self.table("dma"), doc="DMA transfers.")
    collectives = property(lambda self: self.table("collectives"), doc="Collective operations (the table).")
    counters = property(lambda self: self.table("counters"), doc="Counter samples.")
    flows = property(lambda self: self.table("flows"), doc="Directed links between events.")
    tracks = property(lambda self: self.table("tracks"), doc="Timeline rows.")

    @property
    def time_range(self) -> tuple[int, int]:
        """(start_ns, end_ns): the window if restricted, else the span of all timed rows."""
        if self._window is not None:
            return self._window
        return self.memo("time_range", self._time_range)

    def _time_range(self) -> tuple[int, int]:
        tr = getattr(self._source, "time_range", None)
        if tr is not None and tr[1] > tr[0]:
            return int(tr[0]), int(tr[1])
        lo, hi = [], []
        for t in ("host_ops", "instructions", "dma", "collectives"):
            df = self.table(t, WINDOW_COLUMNS[t])
            if len(df):
                s = df["start_ts"].to_numpy()
                lo.append(s.min())
                hi.append((s + df["duration_ns"].to_numpy()).max())
        c = self.table("counters", WINDOW_COLUMNS["counters"])
        if len(c):
            lo.append(c["ts"].min())
            hi.append(c["ts"].max())
        return (int(min(lo)), int(max(hi))) if lo else (0, 0)

    # ------------------------------------------------------------------ windows
    def window(self, start_ns: int, end_ns: int) -> Trace:
        """A Trace restricted to rows overlapping [start_ns, end_ns)."""
        if end_ns <= start_ns:
            raise ValueError(f"window end ({end_ns}) must be after its start ({start_ns})")
        if self._window is not None:
            start_ns, end_ns = max(start_ns, self._window[0]), min(end_ns, self._window[1])
            end_ns = max(end_ns, start_ns + 1)
        return Trace(self._source, path=self.path, name=self._name, window=(start_ns, end_ns),
                     _shared=self._shared)

    def whole(self) -> Trace:
        """The unrestricted trace this one is a window of (itself when not windowed); shares loaded tables
        and whole-trace derived frames."""
        if self._window is None:
            return self
        if "whole" not in self._shared:
            self._shared["whole"] = Trace(self._source, path=self.path, name=self._name, _shared=self._shared)
        return self._shared["whole"]

    def select_steps(self, first: int, last: int | None = None) -> Trace:
        """A Trace restricted to steps ``first``..``last`` (inclusive step numbers; :func:`analysis.step_window`)."""
        return self.window(*self.step_window(first, last))

    def __repr__(self) -> str:
        w = f", window={self._window}" if self._window else ""
        return f"Trace({self.name!r}, rank={self.rank}{w})"


def _member(ids: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """``np.isin(ids, kept)`` for row ids (negative = none: never a member), by a lookup table, not hashing."""
    kept = kept[kept >= 0]
    if not len(ids) or not len(kept):
        return np.zeros(len(ids), dtype=bool)
    top = int(max(ids.max(), kept.max()))
    if top >= 1 << 28:  # ids too sparse for a table (at most 256 MB of flags)
        return np.isin(ids, kept)
    lut = np.zeros(top + 2, dtype=bool)  # lut[-1] (the extra slot) stays False for negative ids
    lut[kept] = True
    return lut[np.where(ids >= 0, ids, top + 1)]


def _accepts_columns(source: Any) -> bool:
    """True when ``source.table`` can load a subset of columns (the trace reader; not a TraceBuilder)."""
    try:
        return "columns" in inspect.signature(source.table).parameters
    except (TypeError, ValueError):
        return False


class TraceSet(TraceSetAnalyses):
    """Traces loaded together (e.g. a capture output directory). A folder may hold several runs: traces
    belong to one run only when they share a run id, a Kineto group trace id or a distributed job (same
    ``distributedInfo`` apart from the rank, overlapping in time); every other trace stands alone
    (:mod:`analysis.core.runs`). :meth:`groups` splits the set into its runs."""

    def __init__(self, traces: Iterable[Trace], path: str | os.PathLike | None = None):
        self.traces: list[Trace] = sorted(traces, key=lambda t: (t.rank, int(t.header.window_index), t.name))
        self.path = Path(path) if path is not None else None

    @property
    def ranks(self) -> list[int]:
        """Sorted distinct ranks."""
        return sorted({t.rank for t in self.traces})

    def _labelled_groups(self) -> list[tuple[str, list[Trace]]]:
        out: list[tuple[str, list[Trace]]] = []
        seen: dict[str, int] = {}
        for g in group_runs(self.traces):
            label = run_label(run_key(g[0]))
            seen[label] = seen.get(label, 0) + 1
            out.append((label if seen[label] == 1 else f"{label} #{seen[label]}", g))
        return out

    @property
    def runs(self) -> list[str]:
        """Labels of the runs in this set (see :meth:`groups`), in order of their first trace."""
        return [label for label, _ in self._labelled_groups()]

    def groups(self) -> list[TraceSet]:
        """One TraceSet per run, in order of their first trace (traces that stand alone are sets of one)."""
        return [TraceSet(g, path=self.path) for _, g in self._labelled_groups()]

    def by_rank(self, rank: int) -> list[Trace]:
        """The traces (windows) of one rank."""
        return [t for t in self.traces if t.rank == rank]

    def by_run(self, run: str) -> TraceSet:
        """The traces of one run: a label of :attr:`runs`, or a ``header.run_id``."""
        for label, g in self._labelled_groups():
            if label == run or (run and g[0].header.run_id == run):
                return TraceSet(g, path=self.path)
        return TraceSet([], path=self.path)

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self) -> Iterator[Trace]:
        return iter(self.traces)

    def __getitem__(self, i: int) -> Trace:
        return self.traces[i]

    def __repr__(self) -> str:
        return f"TraceSet({len(self.traces)} traces, ranks={self.ranks}, runs={len(self.runs)})"


def _load_kineto(p: Path, cache: bool = True) -> Trace:
    """One trace file or Explorer profile, opened through the importers' one entry point
    (``neuron_profiler.importers.open_source``: detection by content, the import cache). The name is kept
    for older callers; any source kind works."""
    from neuron_profiler.importers import open_source

    opened = open_source(p, cache=cache)
    return Trace(opened.source, path=p)


def load(path_or_dir: str | os.PathLike, *, cache: bool = True) -> Trace | TraceSet:
    """Open a trace. What a path holds is detected by content (``neuron_profiler.importers.detect_source``):

    - ``.nprof`` file -> :class:`Trace`;
    - Kineto / torch.profiler JSON (``.json`` / ``.json.gz``), a Neuron Explorer JSON export, or a Neuron
      Explorer Parquet profile directory -> :class:`Trace`, converted once and cached in the user's cache
      directory (``neuron_profiler.importers.cache``: ``$NEURON_PROFILER_CACHE_DIR``, else the platform's
      user cache folder), never next to the source;
    - any other directory -> :class:`TraceSet` of every ``.nprof`` inside (recursively), or of its importable
      sources when there is no ``.nprof``.
    ``cache=False`` converts in memory and writes nothing. Raises ``FileNotFoundError`` for a missing path,
    ``ValueError`` (``NotATraceError``) for a file that is not a trace.
    """
    from neuron_profiler.importers import DIRECTORY, detect_source, list_sources

    p = Path(path_or_dir)
    kind = detect_source(p)
    if kind != DIRECTORY:
        return _load_kineto(p, cache)
    traces = [_load_kineto(f, cache) for f in list_sources(p)]
    if not traces:
        raise ValueError(f"no .nprof, Kineto .json(.gz) or Neuron Explorer traces under {p}")
    return TraceSet(traces, path=p)
