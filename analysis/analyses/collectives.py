"""Collectives: per-op bandwidth, and the same collective matched across ranks (skew, wait, stragglers)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.intervals import union_ns
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
    the analysed span (ns); in a Kineto import, whose collectives table holds the host-side calls, the union of
    its collective kernels (COMMUNICATION device activity: NCCL / RCCL, symmetric memory, MSCCL++, ...). The
    one definition used by the summary and the rank balance."""
    if trace.is_kineto_import:
        from .activity import COMMUNICATION, kernel_type_mask, trace_activity

        act = trace_activity(trace)
        m = kernel_type_mask(act, COMMUNICATION)
        if not m.any():
            return 0
        return union_ns(act["start_ts"].to_numpy()[m], act["end_ts"].to_numpy()[m], *analysis_span(trace))
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


#: columns of a rank's part of :func:`match_collectives` (:func:`rank_collectives`)
RANK_COLLECTIVE_COLUMNS = ["operation", "process_group", "sequence_number", "group_size", "start_ts", "end_ts",
                           "duration_ns", "size_bytes", "rank", "run_id"]


def rank_collectives(trace, run: str) -> pd.DataFrame:
    """One rank's part of :func:`collectives_across_ranks`: its collectives (:func:`collectives`) with the
    columns the matching reads, ``rank`` and ``run_id`` (the run's label)."""
    c = collectives(trace)
    if not len(c):
        return pd.DataFrame({k: pd.Series(dtype=object if k in ("operation", "process_group", "run_id")
                                          else "int64") for k in RANK_COLLECTIVE_COLUMNS})
    return c.assign(rank=trace.rank, run_id=run, operation=c["operation"].astype(str),
                    process_group=c["process_group"].astype(str))[RANK_COLLECTIVE_COLUMNS].reset_index(drop=True)


def match_collectives(parts: list[pd.DataFrame], *, multi_run: bool = False) -> pd.DataFrame:
    """:func:`collectives_across_ranks` from the ranks' parts (:func:`rank_collectives`, in trace order);
    ``multi_run``: several runs are matched, so ``collective`` is prefixed with the run."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=float) for c in ACROSS_COLUMNS})
    df = pd.concat(parts, ignore_index=True)
    seq = df["sequence_number"].to_numpy().copy()
    missing = seq < 0
    if missing.any():
        nth = df[missing].sort_values("start_ts").groupby(["run_id", "rank", "process_group", "operation"]).cumcount()
        seq[nth.index.to_numpy()] = nth.to_numpy()
    df["sequence_number"] = seq
    df["collective"] = df["process_group"] + "#" + df["sequence_number"].astype(str) + np.where(missing, "?", "")
    if multi_run:  # several runs in one folder: never match across runs
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
    last, among those seen by ≥ 2 ranks with a skew above 0), mean_arrival_delay_ns, total_wait_caused_ns (Σ skew of the
    collectives it arrived last at), sorted with the worst straggler first."""
    m = matched[matched["ranks_seen"] >= 2]
    if not len(m):
        return pd.DataFrame(columns=["rank", "times_last", "mean_arrival_delay_ns", "total_wait_caused_ns"])
    per = m.groupby("rank").agg(mean_arrival_delay_ns=("arrival_delay_ns", "mean")).reset_index()
    # a collective every member reached at once (skew 0) has no straggler: it counts for nobody
    lastrows = m[(m["rank"] == m["last_arrival_rank"]) & (m["arrival_skew_ns"] > 0)].drop_duplicates("collective")
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


SLOW_LINK_SPEC = (
    Column("run", "", "Run"), Column("process_group", "", "Process group"),
    Column("ranks", "", "Ranks", "Member ranks seen, comma-separated"),
    Column("operation", "", "Operation"), Column("group_size", "count", "Group size"),
    Column("size_bytes", "bytes", "Message size"), Column("collectives", "count", "Collectives"),
    Column("transfer_median_ns", "ns", "Transfer (median)", "End − latest arrival, median over its collectives"),
    Column("busbw_median_bytes_per_s", "bytes/s", "Bus bandwidth (median)"),
    Column("peer_groups", "count", "Comparable groups",
           "Other groups of the run with the same operation, group size and message size"),
    Column("peer_transfer_median_ns", "ns", "Comparable transfer (median)",
           "Median of the comparable groups' medians (NaN without any)"),
    Column("slowdown_vs_peers", "", "Slowdown vs comparable", "transfer_median_ns / peer_transfer_median_ns"),
    Column("excess_transfer_ns", "ns", "Excess transfer", "Σ over its collectives of transfer − comparable median"),
    Column("slow_link", "", "Slow link", "slowdown_vs_peers ≥ SLOW_LINK_RATIO"))
SLOW_LINK_COLUMNS = [c.name for c in SLOW_LINK_SPEC]
#: a process group is a slow link when its transfers take this many times those of comparable groups
SLOW_LINK_RATIO = 1.5


def slow_link_groups(matched: pd.DataFrame) -> pd.DataFrame:
    """Per (process group, operation, group size, message size) of one run's :func:`collectives_across_ranks`:
    the median transfer time once all members arrived, against the other groups doing the same collective
    (a slow link slows every collective of the groups that use it). Columns: those of ``SLOW_LINK_SPEC``
    but ``run``; sorted slowest first. A group without comparable groups has NaN ratios and is not flagged."""
    cols = [c for c in SLOW_LINK_COLUMNS if c != "run"]
    if not len(matched):
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("process_group", "ranks", "operation") else
                                          bool if c == "slow_link" else float) for c in cols})
    per_coll = matched.groupby("collective", sort=False).agg(
        process_group=("process_group", "first"), operation=("operation", "first"),
        group_size=("ranks_seen", "max"), size_bytes=("size_bytes", "max"), transfer_ns=("transfer_ns", "max"),
        busbw=("busbw_bytes_per_s", "min"))
    key = ["process_group", "operation", "group_size", "size_bytes"]
    g = per_coll.groupby(key, sort=True)
    out = g.agg(collectives=("transfer_ns", "size"), transfer_median_ns=("transfer_ns", "median"),
                busbw_median_bytes_per_s=("busbw", "median"), transfer_sum=("transfer_ns", "sum")).reset_index()
    members = matched.groupby("process_group")["rank"].agg(lambda r: ",".join(map(str, sorted(set(map(int, r))))))
    out["ranks"] = out["process_group"].map(members)
    peer_n, peer_med = [], []
    for row in out.itertuples(index=False):
        same = out[(out["operation"] == row.operation) & (out["group_size"] == row.group_size)
                   & (out["size_bytes"] == row.size_bytes) & (out["process_group"] != row.process_group)]
        peer_n.append(len(same))
        peer_med.append(float(same["transfer_median_ns"].median()) if len(same) else np.nan)
    out["peer_groups"] = peer_n
    out["peer_transfer_median_ns"] = peer_med
    ratio = out["transfer_median_ns"] / out["peer_transfer_median_ns"].where(out["peer_transfer_median_ns"] > 0)
    out["slowdown_vs_peers"] = ratio
    excess = out["transfer_sum"] - out["collectives"] * out["peer_transfer_median_ns"]
    out["excess_transfer_ns"] = np.maximum(0.0, excess).where(out["peer_groups"] > 0, np.nan)
    out["slow_link"] = (ratio >= SLOW_LINK_RATIO).fillna(False).astype(bool)
    return out[cols].sort_values(["slowdown_vs_peers", "process_group"], ascending=[False, True],
                                 na_position="last", kind="stable").reset_index(drop=True)
