"""Collectives: per-op bandwidth, and the same collective matched across ranks (skew, wait, stragglers)."""
from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.intervals import union_ns
from ..core.runs import group_runs, run_key, run_label
from ..registry import Column, register
from .activity import analysis_span

COLLECTIVE_SPEC = (
    Column("operation", "", "Operation", "Canonical name: all_reduce, all_gather, reduce_scatter, ..."),
    Column("process_group", "", "Process group"), Column("sequence_number", "count", "Sequence number"),
    Column("group_size", "count", "Group size"), Column("dtype", "", "Data type"),
    Column("start_ts", "ns", "Start"), Column("end_ts", "ns", "End"), Column("duration_ns", "ns", "Duration"),
    Column("size_bytes", "bytes", "Message size", "Larger of input and output bytes of the rank"),
    Column("algbw_bytes_per_s", "bytes/s", "Algorithm bandwidth", "size / duration (nccl-tests algbw)"),
    Column("busbw_bytes_per_s", "bytes/s", "Bus bandwidth", "algbw × NCCL bus factor (nccl-tests busbw)"),
    Column("framework_op", "count", "Host op row"))
ACROSS_SPEC = (
    Column("collective", "", "Collective", "<group>#<sequence>"), Column("process_group", "", "Process group"),
    Column("sequence_number", "count", "Sequence number"), Column("operation", "", "Operation"),
    Column("rank", "count", "Rank"), Column("start_ts", "ns", "Start"), Column("end_ts", "ns", "End"),
    Column("duration_ns", "ns", "Duration"), Column("size_bytes", "bytes", "Message size"),
    Column("ranks_seen", "count", "Ranks seen"),
    Column("arrival_delay_ns", "ns", "Arrival delay", "Start − earliest start of the collective"),
    Column("arrival_skew_ns", "ns", "Arrival skew", "Latest − earliest start"),
    Column("wait_ns", "ns", "Wait", "Latest arrival − own start: time blocked on peers"),
    Column("transfer_ns", "ns", "Transfer", "End − latest arrival"),
    Column("busbw_bytes_per_s", "bytes/s", "Bus bandwidth", "Once all ranks arrived"),
    Column("last_arrival_rank", "count", "Last to arrive"))
STRAGGLER_SPEC = (Column("rank", "count", "Rank"), Column("times_last", "count", "Times last"),
                  Column("mean_arrival_delay_ns", "ns", "Mean arrival delay"),
                  Column("total_wait_caused_ns", "ns", "Wait caused", "Σ skew of the collectives it arrived last at"))
COLLECTIVE_COLUMNS = [c.name for c in COLLECTIVE_SPEC]
ACROSS_COLUMNS = [c.name for c in ACROSS_SPEC]


def collective_time_ns(trace) -> int:
    """The rank's collective time: the union of its collective operations (the collectives table), clipped to
    the analysed span (ns). The one definition used by the summary and the rank balance."""
    cc = trace.table("collectives", ["start_ts", "duration_ns"])
    if not len(cc):
        return 0
    s = cc["start_ts"].to_numpy()
    return union_ns(s, s + cc["duration_ns"].to_numpy(), *analysis_span(trace))


@register("collectives", columns=COLLECTIVE_SPEC, figure="collectives_figure", method="collective_stats")
def collectives(trace) -> pd.DataFrame:
    """One row per collective op of the trace (index = collectives row id), in time order.

    Columns: operation (canonical: all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, send,
    recv, barrier, ...), process_group, sequence_number (-1 unknown), group_size, dtype, start_ts, end_ts (ns),
    duration_ns, size_bytes (max of input and output bytes), algbw_bytes_per_s (size / duration),
    busbw_bytes_per_s (algbw × NCCL bus factor: all_reduce 2(n−1)/n, all_gather / reduce_scatter /
    all_to_all (n−1)/n, others 1), framework_op (host op row, -1 none).
    """
    cc = trace.collectives
    if not len(cc):
        return pd.DataFrame({c: pd.Series(dtype=float) for c in COLLECTIVE_COLUMNS})
    op_cats = cc["operation"].astype("category")
    canon_map = {c: M.normalize_collective_name(c) for c in op_cats.cat.categories}
    op = op_cats.cat.rename_categories(lambda c: canon_map[c]) if len(set(canon_map.values())) == len(canon_map) \
        else op_cats.astype(str).map(canon_map).astype("category")
    size = np.maximum(cc["input_size"].to_numpy(), cc["output_size"].to_numpy()).astype(float)
    dur = cc["duration_ns"].to_numpy()
    n = cc["group_size"].to_numpy()
    algbw = M.algbw_bytes_per_s(size, dur)
    out = pd.DataFrame({"operation": op, "process_group": cc["process_group"],
                        "sequence_number": cc["sequence_number"].to_numpy(), "group_size": n,
                        "dtype": cc["dtype"], "start_ts": cc["start_ts"].to_numpy(),
                        "end_ts": cc["start_ts"].to_numpy() + dur, "duration_ns": dur, "size_bytes": size,
                        "algbw_bytes_per_s": algbw,
                        "busbw_bytes_per_s": M.busbw_bytes_per_s(algbw, np.asarray(op.astype(str)), n),
                        "framework_op": cc["framework_op"].to_numpy()}, index=cc.index)
    return out.sort_values("start_ts", kind="stable")


