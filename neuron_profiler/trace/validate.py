"""Deep validation of a trace: every chunk decodes and every reference points at an existing row."""
from __future__ import annotations

import os

import numpy as np

from neuron_profiler.trace.columns import TABLES
from neuron_profiler.trace.reader import read_trace


def validate_trace(path: str | os.PathLike) -> list[str]:
    """Problems found in ``path`` (empty when valid). Unreadable files raise ``TraceFormatError``."""
    tf = read_trace(path)
    problems = list(tf.warnings)
    tables = tf.tables()
    rows = {t: len(df) for t, df in tables.items()}
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
    tf.close()
    return problems
