"""Timeline rows of one trace: which track each event is drawn on, in which order, with which colour key.

Rows follow Neuron Explorer's device timeline: per rank and device core the engine rows (``Tensor``,
``TensorMatrix``, ``Vector``, ``Scalar``, ``GpSimd``, ``Sync``), DMA queues, CC cores, then GPU streams,
host threads (one row per nesting depth) and counter rows, plus the derived rows of :mod:`explorer.derived`
(per core the hierarchy before the engines and the DMA engines after the queues; the cumulative counters of the
device). Only layout and lookup live here; every metric comes from :mod:`analysis`.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import derived
from .timeline import Row

EVENT_TABLES = ("instructions", "dma", "collectives", "host_ops")
TABLE_CODE = {t: i for i, t in enumerate(EVENT_TABLES)}
ENGINE_ORDER = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
KIND_ORDER = {"engine": 0, "stream": 1, "dma_queue": 2, "cc_core": 3, "thread": 5, "counter": 6}
COLOR_MODES = ("op", "engine", "module")
MAX_HOST_DEPTH = 16
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd",
           "#e6550d", "#31a354", "#756bb1", "#636363")


def color_of(label: str) -> str:
    """A stable palette colour for a category label."""
    return PALETTE[zlib.crc32(str(label).encode()) % len(PALETTE)]


@dataclass
class RowInfo:
    """One drawn row. ``table`` is the event table ('counters' for counter rows)."""

    label: str
    group: str
    kind: str
    table: str
    track: int
    depth: int = 0
    unit: str = ""
    path: tuple[str, ...] = ()   # the track tree above this row (group = " / ".join(path))
    measured: bool = False       # host ops drawn at the capturing machine's measured times (projected traces)
    alias: bool = False          # repeats events of other rows (hierarchy, DMA engines): locate() skips it
    folds: str = ""              # the track group this row's label folds / unfolds (hierarchy levels)
    derived: bool = False        # counter computed by an analysis on first use (explorer.derived.Cumulative)


def row_info(label: str, path: tuple[str, ...], kind: str, table: str, track: int, depth: int = 0, *,
             unit: str = "", alias: bool = False, folds: str = "", derived: bool = False) -> RowInfo:
    """A :class:`RowInfo` whose group is its path."""
    return RowInfo(label, " / ".join(path), kind, table, track, depth, unit, path, False, alias, folds, derived)


@dataclass
class TimelineIndex:
    """Per-row sorted event arrays (``rows[i]``, ``ids[i]`` = table row ids in the same order) plus
    counter samples, ready for viewport queries."""

    infos: list[RowInfo]
    rows: list[Row | None]
    ids: list[np.ndarray]
    counters: dict[int, tuple[np.ndarray, np.ndarray]]
    origin: int
    end: int
    trace: object = None
    hierarchy: pd.DataFrame | None = None  # analysis.op_hierarchy (the "hierarchy" table of the rows)
    cumulative: object = None              # explorer.derived.Cumulative: the derived counters
    _colors: dict = field(default_factory=dict)
    memo: dict = field(default_factory=dict)  # per-index results of page lookups (e.g. picked roofline points)

    @property
    def groups(self) -> list[str]:
        """Row groups in display order (unique)."""
        return list(dict.fromkeys(i.group for i in self.infos))

    def n_events(self) -> int:
        """Events of the trace's rows (alias rows repeat events and are not counted)."""
        return int(sum(len(r) for r, i in zip(self.rows, self.infos) if r is not None and not i.alias))

    def folded(self) -> list[str]:
        """Track groups folded by default: every hierarchy level below the first."""
        return [i.folds for i in self.infos if i.folds]

    def counter(self, i: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(ts, value) of counter row ``i``, None while a derived counter is being computed."""
        info = self.infos[i]
        if info.derived and self.cumulative is not None and not self.cumulative.ready():
            return None
        c = self.counters.get(info.track)
        if c is None:  # a derived counter whose computation failed (logged): drawn empty, not pending forever
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return c

    def color_codes(self, table: str, mode: str) -> tuple[np.ndarray, list[str]]:
        """(codes aligned with ``table`` row ids, labels) for colouring by ``mode`` in ``COLOR_MODES``."""
        if mode not in COLOR_MODES:
            raise ValueError(f"unknown colour mode {mode!r}; valid: {', '.join(COLOR_MODES)}")
        return self._codes(table, mode)

    def _codes(self, table: str, mode: str) -> tuple[np.ndarray, list[str]]:
        key = (table, mode)
        if key not in self._colors:
            if table == "hierarchy":
                h = self.hierarchy if self.hierarchy is not None else pd.DataFrame({"name": []})
                codes, labels = _codes(h, "name")
                self._colors[key] = (codes.astype(np.int32), labels)
            else:
                self._colors[key] = _color_codes(self.trace, table, mode)
        return self._colors[key]

    def picked(self, table: str, rows: np.ndarray) -> dict[str, np.ndarray]:
        """``{table: bool per row id}`` marking ``rows`` (for :func:`explorer.viewport.query_view`)."""
        n = len(self._codes(table, "op")[0])
        mark = np.zeros(n, dtype=bool)
        rows = np.asarray(rows, dtype=np.int64)
        mark[rows[(rows >= 0) & (rows < n)]] = True
        return {table: mark}

    def locate(self, table: str, rids) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row index or -1, start, end) of the events ``rids`` of ``table``; times in ns from the trace
        start. Host ops of a projected trace are located on their projected rows."""
        key = ("rowpos", table)
        if key not in self.memo:
            n = len(self._codes(table, "op")[0])
            pos = np.full(n, -1, dtype=np.int32)
            for i, info in enumerate(self.infos):
                if info.table == table and not info.measured and not info.alias and self.rows[i] is not None:
                    pos[self.ids[i]] = i
            df = self.trace.table(table, ["start_ts", "duration_ns"])
            st = np.zeros(n, dtype=np.int64)
            du = np.zeros(n, dtype=np.int64)
            st[df.index.to_numpy()] = df["start_ts"].to_numpy(dtype=np.int64) - self.origin
            du[df.index.to_numpy()] = df["duration_ns"].to_numpy(dtype=np.int64)
            self.memo[key] = (pos, st, du)
        pos, st, du = self.memo[key]
        r = np.asarray(rids, dtype=np.int64)
        ok = (r >= 0) & (r < len(pos))
        rr = np.where(ok, r, 0)
        return (np.where(ok, pos[rr], -1), np.where(ok, st[rr], 0), np.where(ok, st[rr] + du[rr], 0))

    def match(self, table: str, q: str) -> np.ndarray:
        """Bool per row id of ``table``: the event's name, or the name of the host op that launched it
        (so an op name finds its GPU kernels too), contains ``q`` (case-insensitive)."""
        q = q.strip().lower()
        out = None
        for mode in ("op", "launcher") if table not in ("host_ops", "hierarchy") else ("op",):
            codes, labels = self._codes(table, mode)
            hit = np.array([q in lab.lower() for lab in labels] + [False], dtype=bool)  # code -1 -> False
            m = hit[codes]
            out = m if out is None else (out | m)
        return out


def _cat(df: pd.DataFrame, col: str, n: int) -> pd.Series:
    if col in df.columns:
        return df[col].astype(str)
    return pd.Series([""] * n, index=df.index)


def event_label(df: pd.DataFrame, table: str) -> pd.Series:
    """Display name of each event of ``table`` (op name, opcode, DMA queue/variable, collective op)."""
    n = len(df)
    if table == "host_ops":
        return _cat(df, "name", n)
    if table == "instructions":
        name = _cat(df, "name", n)
        return name.where(name != "", _cat(df, "opcode", n))
    if table == "dma":
        var = _cat(df, "variable", n)
        return ("DMA " + _cat(df, "source", n) + "->" + _cat(df, "dest", n)).where(var.isin(["", "unknown"]),
                                                                                    "DMA " + var)
    if table == "collectives":
        return _cat(df, "operation", n)
    raise ValueError(f"no event labels for table {table!r}; valid: {', '.join(EVENT_TABLES)}")


def _codes(df: pd.DataFrame, col: str) -> tuple[np.ndarray, list[str]]:
    """(int codes, labels) of a column without converting every row to str (Categorical fast path)."""
    if col not in df.columns:
        return np.zeros(len(df), dtype=np.int64), [""]
    s = df[col]
    if isinstance(s.dtype, pd.CategoricalDtype):
        codes = s.cat.codes.to_numpy().astype(np.int64)
        labels = [str(c) for c in s.cat.categories]
        if (codes < 0).any():
            codes = np.where(codes < 0, len(labels), codes)
            labels.append("")
        return codes, labels
    codes, uniq = pd.factorize(s.astype(str).to_numpy())
    return codes.astype(np.int64), [str(u) for u in uniq]


def _combine(parts: list[tuple[np.ndarray, list[str]]], fmt) -> tuple[np.ndarray, list[str]]:
    """Codes of the tuple of several coded columns; ``fmt(*labels)`` names each distinct tuple."""
    key = np.zeros(len(parts[0][0]), dtype=np.int64)
    for c, lab in parts:
        key = key * (len(lab) + 1) + c
    uniq, inv = np.unique(key, return_inverse=True)
    labels = []
    for k in uniq.tolist():
        idx = []
        for _, lab in reversed(parts):
            k, r = divmod(k, len(lab) + 1)
            idx.append(r)
        labels.append(fmt(*[lab[i] for (_, lab), i in zip(parts, reversed(idx))]))
    return inv.astype(np.int64), labels


def _label_codes(trace, table: str, mode: str) -> tuple[np.ndarray, list[str]]:
    df = trace.table(table)
    n = len(df)
    if mode == "op":
        if table == "host_ops":
            return _codes(df, "name")
        if table == "collectives":
            return _codes(df, "operation")
        if table == "instructions":
            return _combine([_codes(df, "name"), _codes(df, "opcode")], lambda a, b: a or b)
        return _combine([_codes(df, "variable"), _codes(df, "source"), _codes(df, "dest")],
                        lambda v, s, d: f"DMA {v}" if v not in ("", "unknown") else f"DMA {s}->{d}")
    if mode == "engine":
        if table == "instructions":
            return _codes(df, "engine")
        if table == "host_ops":
            return _codes(df, "category")
        if table == "dma":
            c, lab = _codes(df, "queue_type")
            return c, [f"DMA {x}".strip() for x in lab]
        return np.zeros(n, dtype=np.int64), ["CC"]
    # module (or, for "launcher", name) of the event or of the host op that launched it
    host = trace.table("host_ops")
    hc, hl = _codes(host, "name" if mode == "launcher" else "module")
    hl = [x or "(no module)" for x in hl] if mode == "module" else hl
    if table == "host_ops":
        return hc, hl
    ref = df["framework_op"].to_numpy() if "framework_op" in df.columns else np.full(n, -1)
    pos = host.index.get_indexer(ref) if len(host) else np.full(n, -1)
    codes = np.where(pos >= 0, hc[np.maximum(pos, 0)] if len(hc) else 0, len(hl))
    return codes.astype(np.int64), hl + ["(no module)" if mode == "module" else ""]


def _color_codes(trace, table: str, mode: str) -> tuple[np.ndarray, list[str]]:
    df = trace.table(table)
    codes, labels = _label_codes(trace, table, mode)
    full = np.full(int(df.index.max()) + 1 if len(df) else 0, -1, dtype=np.int32)
    full[df.index.to_numpy()] = codes
    return full, labels


def _host_depth(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Nesting depth of start-sorted intervals on one thread (0 = outermost)."""
    depth = np.zeros(len(start), dtype=np.int64)
    stack: list[int] = []
    s_l, e_l = start.tolist(), end.tolist()
    for i in range(len(s_l)):
        while stack and stack[-1] <= s_l[i]:
            stack.pop()
        depth[i] = len(stack)
        stack.append(e_l[i])
    return depth


def _track_meta(tracks: pd.DataFrame) -> dict[int, dict]:
    meta = {}
    cols = {c: tracks[c].to_numpy() for c in ("parent", "kind", "name", "sort_index", "unit", "rank")
            if c in tracks.columns}
    for pos, tid in enumerate(tracks.index.to_numpy()):
        meta[int(tid)] = {c: (v[pos].item() if hasattr(v[pos], "item") else v[pos]) for c, v in cols.items()}
    return meta


def _ancestors(meta: dict[int, dict], tid: int) -> list[int]:
    out, seen = [], set()
    p = int(meta.get(tid, {}).get("parent", -1))
    while p >= 0 and p in meta and p not in seen:
        seen.add(p)
        out.append(p)
        p = int(meta[p].get("parent", -1))
    return out[::-1]


def host_timeline_groups(trace) -> tuple[str, str] | None:
    """Names of the two host track groups of a trace whose host timeline is projected (simulated for a
    target: ``start_ts`` is the projection, ``measured_start_ts`` what the capturing CPU measured), else None."""
    sim = getattr(trace.header, "simulation", None)
    if sim is None or sim.host_timeline != "projected":
        return None
    target = sim.target or "the simulated device"
    return (f"Host (projected for {target})", "Host (measured on the capturing machine)")


def _table_rows(entries: list, meta: dict, table: str, df: pd.DataFrame, start: np.ndarray, stop: np.ndarray,
                keep: np.ndarray | None, path_and_key, measured: bool = False) -> None:
    """Append the rows of one event table (one per track; host ops one per nesting depth) to ``entries``."""
    rid = df.index.to_numpy(dtype=np.int64)
    trk = df["track"].to_numpy(dtype=np.int64)
    if keep is not None:
        start, stop, rid, trk = start[keep], stop[keep], rid[keep], trk[keep]
    if not len(trk):
        return
    order = np.argsort(trk, kind="stable")
    bounds = np.flatnonzero(np.diff(trk[order])) + 1
    for part in np.split(order, bounds):
        tid = int(trk[part[0]])
        kind = str(meta.get(tid, {}).get("kind", "thread" if table == "host_ops" else "engine"))
        name = str(meta.get(tid, {}).get("name", f"track {tid}"))
        s, e, r = start[part], stop[part], rid[part]
        if table == "host_ops":
            o = np.argsort(s, kind="stable")
            s, e, r = s[o], e[o], r[o]
            depth = np.minimum(_host_depth(s, e), MAX_HOST_DEPTH)
            subsets = [(d, depth == d) for d in np.unique(depth)]
        else:
            subsets = [(0, slice(None))]
        for d, m in subsets:
            row, o = Row.build(s[m], e[m])
            label = name if d == 0 else f"{name} [{d}]"
            if table == "collectives" and kind == "stream":
                label = f"{name} collectives"
            path, k = path_and_key(tid, kind, int(d))
            entries.append((k, RowInfo(label, " / ".join(path), kind, table, tid, int(d), "", path, measured),
                            row, r[m][o]))


def _counter_entries(trace, meta: dict, entries: list, group_and_key) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Append one row per counter track to ``entries``; returns {track: (ts, value)} sorted by time."""
    counters: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    cdf = trace.table("counters")
    if not len(cdf):
        return counters
    ts = cdf["ts"].to_numpy(dtype=np.int64)
    val = cdf["value"].to_numpy(dtype=np.float64)
    trk = cdf["track"].to_numpy(dtype=np.int64)
    order = np.lexsort((ts, trk))
    for part in np.split(order, np.flatnonzero(np.diff(trk[order])) + 1):
        tid = int(trk[part[0]])
        name = str(meta.get(tid, {}).get("name", f"counter {tid}"))
        path, k = group_and_key(tid, "counter", "counters", 0)
        info = RowInfo(name, " / ".join(path), "counter", "counters", tid, 0, str(meta.get(tid, {}).get("unit", "")),
                       path)
        entries.append((k, info, None, np.asarray(part)))
        counters[tid] = (ts[part], val[part])
    return counters


def build_index(trace, progress: bool = False) -> TimelineIndex:
    """Split every event table by track (and host ops by depth) into sorted rows."""
    from tqdm import tqdm

    tracks = trace.table("tracks")
    meta = _track_meta(tracks)
    origin, end = trace.time_range
    entries: list[tuple[tuple, RowInfo, Row | None, np.ndarray]] = []
    bar = tqdm(total=len(EVENT_TABLES) + 1, desc=f"indexing {trace.name}", disable=not progress, unit="table")

    host_groups = host_timeline_groups(trace)

    def parent_of(tid: int) -> int:
        return int(meta.get(tid, {}).get("parent", -1))

    def group_and_key(tid: int, kind: str, table: str, depth: int, host: int = 0) -> tuple[tuple, tuple]:
        anc = _ancestors(meta, tid)
        path = tuple(str(meta[a]["name"]) for a in anc) or ("(no parent)",)
        order = tuple(int(meta[a].get("sort_index", a)) for a in anc)
        if table == "host_ops" and host_groups:  # projected vs measured host timeline: two track groups
            path, order = path + (host_groups[host],), order + (host,)
        name = str(meta.get(tid, {}).get("name", f"track {tid}"))
        eng = ENGINE_ORDER.index(name) if name in ENGINE_ORDER else len(ENGINE_ORDER)
        k = (order, KIND_ORDER.get(kind, 4), eng, int(meta.get(tid, {}).get("sort_index", tid)), tid,
             TABLE_CODE.get(table, 9), depth)
        return path, k

    for table in EVENT_TABLES:
        df = trace.table(table)
        bar.update(1)
        if not len(df):
            continue
        variants = [("start_ts", "duration_ns")]
        if table == "host_ops" and host_groups:
            variants.append(("measured_start_ts", "measured_duration_ns"))
        for host, (scol, dcol) in enumerate(variants):
            start = df[scol].to_numpy(dtype=np.int64)
            stop = start + df[dcol].to_numpy(dtype=np.int64)
            keep = None if host == 0 else (start != 0)  # 0 = not measured
            _table_rows(entries, meta, table, df, start, stop, keep,
                        lambda tid, kind, d, h=host, tb=table: group_and_key(tid, kind, tb, d, h), measured=host == 1)
    counters = _counter_entries(trace, meta, entries, group_and_key)
    bar.update(1)
    bar.close()
    hierarchy = derived.hierarchy_entries(trace, entries, parent_of, row_info)
    derived.dma_engine_entries(trace, entries, parent_of, row_info)
    has_cumulative = derived.cumulative_entries(trace, entries, meta, parent_of, row_info)
    entries.sort(key=lambda x: x[0])
    index = TimelineIndex([e[1] for e in entries], [e[2] for e in entries], [e[3] for e in entries],
                          counters, int(origin), int(end), trace, hierarchy)
    if has_cumulative:
        index.cumulative = derived.Cumulative(trace, counters)
    return index
