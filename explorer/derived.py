"""Derived timeline rows: the hierarchy view, DMA engine rows and cumulative counters (layout only; the spans,
engine assignment and counter values come from :func:`analysis.op_hierarchy`, :func:`analysis.dma_engines`
and :func:`analysis.cumulative_utilization`).

- **Hierarchy** (per core, a track group "Hierarchy" before the engine rows): one row per module level
  (outermost first), then "Op" (each launching op's span on the core), then "Instructions" (the core's engine
  rows again, sharing their arrays). Each level's row unfolds the next: its label is the fold toggle
  (``RowInfo.folds``); only the first level is shown until unfolded.
- **DMA engines** (per core, group "DMA engines"): one row per ``DMA-E<n>``, the transfers of the queue rows
  split by engine (with the queue rows, a partition of the DMA table); an engine that ran exactly one queue's
  transfers is named on that queue's row instead (``qSyncIO0 · DMA-E0``), so no row repeats another.
- **Cumulative counters** (group of the device): Estimated Cumulative MFU, Cumulative DMA Throughput and
  Cumulative DMA bytes; computed in the background on the first view that shows them (the view answers
  ``pending`` until then, the canvas asks again).

Rows repeating events of other rows are ``alias`` rows: :meth:`TimelineIndex.locate` (search results, links)
uses the original rows.
"""
from __future__ import annotations

import logging
import threading

import numpy as np
import pandas as pd

import analysis

from .timeline import Row

LOG = logging.getLogger("explorer")
HIERARCHY_TABLE = "hierarchy"
HIERARCHY_GROUP = "Hierarchy"
DMA_ENGINE_GROUP = "DMA engines"
#: (label, column of analysis.cumulative_utilization, unit), synthetic counter track ids -10, -11, ...
CUMULATIVE = (("Estimated Cumulative MFU", "mfu_percent", "percent"),
              ("Cumulative DMA Throughput", "dma_throughput_bytes_per_s", "bytes/s"),
              ("Cumulative DMA bytes", "dma_bytes", "bytes"))
CUMULATIVE_TRACK0 = -10
KIND_HIERARCHY = -1       # sort position of the hierarchy rows in a core (before the engines)
KIND_DMA_ENGINE = 2.5     # after the DMA queues
KIND_CUMULATIVE = 6.5     # after the recorded counters


def level_label(kind: str, level: int) -> str:
    """The row label of a hierarchy level (``level`` 0 = outermost module level)."""
    if kind == "op":
        return "Op"
    return "Layer" if level == 0 else f"Module (level {level + 1})"


def _core_paths(entries: list, parent_of) -> dict[int, tuple[tuple, tuple]]:
    """Core track id -> (path, sort order) of the rows under it (from the engine / queue rows)."""
    out: dict[int, tuple[tuple, tuple]] = {}
    for k, info, _, _ in entries:
        if info.table in ("instructions", "dma") and not info.alias:
            out.setdefault(parent_of(info.track), (info.path, k[0]))
    return out


def hierarchy_entries(trace, entries: list, parent_of, row_info) -> pd.DataFrame | None:
    """Append the hierarchy rows of every core to ``entries``; returns the hierarchy frame (None: no spans)."""
    h = analysis.op_hierarchy(trace)
    if not len(h):
        return None
    cores = _core_paths(entries, parent_of)
    engines: dict[int, list] = {}
    for e in entries:
        if e[1].table == "instructions" and not e[1].alias:
            engines.setdefault(parent_of(e[1].track), []).append(e)
    level = h["level"].to_numpy()
    core = h["core"].to_numpy()
    kinds = h["kind"].to_numpy()
    for c in sorted(engines):
        if c not in cores:
            continue
        path0, order = cores[c]
        chain: list[str] = []
        for lvl in np.unique(level).tolist():
            sel = np.flatnonzero((level == lvl) & (core == c))
            if not len(sel):
                continue
            kind = str(kinds[sel[0]])
            label = level_label(kind, lvl)
            path = path0 + (HIERARCHY_GROUP,) + tuple(chain)
            row, o = Row.build(h["start_ts"].to_numpy()[sel], h["end_ts"].to_numpy()[sel])
            table = "host_ops" if kind == "op" else HIERARCHY_TABLE
            ids = (h["host_op"].to_numpy()[sel] if kind == "op" else sel)[o]
            info = row_info(label, path, "hierarchy", table, c, lvl, alias=True,
                            folds=" / ".join(path + (label,)))
            entries.append(((order, KIND_HIERARCHY, lvl, 0, c, 0, 0), info, row, np.asarray(ids, dtype=np.int64)))
            chain.append(label)
        if not chain:  # no op of this core has a span: no hierarchy (its instructions stay on the engine rows)
            continue
        path = path0 + (HIERARCHY_GROUP,) + tuple(chain)
        for k, info, row, ids in engines[c]:
            entries.append(((order, KIND_HIERARCHY, 1 << 20, k[2], k[3], k[4], 0),
                            row_info(info.label, path, "hierarchy", "instructions", info.track, 0, alias=True),
                            row, ids))
    return h


