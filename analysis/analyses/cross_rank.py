"""Per-rank reductions of the cross-rank analyses, and where they run (the engine).

Every cross-rank analysis (:mod:`analysis.analyses.ranks`, :func:`analysis.collectives_across_ranks`) is
"reduce each trace to a small frame, then combine the frames". :func:`rank_parts` is the reduction of one
trace (one rank, one window); :func:`gather` runs it over the traces of a set:

- ``engine="pandas"`` (the reference): in this process, on the given ``Trace`` objects (their loaded tables
  and memoised results are reused and kept);
- ``engine="dask"``: one Dask task per trace file (:mod:`analysis.distributed`): the task opens the file
  through the trace reader, calls the same :func:`rank_parts` and returns only the small frames, so no
  process ever holds the events of more than one rank per worker thread, and the numbers are those of the
  pandas path by construction.

The parts (all small: one row per rank, per collective of the rank, per step, per merged timeline interval):
``balance`` (a dict, one rank_balance row without the cross-rank columns), ``collectives``
(:func:`analysis.analyses.collectives.rank_collectives`), ``steps`` (the rank's steps with ``rank``,
``window``), ``timeline`` (its :func:`analysis.rank_timeline` rows at a given resolution).
"""
from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.trace import read_trace

from .. import distributed
from ..core.intervals import coarsen, merge
from ..core.runs import group_runs, run_key, run_label
from ..registry import register
from .activity import COMMUNICATION, COMPUTATION, MEMORY, OTHER, kernel_type_mask, trace_activity
from .breakdown import comm_comp_overlap, temporal_breakdown
from .collectives import ACROSS_SPEC, collective_time_ns, match_collectives, rank_collectives
from .steps import steps
from .summary import balance_metrics

__all__ = ["ENGINES", "PARTS", "RANK_LANES", "labelled_runs", "rank_parts", "gather"]

ENGINES = ("pandas", "dask")
PARTS = ("balance", "collectives", "steps", "timeline")
#: lanes of :func:`analysis.rank_timeline`, top to bottom within a rank, and the device kernel types of each
RANK_LANES = {"steps": (), "compute": (COMPUTATION,), "communication": (COMMUNICATION,), "memory": (MEMORY, OTHER)}
TIMELINE_COLUMNS = ["rank", "window", "lane", "start_ts", "end_ts", "busy_ns", "label"]


def labelled_runs(traces: Iterable) -> list[tuple[str, list]]:
    """The runs of ``traces`` (:func:`analysis.core.runs.group_runs`) with their labels, a label seen twice
    getting " #2", " #3" (as :attr:`analysis.TraceSet.runs`). Reads headers only."""
    out: list[tuple[str, list]] = []
    seen: dict[str, int] = {}
    for g in group_runs(list(traces)):
        label = run_label(run_key(g[0]))
        seen[label] = seen.get(label, 0) + 1
        out.append((label if seen[label] == 1 else f"{label} #{seen[label]}", g))
    return out


def balance_row(t, run: str, lean: bool = False) -> dict:
    """The per-rank columns of :func:`analysis.rank_balance` (all but the cross-rank ones). ``lean``: see
    :func:`analysis.analyses.summary.balance_metrics`."""
    s = balance_metrics(t, lean=lean)
    tb = temporal_breakdown(t).iloc[0]
    ov = comm_comp_overlap(t).iloc[0]
    return {"rank": int(t.rank), "window": int(t.header.window_index), "trace": t.name, "run": run,
            "span_ns": float(s.get("total_time", np.nan)), "step_count": float(s.get("step_count", 0)),
            "step_time_mean_ns": float(s.get("step_time_mean_ns", np.nan)),
            "step_time_max_ns": float(s.get("step_time_max_ns", np.nan)),
            "device_active_percent": float(s.get("device_active_percent", np.nan)),
            "mfu_estimated_percent": float(s.get("mfu_estimated_percent", np.nan)),
            "compute_time_ns": int(tb["compute_time_ns"]), "non_compute_time_ns": int(tb["non_compute_time_ns"]),
            "idle_time_ns": int(tb["idle_time_ns"]), "kernel_time_ns": int(tb["kernel_time_ns"]),
            "collective_time_ns": collective_time_ns(t), "comp_comm_overlap_pctg": float(ov["comp_comm_overlap_pctg"])}


def timeline_rows(t, resolution: float) -> pd.DataFrame:
    """One trace's rows of :func:`analysis.rank_timeline`: its steps and its device lanes merged at
    ``resolution`` (ns)."""
    key = {"rank": int(t.rank), "window": int(t.header.window_index)}
    parts = []
    st = steps(t)
    if len(st):
        parts.append(pd.DataFrame({**key, "lane": "steps", "start_ts": st["start_ts"].to_numpy(),
                                   "end_ts": st["end_ts"].to_numpy(),
                                   "busy_ns": (st["end_ts"] - st["start_ts"]).to_numpy(),
                                   "label": [f"step {n}" for n in st["step"]]}))
    act = trace_activity(t)
    for lane, types in RANK_LANES.items():
        if not types:
            continue
        m = kernel_type_mask(act, *types)
        if not m.any():
            continue
        s, e, busy = coarsen(*merge(act["start_ts"].to_numpy()[m], act["end_ts"].to_numpy()[m],
                                    sorted_by_start=True), resolution)
        parts.append(pd.DataFrame({**key, "lane": lane, "start_ts": s, "end_ts": e, "busy_ns": busy, "label": lane}))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("lane", "label") else "int64")
                             for c in TIMELINE_COLUMNS})
    return pd.concat(parts, ignore_index=True)[TIMELINE_COLUMNS]


