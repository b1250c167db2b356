"""What every exporter shares: opening the source, the track layout, the event tables, flow endpoints.

Exporters stream: tables are read in batches of whole chunks (``TraceFile.iter_table``), so memory stays bounded
by the batch size, the tracks table and the flows, whatever the number of events.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neuron_profiler.trace import TraceFile, read_trace

#: Event tables exported as slices: table -> the column that names each event.
EVENT_TABLES = {"host_ops": "name", "instructions": "name", "dma": "variable", "collectives": "operation",
                "allocations": "tensor_name"}
#: Rows per batch read while exporting.
BATCH_ROWS = 1 << 18
#: Track kinds that head a process in timeline viewers (the others become its threads / child tracks).
PROCESS_KINDS = ("process", "device")


class MissingExtraError(ImportError, RuntimeError):
    """An optional dependency (a ``pip install 'neuron-profiler[EXTRA]'`` extra) is not installed; the message
    says which. An ImportError (the CLIs answer it in one line) and, as before, a RuntimeError."""


@contextlib.contextmanager
def opened(src: str | os.PathLike | TraceFile) -> Iterator[TraceFile]:
    """``src`` itself when it is an open ``TraceFile``, else the file opened (and closed on exit)."""
    if isinstance(src, TraceFile):
        yield src
        return
    with read_trace(src) as tf:
        yield tf


@dataclass
class TrackLayout:
    """The tracks table with, per track, the process it belongs to (its nearest process/device ancestor)."""

    tracks: pd.DataFrame
    process: np.ndarray  # row id of each track's process track
    names: np.ndarray  # object array of track names
    kinds: np.ndarray

    @classmethod
    def of(cls, tf: TraceFile) -> TrackLayout:
        tracks = tf.table("tracks")
        parent = tracks["parent"].to_numpy()
        kinds = tracks["kind"].astype(str).to_numpy(dtype=object)
        names = tracks["name"].astype(str).to_numpy(dtype=object)
        n = len(tracks)
        process = np.arange(n, dtype=np.int64)
        for i in range(n):
            j, hops = i, 0
            while kinds[j] not in PROCESS_KINDS and 0 <= parent[j] < n and hops < 64:
                j, hops = int(parent[j]), hops + 1
            process[i] = j
        return cls(tracks, process, names, kinds)

    def __len__(self) -> int:
        return len(self.tracks)

    def valid(self, track: np.ndarray) -> np.ndarray:
        return (track >= 0) & (track < len(self))


def string_array(col: pd.Series) -> np.ndarray:
    """A Categorical (or any) column as an object array of Python str ("" for missing)."""
    if isinstance(col.dtype, pd.CategoricalDtype):
        cats = np.append(np.asarray(col.cat.categories, dtype=object), "")  # code -1 -> ""
        return cats[col.cat.codes.to_numpy()]
    return col.astype(str).to_numpy(dtype=object)


def strings(col: pd.Series) -> list[str]:
    """A Categorical (or any) column as a list of Python str."""
    return string_array(col).tolist()


class FlowEnds:
    """Where each flow's two events are, filled in while their tables stream by: per flow row, the source and
    destination event's (track, start_ts), -1 for an endpoint never seen (a dangling reference)."""

    def __init__(self, tf: TraceFile) -> None:
        parts = list(tf.iter_table("flows", batch_rows=BATCH_ROWS))
        flows = pd.concat(parts) if len(parts) > 1 else parts[0]
        self.flows = flows
        self.n = len(flows)
        self.track = np.full((2, self.n), -1, dtype=np.int64)
        self.ts = np.zeros((2, self.n), dtype=np.int64)
        self._keys: dict[tuple[int, str], tuple[np.ndarray, np.ndarray]] = {}
        for side, prefix in enumerate(("src", "dst")):
            tables = flows[f"{prefix}_table"].astype(str).to_numpy()
            rows = flows[f"{prefix}_row"].to_numpy()
            for t in np.unique(tables):
                idx = np.nonzero(tables == t)[0]
                order = np.argsort(rows[idx], kind="stable")
                self._keys[(side, str(t))] = (rows[idx][order], idx[order])

    def see(self, table: str, row_ids: np.ndarray, track: np.ndarray, start: np.ndarray) -> None:
        """Record the events of one batch of ``table`` (row ids ascending)."""
        for side in (0, 1):
            key = self._keys.get((side, table))
            if key is None or not len(row_ids):
                continue
            rows, flow_idx = key
            pos = np.searchsorted(row_ids, rows)
            hit = (pos < len(row_ids)) & (row_ids[np.minimum(pos, len(row_ids) - 1)] == rows)
            self.track[side, flow_idx[hit]] = track[pos[hit]]
            self.ts[side, flow_idx[hit]] = start[pos[hit]]

    def flow_ids_of(self, side: int, table: str, row_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(event index in ``row_ids``, flow id = flow row + 1) of every flow whose ``side`` (0 src, 1 dst) is
        one of the events ``row_ids`` (ascending) of ``table``."""
        key = self._keys.get((side, table))
        if key is None or not len(row_ids):
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        rows, flow_idx = key
        pos = np.searchsorted(row_ids, rows)
        hit = (pos < len(row_ids)) & (row_ids[np.minimum(pos, len(row_ids) - 1)] == rows)
        return pos[hit], flow_idx[hit] + 1