def dma_engine_entries(trace, entries: list, parent_of, row_info) -> None:
    """Append one row per (core, DMA engine) to ``entries``: the DMA transfers split by engine. None when no
    transfer says its engine (a row "DMA engine unknown" would repeat the queues). An engine whose transfers are
    exactly one queue's gets no row of its own (it would repeat the queue row): that queue row's label names it,
    ``"qSyncIO0 · DMA-E0"`` (the simulated runtime's traces, where each queue has its engine)."""
    d = analysis.dma_engines(trace)
    eng = d["engine"].to_numpy(dtype=np.int64)
    if not len(d) or int(eng.max()) < 0:
        return
    cores = _core_paths(entries, parent_of)
    queues = {e[1].track: e for e in entries if e[1].table == "dma" and not e[1].alias}
    dma = trace.table("dma", ["track", "start_ts", "duration_ns"])
    pos = dma.index.get_indexer(d["row"].to_numpy())
    track = dma["track"].to_numpy(dtype=np.int64)[pos]
    start = dma["start_ts"].to_numpy(dtype=np.int64)[pos]
    stop = start + dma["duration_ns"].to_numpy(dtype=np.int64)[pos]
    rid = d["row"].to_numpy(dtype=np.int64)
    codes, uniq = pd.factorize(d["core"].to_numpy(dtype=np.int64) * (1 << 20) + (eng + 1), sort=True)
    labels = d["engine_track"].astype(str).to_numpy()
    order = np.argsort(codes, kind="stable")
    for part in np.split(order, np.flatnonzero(np.diff(codes[order])) + 1):
        c, e = divmod(int(uniq[codes[part[0]]]), 1 << 20)
        path0, k0 = cores.get(c, (("(no core)",), ()))
        q = queues.get(int(track[part[0]]))
        if q is not None and len(q[3]) == len(part) and (track[part] == track[part[0]]).all():
            q[1].label = f"{q[1].label} · {labels[part[0]]}"  # the engine ran exactly this queue: one row, both names
            continue
        row, o = Row.build(start[part], stop[part])
        info = row_info(str(labels[part[0]]), path0 + (DMA_ENGINE_GROUP,), "dma_engine", "dma", c, 0, alias=True)
        entries.append(((k0, KIND_DMA_ENGINE, e - 1, 0, c, 0, 0), info, row, rid[part][o]))


def cumulative_entries(trace, entries: list, meta: dict, parent_of, row_info) -> bool:
    """Append the cumulative counter rows (data computed later, :class:`Cumulative`) to ``entries``: MFU when the
    trace has device instructions, the DMA ones when it has DMA rows; returns whether it added any."""
    cores = _core_paths(entries, parent_of)
    if not cores:
        return False
    c = min(cores)
    path, order = cores[c]
    if str(meta.get(c, {}).get("kind", "")) == "core" and len(path) > 1:  # Neuron: the device above the cores
        path, order = path[:-1], order[:-1]
    has = {"mfu_percent": len(trace.table("instructions", ["start_ts"])) > 0}
    has["dma_bytes"] = has["dma_throughput_bytes_per_s"] = len(trace.table("dma", ["start_ts"])) > 0
    for i, (label, col, unit) in enumerate(CUMULATIVE):
        if not has[col]:  # no DMA rows (a GPU trace): no DMA counters reading 0
            continue
        info = row_info(label, path, "counter", "counters", CUMULATIVE_TRACK0 - i, 0, unit=unit, derived=True)
        entries.append(((order, KIND_CUMULATIVE, i, 0, 0, 0, 0), info, None, np.zeros(0, dtype=np.int64)))
    return True


class Cumulative:
    """The cumulative counters of one index, computed once in a background thread on first use."""

    def __init__(self, trace, counters: dict) -> None:
        self.trace, self.counters = trace, counters
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.error: str | None = None

    def ready(self) -> bool:
        """True when the counters are in ``counters``; else starts (once) their computation and returns False."""
        if CUMULATIVE_TRACK0 in self.counters or self.error:
            return True
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="cumulative counters", daemon=True)
                self.thread.start()
        return False

    def compute(self) -> None:
        """Compute now (tests, scripts)."""
        if CUMULATIVE_TRACK0 not in self.counters:
            self._run()

    def _run(self) -> None:
        try:
            cu = analysis.cumulative_utilization(self.trace)
            ts = cu["ts"].to_numpy(dtype=np.int64)
            for i, (_, col, _) in reversed(list(enumerate(CUMULATIVE))):  # the first one last: ready() checks it
                self.counters.setdefault(CUMULATIVE_TRACK0 - i, (ts, cu[col].to_numpy(dtype=np.float64)))
        except Exception as exc:  # noqa: BLE001 - the rows stay empty, the log has the traceback
            LOG.exception("cumulative counters failed")
            self.error = f"{type(exc).__name__}: {exc}"
