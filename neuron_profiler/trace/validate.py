"""Deep validation of a trace: every chunk decodes, nothing is missing, the index agrees with the rows, and every
reference points at an existing row."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from neuron_profiler.trace.columns import TABLES, TIME_COLUMNS
from neuron_profiler.trace.reader import TraceFile, read_trace


def validate_trace(path: str | os.PathLike) -> list[str]:
    """Problems found in ``path`` (empty when valid): the loss report (truncation, unreadable chunks, missing
    rows, an inconsistent index), each unreadable chunk's error, index time bounds that disagree with the rows,
    dangling references. Files that cannot be opened at all raise ``TraceFormatError``."""
    with read_trace(path, strict=False) as tf:
        tables = tf.tables()
        loss = tf.loss_report(verify=True)
        problems = [loss] if loss else []
        problems += [str(e) for bad in tf._unreadable.values() for e in bad.values()]
        problems += _index_problems(tf, tables)
        problems += _reference_problems(tf, tables)
    return problems


def _row_limit(df: pd.DataFrame) -> int:
    """One past the largest row id (tables with missing rows keep their ids)."""
    return int(df.index.max()) + 1 if len(df) else 0


def _index_problems(tf: TraceFile, tables: dict[str, pd.DataFrame]) -> list[str]:
    """The footer's per-chunk time bounds must be those of the chunk's rows (windowed reads skip by them)."""
    if tf.footer is None:
        return []
    out = []
    for t, (tcol, dcol) in TIME_COLUMNS.items():
        df = tables[t]
        for c in tf.chunk_index(t):
            if not c.rows:
                continue
            rows = df.loc[c.first_row:c.end_row - 1]
            if len(rows) != c.rows:
                continue  # unreadable: in the loss report
            start = rows[tcol].to_numpy()
            end = start + rows[dcol].to_numpy() if dcol else start
            if (int(start.min()), int(end.max())) != (c.min_ts, c.max_end_ts):
                out.append(f"footer index: {t} chunk at byte {c.offset} says times {c.min_ts}..{c.max_end_ts}, "
                           f"its rows "
                           f"span {int(start.min())}..{int(end.max())} (time-window reads would miss rows)")
    return out


def _reference_problems(tf: TraceFile, tables: dict[str, pd.DataFrame]) -> list[str]:
    problems = []
    rows = {t: _row_limit(df) for t, df in tables.items()}
    for t, df in tables.items():
        for col in TABLES[t]:
            if col.kind == "ref":
                v = df[col.name].to_numpy()
                bad = int(((v < -1) | (v >= rows[col.ref_table])).sum())
                if bad:
                    problems.append(f"{t}.{col.name}: {bad} rows point outside table {col.ref_table!r} "
                                    f"({rows[col.ref_table]} rows)")
        if "duration_ns" in df and len(df) and int(df["duration_ns"].min()) < 0:
            problems.append(f"{t}: negative duration_ns")
        if t != "tracks" and "track" in df:
            missing = int((df["track"].to_numpy() < 0).sum())
            if missing:
                problems.append(f"{t}: {missing} rows have no track")
    flows = tables["flows"]
    for side in ("src", "dst"):
        for t, grp in flows.groupby(f"{side}_table", observed=True):
            t = str(t)
            if t not in rows:
                problems.append(f"flows.{side}_table names unknown table {t!r}")
                continue
            v = grp[f"{side}_row"].to_numpy()
            bad = int((v >= rows[t]).sum())
            if bad:
                problems.append(f"flows: {bad} {side} rows point outside table {t!r}")
    n_dev = len(tf.header.devices)
    tr = tables["tracks"]
    if len(tr):
        bad = int((tr["device"].to_numpy() >= n_dev).sum())
        if bad:
            problems.append(f"tracks.device: {bad} tracks name a device index >= {n_dev} (devices in header)")
    if tf.dropped_events and not all(np.asarray(list(tf.dropped_events.values())) >= 0):
        problems.append("footer.dropped_events holds negative counts")
    return problems
