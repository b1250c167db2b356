"""``Trace`` / ``TraceSet``: the tables of one trace file as lazily loaded DataFrames, plus ``load()``.

Tables follow the reader conventions (index = row id, strings Categorical, timestamps int64 ns, REF columns
int64 with -1 = none). A ``Trace`` restricted by ``window()`` / ``select_steps()`` keeps the rows that overlap
the window (same row ids) and shares the parent's loaded tables.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

TABLE_NAMES = ("tracks", "host_ops", "instructions", "dma", "collectives", "counters", "flows")
#: The columns the analyses read, per table (tables not listed: all columns). ``Trace.analysis_table`` loads
#: only these (the reader decodes only the requested columns); ``Trace.table`` / the properties load all.
ANALYSIS_COLUMNS = {"instructions": ("track", "start_ts", "duration_ns", "engine", "opcode", "name", "framework_op",
                                     "correlation_id", "raw_flops", "hbm_read_bytes", "hbm_write_bytes", "dtype",
                                     "tensor_instruction_type")}


class Trace:
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
        self._shared = _shared if _shared is not None else {"tables": {}}  # full tables, shared by windows
        self._tables: dict[str, pd.DataFrame] = {}
        self._cache: dict[str, Any] = {}  # derived frames (analysis modules store results here)
        if self._window is None:
            self._shared.setdefault("whole", self)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_builder(cls, builder: Any, name: str = "builder") -> "Trace":
        """Wrap an in-memory ``TraceBuilder`` (tables as written so far)."""
        return cls(builder, name=name)

    @classmethod
    def from_file(cls, path: str | os.PathLike) -> "Trace":
        """Open a ``.nprof`` file lazily (raises ``TraceFormatError`` on a bad file)."""
        from neuron_profiler.trace import read_trace

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
    def window_bounds(self) -> tuple[int, int] | None:
        """(start_ns, end_ns) of the restriction, or None for the whole trace."""
        return self._window

    @property
    def devices(self) -> pd.DataFrame:
        """One row per ``header.devices`` entry. Columns: index, kind, name, simulated, num_cores,
        ``peak_flops_per_s_<dtype>`` (per core, dense matrix FLOP/s, one column per listed dtype),
        ``vector_flops_per_s_<engine>``, hbm_bandwidth_bytes_per_s (device), hbm_bandwidth_per_core_bytes_per_s,
        dma_bandwidth_per_core_bytes_per_s, hbm_capacity_bytes, interconnect_bandwidth_bytes_per_s,
        tensor_engine_num_rows, tensor_engine_num_cols, source. Unknown numbers are NaN."""
        if "devices" in self._cache:
            return self._cache["devices"]
        rows = []
        for d in self.header.devices:
            s = d.spec
            nz = lambda v: float(v) if v else np.nan  # noqa: E731  (0 = unknown in the format)
            r = {"index": int(d.index), "kind": d.kind, "name": d.name, "simulated": bool(d.simulated),
                 "num_cores": int(s.num_cores) or 1,
                 "hbm_bandwidth_bytes_per_s": nz(s.hbm_bandwidth_bytes_per_s),
                 "hbm_bandwidth_per_core_bytes_per_s": nz(s.hbm_bandwidth_per_core_bytes_per_s),
                 "dma_bandwidth_per_core_bytes_per_s": nz(s.dma_bandwidth_per_core_bytes_per_s),
                 "hbm_capacity_bytes": nz(s.hbm_capacity_bytes),
                 "interconnect_bandwidth_bytes_per_s": nz(s.interconnect_bandwidth_bytes_per_s),
                 "tensor_engine_num_rows": int(s.tensor_engine_num_rows),
                 "tensor_engine_num_cols": int(s.tensor_engine_num_cols),
                 "source": s.source}
            for k, v in s.peak_flops_per_s.items():
                r[f"peak_flops_per_s_{k}"] = nz(v)
            for k, v in s.vector_flops_per_s.items():
                r[f"vector_flops_per_s_{k}"] = nz(v)
            rows.append(r)
        cols = ["index", "kind", "name", "simulated", "num_cores", "hbm_bandwidth_bytes_per_s",
                "hbm_bandwidth_per_core_bytes_per_s", "dma_bandwidth_per_core_bytes_per_s",
                "hbm_capacity_bytes", "interconnect_bandwidth_bytes_per_s", "tensor_engine_num_rows",
                "tensor_engine_num_cols", "source"]
        df = pd.DataFrame(rows) if rows else pd.DataFrame(columns=cols)
        self._cache["devices"] = df
        return df

    def device_spec(self, index: int | None = None):
        """The ``pb.HardwareSpec`` of device ``index`` (default: the first device), or None."""
        devs = list(self.header.devices)
        if not devs:
            return None
        if index is None:
            return devs[0].spec
        for d in devs:
            if int(d.index) == int(index):
                return d.spec
        return None

    # ------------------------------------------------------------------ tables
    def _full_table(self, name: str, columns: tuple[str, ...] | None = None) -> pd.DataFrame:
        """The unrestricted table (shared by all windows) with at least ``columns`` (None: all). Columns load
        on demand: a table first read for the analyses gets its other columns added when a caller wants them."""
        cache, complete = self._shared["tables"], self._shared.setdefault("complete", set())
        have = cache.get(name)
        if have is not None and (name in complete or (columns is not None and set(columns) <= set(have.columns))):
            return have
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

    def table(self, name: str, columns: Iterable[str] | None = None) -> pd.DataFrame:
        """A table as a DataFrame (restricted to the window, if any). ``name`` in ``TABLE_NAMES``; ``columns``
        (default all) limits what is loaded and returned."""
        if name not in TABLE_NAMES:
            raise ValueError(f"unknown table {name!r}; valid: {', '.join(TABLE_NAMES)}")
        cols = tuple(columns) if columns is not None else None
        key = (name, cols)
        if key in self._tables:
            return self._tables[key]
        if cols is not None and (name, None) in self._tables:  # the whole table is already here
            df = self._tables[(name, None)][list(cols)]
        else:
            need = None if cols is None else tuple(dict.fromkeys(cols + _WINDOW_COLUMNS.get(name, ())))
            df = self._full_table(name, need)
            if self._window is not None:
                df = self._restrict(name, df)
            if cols is not None:
                df = df[list(cols)]
        self._tables[key] = df
        return df

    def analysis_table(self, name: str) -> pd.DataFrame:
        """``table(name)`` with only the columns the analyses read (:data:`ANALYSIS_COLUMNS`): same rows and
        index, cheaper to load on big traces."""
        cols = ANALYSIS_COLUMNS.get(name)
        return self.table(name, cols) if cols is not None else self.table(name)

    def _restrict(self, name: str, df: pd.DataFrame) -> pd.DataFrame:
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
                tab = df[f"{side}_table"].astype(str).to_numpy()
                rows = df[f"{side}_row"].to_numpy()
                for t in np.unique(tab):
                    if t in TABLE_NAMES and t not in ("flows", "tracks", "counters"):
                        m = tab == t
                        keep[m] |= np.isin(rows[m], self.table(t, _WINDOW_COLUMNS.get(t)).index.to_numpy())
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
        if "time_range" not in self._cache:
            tr = getattr(self._source, "time_range", None)
            if tr is not None and tr[1] > tr[0]:
                self._cache["time_range"] = (int(tr[0]), int(tr[1]))
            else:
                lo, hi = [], []
                for t in ("host_ops", "instructions", "dma", "collectives"):
                    df = self.table(t, _WINDOW_COLUMNS[t])
                    if len(df):
                        s = df["start_ts"].to_numpy()
                        lo.append(s.min())
                        hi.append((s + df["duration_ns"].to_numpy()).max())
                c = self.table("counters", _WINDOW_COLUMNS["counters"])
                if len(c):
                    lo.append(c["ts"].min())
                    hi.append(c["ts"].max())
                self._cache["time_range"] = (int(min(lo)), int(max(hi))) if lo else (0, 0)
        return self._cache["time_range"]

    # ------------------------------------------------------------------ steps and windows
    def steps(self) -> pd.DataFrame:
        """Profiler steps; see :func:`analysis.steps.steps`."""
        from .steps import steps

        return steps(self)

    def window(self, start_ns: int, end_ns: int) -> "Trace":
        """A Trace restricted to rows overlapping [start_ns, end_ns)."""
        if end_ns <= start_ns:
            raise ValueError(f"window end ({end_ns}) must be after its start ({start_ns})")
        if self._window is not None:
            start_ns, end_ns = max(start_ns, self._window[0]), min(end_ns, self._window[1])
            end_ns = max(end_ns, start_ns + 1)
        return Trace(self._source, path=self.path, name=self._name, window=(start_ns, end_ns),
                     _shared=self._shared)

    def whole(self) -> "Trace":
        """The unrestricted trace this one is a window of (itself when not windowed); shares loaded tables
        and whole-trace derived frames."""
        if self._window is None:
            return self
        if "whole" not in self._shared:
            self._shared["whole"] = Trace(self._source, path=self.path, name=self._name, _shared=self._shared)
        return self._shared["whole"]

    def select_steps(self, first: int, last: int | None = None) -> "Trace":
        """A Trace restricted to steps ``first``..``last`` (inclusive step numbers)."""
        from .steps import step_window

        return self.window(*step_window(self, first, last))

    # ------------------------------------------------------------------ analyses (delegate to pure functions)
    def summary(self) -> pd.DataFrame:
        from .summary import summary
        return summary(self)

    def summary_dict(self) -> dict:
        from .summary import summary_dict
        return summary_dict(self)

    def hot_ops(self, by: str = "op", top: int | None = None) -> pd.DataFrame:
        from .hot_ops import hot_ops
        return hot_ops(self, by=by, top=top)

    def roofline(self, by: str = "op") -> pd.DataFrame:
        from .roofline import roofline
        return roofline(self, by=by)

    def roofline_ceilings(self) -> pd.DataFrame:
        from .roofline import roofline_ceilings
        return roofline_ceilings(self)

    def collective_stats(self) -> pd.DataFrame:
        """Per-collective algbw / busbw (:func:`analysis.collectives.collectives`)."""
        from .collectives import collectives
        return collectives(self)

    def dma_throughput(self, bins: int = 200) -> pd.DataFrame:
        from .dma import dma_throughput
        return dma_throughput(self, bins=bins)

    def dma_queues(self) -> pd.DataFrame:
        from .dma import dma_queues
        return dma_queues(self)

    def dma_sizes(self) -> pd.DataFrame:
        from .dma import dma_sizes
        return dma_sizes(self)

    def diff(self, other: "Trace") -> pd.DataFrame:
        from .diff import diff
        return diff(self, other)

    def recommendations(self) -> pd.DataFrame:
        from .recommend import recommendations
        return recommendations(self)

    @property
    def is_kineto_import(self) -> bool:
        """True for traces imported from torch.profiler (Kineto) JSON (``header.source_format``)."""
        return self.header is not None and self.header.source_format == "kineto-json"

    def device_activity(self, hta_rounding: bool = False) -> pd.DataFrame:
        """:func:`analysis.breakdown.device_activity` of this trace, sorted by start and computed once per
        Trace (window) and rounding mode; summary, the breakdowns and recommendations share it.

        Includes DMA transfers (MEMORY) and, for Neuron traces, collectives (COMMUNICATION). Kineto-imported
        traces leave the collectives table out: its rows are host-side ``record_param_comms`` (e.g. gloo)
        calls, and the device side of NCCL collectives is already in the instructions as kernels."""
        key = ("activity", bool(hta_rounding))
        if key not in self._cache:
            from .breakdown import device_activity

            cc = None if self.is_kineto_import else self.collectives
            self._cache[key] = device_activity(self.analysis_table("instructions"), dma=self.dma, collectives=cc,
                                               hta_rounding=hta_rounding, sort=True)
        return self._cache[key]

    def _breakdown_kw(self, kw: dict) -> dict:
        # Explicit dma= / collectives= tables: compute from those; otherwise use the shared activity frame.
        if "activity" not in kw and not ({"dma", "collectives"} & set(kw)):
            kw["activity"] = self.device_activity(hta_rounding=kw.pop("hta_rounding", False))
        return kw

    def kernel_breakdown(self, **kw):
        """:func:`analysis.breakdown.kernel_breakdown` of this trace's device activity (instructions, DMA and,
        for Neuron traces, collectives: see :meth:`device_activity`)."""
        from .breakdown import kernel_breakdown
        return kernel_breakdown(self.analysis_table("instructions"), **self._breakdown_kw(kw))

    def temporal_breakdown(self, **kw):
        """:func:`analysis.breakdown.temporal_breakdown` of :meth:`device_activity`."""
        from .breakdown import temporal_breakdown
        kw.setdefault("rank", self.rank)
        return temporal_breakdown(self.analysis_table("instructions"), **self._breakdown_kw(kw))

    def idle_time_breakdown(self, **kw):
        """:func:`analysis.breakdown.idle_time_breakdown` (streams named by the tracks table)."""
        from .breakdown import idle_time_breakdown
        kw.setdefault("rank", self.rank)
        kw.setdefault("tracks", self.tracks)
        return idle_time_breakdown(self.analysis_table("instructions"), self.host_ops, self.flows, **kw)

    def comm_comp_overlap(self, **kw):
        """:func:`analysis.breakdown.comm_comp_overlap` of :meth:`device_activity`."""
        from .breakdown import comm_comp_overlap
        kw.setdefault("rank", self.rank)
        return comm_comp_overlap(self.analysis_table("instructions"), **self._breakdown_kw(kw))

    def __repr__(self) -> str:
        w = f", window={self._window}" if self._window else ""
        return f"Trace({self.name!r}, rank={self.rank}{w})"


_WINDOW_COLUMNS = {t: ("start_ts", "duration_ns") for t in ("host_ops", "instructions", "dma", "collectives")}
_WINDOW_COLUMNS.update(counters=("ts",), flows=("src_table", "src_row", "dst_table", "dst_row"))


def columns_of_table(name: str) -> list[str]:
    """Every column of table ``name`` in the trace format."""
    from neuron_profiler.trace.columns import columns_of

    return list(columns_of(name))


def _accepts_columns(source: Any) -> bool:
    """True when ``source.table`` can load a subset of columns (the trace reader; not a TraceBuilder)."""
    import inspect

    try:
        return "columns" in inspect.signature(source.table).parameters
    except (TypeError, ValueError):
        return False


class TraceSet:
    """The traces of one run (all ranks and windows), e.g. a capture output directory."""

    def __init__(self, traces: Iterable[Trace], path: str | os.PathLike | None = None):
        self.traces: list[Trace] = sorted(traces, key=lambda t: (t.rank, int(t.header.window_index), t.name))
        self.path = Path(path) if path is not None else None

    @property
    def ranks(self) -> list[int]:
        """Sorted distinct ranks."""
        return sorted({t.rank for t in self.traces})

    @property
    def runs(self) -> list[str]:
        """Distinct ``header.run_id`` values (a capture folder may hold several runs)."""
        return sorted({t.header.run_id for t in self.traces})

    def by_rank(self, rank: int) -> list[Trace]:
        """The traces (windows) of one rank."""
        return [t for t in self.traces if t.rank == rank]

    def by_run(self, run_id: str) -> "TraceSet":
        """The traces of one run."""
        return TraceSet([t for t in self.traces if t.header.run_id == run_id], path=self.path)

    def collectives(self) -> pd.DataFrame:
        """Collectives matched across ranks (:func:`analysis.collectives.collectives_across_ranks`)."""
        from .collectives import collectives_across_ranks
        return collectives_across_ranks(self)

    def __len__(self) -> int:
        return len(self.traces)

    def __iter__(self):
        return iter(self.traces)

    def __getitem__(self, i: int) -> Trace:
        return self.traces[i]

    def __repr__(self) -> str:
        return f"TraceSet({len(self.traces)} traces, ranks={self.ranks})"


_KINETO_SUFFIXES = (".json", ".json.gz")


def _is_kineto(p: Path) -> bool:
    return p.name.endswith(_KINETO_SUFFIXES)


def _load_kineto(p: Path, cache: bool = True) -> Trace:
    from neuron_profiler.importers import kineto

    stem = p.name[: -len(".json.gz")] if p.name.endswith(".json.gz") else p.name[: -len(".json")]
    cached = p.with_name(stem + ".nprof")
    if not cache:
        return Trace(kineto.load_kineto_builder(p), path=p)
    if cached.exists() and cached.stat().st_mtime >= p.stat().st_mtime:
        try:
            return Trace.from_file(cached)
        except Exception:  # stale or partial cache: re-import
            pass
    if kineto.dir_writable(p.parent):  # never write caches into read-only (e.g. shared) folders, even as root
        try:
            kineto.import_kineto(p, cached)
            return Trace.from_file(cached)
        except OSError:
            pass
    return Trace(kineto.load_kineto_builder(p), path=p)


def load(path_or_dir: str | os.PathLike, *, cache: bool = True) -> Trace | TraceSet:
    """Open a trace.

    - ``.nprof`` file -> :class:`Trace`;
    - Kineto JSON (``.json`` / ``.json.gz``) -> :class:`Trace`, converted with
      ``neuron_profiler.importers.kineto`` and cached next to the source as ``<stem>.nprof`` when the
      folder is writable (else kept in memory);
    - directory -> :class:`TraceSet` of every ``.nprof`` inside (recursively), or of the Kineto JSON files
      when there is no ``.nprof``.
    ``cache=False`` never writes the ``.nprof`` next to a Kineto file (e.g. for shared, read-only corpora).
    Raises ``FileNotFoundError`` for a missing path, ``ValueError`` for an unknown file type.
    """
    p = Path(path_or_dir)
    if not p.exists():
        raise FileNotFoundError(f"no such trace file or directory: {p}")
    if p.is_dir():
        files = sorted(p.rglob("*.nprof"))
        traces = [Trace.from_file(f) for f in files]
        if not traces:
            traces = [_load_kineto(f, cache) for f in sorted(p.rglob("*")) if f.is_file() and _is_kineto(f)]
        if not traces:
            raise ValueError(f"no .nprof or Kineto .json(.gz) traces under {p}")
        return TraceSet(traces, path=p)
    if p.suffix == ".nprof":
        return Trace.from_file(p)
    if _is_kineto(p):
        return _load_kineto(p, cache)
    raise ValueError(f"unknown trace file type {p.name!r}; expected .nprof, .json or .json.gz")