def rank_parts(t, run: str, want: Sequence[str], resolution: float | None = None, lean: bool = False
               ) -> dict[str, Any]:
    """The reduction of one trace: the parts named in ``want`` (see the module docstring); ``run`` is the
    label of its run, ``resolution`` (ns) that of the timeline part; ``lean`` for a trace reduced once and
    released (memoises less, :func:`balance_row`)."""
    out: dict[str, Any] = {}
    if "balance" in want:
        out["balance"] = balance_row(t, run, lean)
    if "collectives" in want:
        out["collectives"] = rank_collectives(t, run)
    if "steps" in want:
        out["steps"] = steps(t).assign(rank=int(t.rank), window=int(t.header.window_index))
    if "timeline" in want:
        out["timeline"] = timeline_rows(t, 1.0 if resolution is None else resolution)
    return out


def file_parts(path: str, window: tuple[int, int] | None, run: str, want: Sequence[str],
               resolution: float | None = None, *, trace_cls: Callable[..., Any]) -> dict[str, Any]:
    """:func:`rank_parts` of a trace file (a Dask task): opens it with the trace reader, reduces, closes.
    ``trace_cls``: the class wrapping the open file (:class:`analysis.Trace`, given by the caller: this layer
    sits below it)."""
    with read_trace(path) as tf:
        t = trace_cls(tf, path=path)
        out = rank_parts(t if window is None else t.window(*window), run, want, resolution, lean=True)
        # a Trace and its windows reference each other: free the rank's tables now, so a worker never holds
        # more than the rank it is reducing (few Python objects are allocated between tasks, so the cyclic
        # garbage collector would run late; collecting explicitly costs ~0.1 s in a big process)
        t.release()
    return out


def _task(t, run: str) -> tuple[str, tuple[int, int] | None, str]:
    path = getattr(t, "path", None)
    if path is None or not str(path).endswith(".nprof"):
        raise ValueError(f"engine='dask' reads every rank from its .nprof file; trace {t.name!r} has none (built "
                         "in memory or imported without a cache): use engine='pandas'")
    return str(path), (None if t.whole() is t else tuple(t.time_range)), run


def gather(runs: list[tuple[str, list]], want: Sequence[str], *, engine: str = "pandas", scheduler: Any = None,
           workers: int | None = None, resolution: float | None = None, progress: bool = False,
           keep_loaded: bool = True) -> list[dict]:
    """:func:`rank_parts` of every trace of ``runs`` (:func:`labelled_runs`), in order, on ``engine``.
    ``scheduler`` / ``workers``: see :func:`analysis.distributed.map_files` (dask only). ``progress`` prints
    "k/n ranks reduced" lines to stderr. ``keep_loaded=False`` (pandas): reduce each trace that has a
    ``.nprof`` file from a fresh read of it (:func:`file_parts`, as a Dask task does), one rank in memory at
    a time, so the given traces load nothing (a viewer holding hundreds of ranks)."""
    bad = [w for w in want if w not in PARTS]
    if bad:
        raise ValueError(f"unknown part {bad[0]!r}; valid: {', '.join(PARTS)}")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; valid: {', '.join(ENGINES)}")
    if engine == "pandas" and (scheduler is not None or workers is not None):
        raise ValueError("scheduler / workers are for engine='dask'")
    flat = [(label, t) for label, g in runs for t in g]
    if engine == "dask":
        return distributed.map_files(file_parts, [_task(t, label) for label, t in flat], want=tuple(want),
                                     resolution=resolution, scheduler=scheduler, workers=workers, progress=progress,
                                     trace_cls=type(flat[0][1]) if flat else None)
    out = []
    for i, (label, t) in enumerate(flat, 1):
        fresh = not keep_loaded and str(getattr(t, "path", "") or "").endswith(".nprof")
        out.append(file_parts(*_task(t, label), want, resolution, trace_cls=type(t)) if fresh
                   else rank_parts(t, label, want, resolution))
        if progress and (i % max(1, len(flat) // 10) == 0 or i == len(flat)):
            print(f"cross-rank: {i}/{len(flat)} ranks reduced", file=sys.stderr)
    return out


@register("collectives_across_ranks", columns=ACROSS_SPEC, figure="skew_heatmap", subject="traces")
def collectives_across_ranks(traces: Iterable, *, engine: str = "pandas", scheduler=None,
                             workers: int | None = None) -> pd.DataFrame:
    """Match each collective across ranks by (process_group, sequence_number).

    ``traces``: a ``TraceSet`` or an iterable of ``Trace``. When sequence numbers are missing (-1), the
    n-th op of each (process_group, operation) on each rank is matched instead. Traces of different runs
    (:mod:`analysis.core.runs`) are never matched together; then ``collective`` is prefixed with "<run>:".
    One row per (collective, rank). Columns: collective ("<group>#<seq>"), process_group, sequence_number,
    operation, rank, start_ts, end_ts, duration_ns, size_bytes, ranks_seen (ranks holding this collective),
    arrival_delay_ns (start − earliest start of the collective), arrival_skew_ns (latest − earliest start,
    same on every row of the collective), wait_ns (latest arrival − own start: time blocked on peers),
    transfer_ns (end − latest arrival, ≥ 0), busbw_bytes_per_s (size / transfer_ns × bus factor: bandwidth
    once all ranks arrived), last_arrival_rank (the straggler of this collective).
    Assumes the ranks share one clock (same host, or synchronised hosts).
    ``engine="dask"`` reads each rank's collectives in a Dask task (:mod:`analysis.distributed`; ``scheduler``
    an address or a ``distributed.Client``, default a LocalCluster of ``workers`` processes); same result.
    """
    runs = labelled_runs(traces)
    parts = gather(runs, ("collectives",), engine=engine, scheduler=scheduler, workers=workers)
    return match_collectives([p["collectives"] for p in parts], multi_run=len(runs) > 1)