@register("collectives_across_ranks", columns=ACROSS_SPEC, figure="skew_heatmap", subject="traces")
def collectives_across_ranks(traces: Iterable) -> pd.DataFrame:
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
    """
    parts: list[pd.DataFrame] = []
    runs: set[str] = set()
    for group in group_runs(list(traces)):
        label = run_label(run_key(group[0]))
        label = label if label not in runs else f"{label} #{len(runs) + 1}"
        runs.add(label)
        for t in group:
            c = collectives(t)
            if len(c):
                parts.append(c.assign(rank=t.rank, run_id=label))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in ACROSS_COLUMNS})
    df = pd.concat(parts, ignore_index=True)
    df["process_group"] = df["process_group"].astype(str)
    df["operation"] = df["operation"].astype(str)
    seq = df["sequence_number"].to_numpy().copy()
    missing = seq < 0
    if missing.any():
        nth = df[missing].sort_values("start_ts").groupby(["run_id", "rank", "process_group", "operation"]).cumcount()
        seq[nth.index.to_numpy()] = nth.to_numpy()
    df["sequence_number"] = seq
    df["collective"] = df["process_group"] + "#" + df["sequence_number"].astype(str) + np.where(missing, "?", "")
    if len(runs) > 1:  # several runs in one folder: never match across runs
        df["collective"] = df["run_id"].astype(str) + ":" + df["collective"]
    g = df.groupby("collective", sort=False)
    first = g["start_ts"].transform("min")
    last = g["start_ts"].transform("max")
    df["ranks_seen"] = g["rank"].transform("nunique")
    df["arrival_delay_ns"] = df["start_ts"] - first
    df["arrival_skew_ns"] = last - first
    df["wait_ns"] = last - df["start_ts"]
    df["transfer_ns"] = np.maximum(0, df["end_ts"] - last)
    algbw = M.algbw_bytes_per_s(df["size_bytes"].to_numpy(), df["transfer_ns"].to_numpy())
    df["busbw_bytes_per_s"] = M.busbw_bytes_per_s(algbw, df["operation"].to_numpy(), df["group_size"].to_numpy())
    idx_last = g["start_ts"].idxmax()
    df["last_arrival_rank"] = df["collective"].map(df.loc[idx_last.to_numpy(), ["collective", "rank"]]
                                                   .set_index("collective")["rank"])
    return df[ACROSS_COLUMNS].sort_values(["start_ts", "rank"]).reset_index(drop=True)


@register("straggler_ranks", columns=STRAGGLER_SPEC, subject="frame", method=None, memo=False)
def straggler_ranks(matched: pd.DataFrame) -> pd.DataFrame:
    """Per rank, from :func:`collectives_across_ranks`: times_last (collectives where the rank arrived
    last, among those seen by ≥ 2 ranks), mean_arrival_delay_ns, total_wait_caused_ns (Σ skew of the
    collectives it arrived last at), sorted with the worst straggler first."""
    m = matched[matched["ranks_seen"] >= 2]
    if not len(m):
        return pd.DataFrame(columns=["rank", "times_last", "mean_arrival_delay_ns", "total_wait_caused_ns"])
    per = m.groupby("rank").agg(mean_arrival_delay_ns=("arrival_delay_ns", "mean")).reset_index()
    lastrows = m[m["rank"] == m["last_arrival_rank"]].drop_duplicates("collective")
    agg = lastrows.groupby("rank").agg(times_last=("collective", "size"),
                                       total_wait_caused_ns=("arrival_skew_ns", "sum"))
    per = per.merge(agg, on="rank", how="left").fillna({"times_last": 0, "total_wait_caused_ns": 0})
    per["times_last"] = per["times_last"].astype("int64")
    return per[["rank", "times_last", "mean_arrival_delay_ns", "total_wait_caused_ns"]].sort_values(
        ["total_wait_caused_ns", "times_last"], ascending=False).reset_index(drop=True)


@register("collective_skew_matrix", subject="frame", method=None, memo=False, figure="skew_heatmap")
def collective_skew_matrix(matched: pd.DataFrame, value: str = "arrival_delay_ns") -> pd.DataFrame:
    """Heatmap data from :func:`collectives_across_ranks`: index = collective (time order), columns =
    rank, values = ``value`` (default arrival_delay_ns; also wait_ns, transfer_ns, duration_ns)."""
    if value not in matched.columns:
        raise ValueError(f"unknown value {value!r}; valid: {', '.join(matched.columns)}")
    if not len(matched):
        return pd.DataFrame()
    order = matched.groupby("collective", sort=False)["start_ts"].min().sort_values().index
    return matched.pivot_table(index="collective", columns="rank", values=value, aggfunc="first").reindex(order)
