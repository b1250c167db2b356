"""Statistics of an area (a time range over chosen timeline rows), as Perfetto's area-selection panel: per row,
per event name, per counter.

The caller (the explorer's timeline) fetches the candidate events of the rows it draws; this module decides
which overlap the range and what they add up to: durations clipped to the range, busy time as the union of
the clipped events (time with at least one event, the analyses' definition of busy), counters' min / mean / max
of the samples inside.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.intervals import union_by_key
from ..registry import Column, register
from .activity import WAIT_OPCODES

__all__ = ["AREA_TRACK_SPEC", "AREA_NAME_SPEC", "AREA_COUNTER_SPEC", "area_stats"]

AREA_TRACK_SPEC = (Column("track", "", "Track"),
                   Column("events", "count", "Events", "Events overlapping the range"),
                   Column("busy_ns", "ns", "Busy",
                          "Union of the working events (semaphore waits left out) clipped to the range"),
                   Column("busy_percent", "percent", "Busy share", "Busy time over the range"))
AREA_NAME_SPEC = (Column("name", "", "Name"),
                  Column("total_ns", "ns", "Total", "Sum of the durations clipped to the range"),
                  Column("mean_ns", "ns", "Mean", "Mean clipped duration"),
                  Column("max_ns", "ns", "Longest", "Longest clipped duration"))
AREA_COUNTER_SPEC = (Column("counter", "", "Counter"), Column("unit", "", "Unit"),
                     Column("min", "", "Min", "Smallest sample in the range (the counter's unit)"),
                     Column("mean", "", "Mean", "Mean of the samples in the range"),
                     Column("max", "", "Max", "Largest sample in the range"),
                     Column("samples", "count", "Samples", "Finite samples in the range"))
TRACK_COLUMNS = [c.name for c in AREA_TRACK_SPEC]
NAME_COLUMNS = ["name", "events", "total_ns", "mean_ns", "max_ns"]
COUNTER_COLUMNS = [c.name for c in AREA_COUNTER_SPEC]


def _in_order(values: pd.Series) -> tuple[np.ndarray, list]:
    """(codes, labels) in order of first appearance (a Categorical's own category order)."""
    if isinstance(values.dtype, pd.CategoricalDtype):
        return values.cat.codes.to_numpy().astype(np.int64), list(values.cat.categories)
    codes, uniques = pd.factorize(values, sort=False)
    return codes.astype(np.int64), list(uniques)


@register("area_stats", columns=AREA_TRACK_SPEC + AREA_NAME_SPEC + AREA_COUNTER_SPEC, subject="frame",
          returns="frames", memo=False, method=None)
def area_stats(events: pd.DataFrame, start_ns: int, end_ns: int, counters: pd.DataFrame | None = None
               ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(per track, per name, counters) of an area [start_ns, end_ns).

    ``events``: columns ``track`` (row label), ``name``, ``start_ts``, ``end_ts`` (ns), optionally ``opcode``
    (an engine waiting on a semaphore, ``WAIT_OPCODES``, is idle: counted as an event, not as busy); rows not
    overlapping the range are left out. ``counters``: columns ``counter``, ``unit``, ``ts`` (ns), ``value``;
    samples outside the range or not finite are left out. Returns:

    * per track (in order of first appearance): ``track``, ``events``, ``busy_ns`` (the union of the events
      clipped to the range), ``busy_percent`` (of the range);
    * per name: ``name``, ``events``, ``total_ns``, ``mean_ns``, ``max_ns`` (clipped durations), largest total
      first;
    * per counter with samples in the range: ``counter``, ``unit``, ``min``, ``mean``, ``max``, ``samples``."""
    a, b = int(start_ns), max(int(end_ns), int(start_ns) + 1)
    s, e = events["start_ts"].to_numpy(np.int64), events["end_ts"].to_numpy(np.int64)
    m = (s < b) & (e > a)
    tcodes, tlabels = _in_order(events["track"])
    ncodes, nlabels = _in_order(events["name"])
    tcodes, ncodes = tcodes[m], ncodes[m]
    s0, e0 = np.maximum(s[m], a), np.minimum(e[m], b)
    clip = (e0 - s0).astype(float)
    cnt = np.bincount(tcodes, minlength=len(tlabels))
    work = ~events["opcode"].astype(str).isin(WAIT_OPCODES).to_numpy()[m] if "opcode" in events else None
    busy_parts = (tcodes, s0, e0) if work is None else (tcodes[work], s0[work], e0[work])
    busy = union_by_key(*busy_parts).reindex(range(len(tlabels)), fill_value=0).to_numpy(np.int64)
    present = np.flatnonzero(cnt)
    tracks = pd.DataFrame({"track": [tlabels[i] for i in present], "events": cnt[present].astype(np.int64),
                           "busy_ns": busy[present], "busy_percent": 100.0 * busy[present] / (b - a)},
                          columns=TRACK_COLUMNS)
    ncnt = np.bincount(ncodes, minlength=len(nlabels))
    tot = np.bincount(ncodes, weights=clip, minlength=len(nlabels))
    mx = np.zeros(len(nlabels))
    np.maximum.at(mx, ncodes, clip)
    k = np.flatnonzero(ncnt)
    names = pd.DataFrame({"name": [nlabels[i] for i in k], "events": ncnt[k].astype(np.int64), "total_ns": tot[k],
                          "mean_ns": tot[k] / ncnt[k], "max_ns": mx[k]}, columns=NAME_COLUMNS)
    names = names.sort_values("total_ns", ascending=False, kind="stable").reset_index(drop=True)
    return tracks, names, _counter_stats(counters, a, b)


def _counter_stats(counters: pd.DataFrame | None, a: int, b: int) -> pd.DataFrame:
    if counters is None or not len(counters):
        return pd.DataFrame(columns=COUNTER_COLUMNS)
    ts, val = counters["ts"].to_numpy(np.int64), counters["value"].to_numpy(float)
    c = counters[(ts >= a) & (ts < b) & np.isfinite(val)]
    if not len(c):
        return pd.DataFrame(columns=COUNTER_COLUMNS)
    g = c.groupby(["counter", "unit"], sort=False, observed=True)["value"]
    out = g.agg(min="min", mean="mean", max="max", samples="count").reset_index()
    out["samples"] = out["samples"].astype(np.int64)
    return out[COUNTER_COLUMNS]
