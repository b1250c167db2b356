"""DMA: throughput over time, per-queue utilisation, transfer-size histogram."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.intervals import union_ns
from ..registry import Column, register
from .activity import analysis_span

THROUGHPUT_SPEC = (Column("bin_start_ts", "ns", "Bin start"), Column("bin_end_ts", "ns", "Bin end"),
                   Column("bytes", "bytes", "Bytes"), Column("throughput_bytes_per_s", "bytes/s", "Throughput"))
QUEUE_SPEC = (Column("queue", "", "Queue"), Column("queue_type", "", "Queue type"),
              Column("transfers", "count", "Transfers"), Column("bytes", "bytes", "Bytes"),
              Column("busy_ns", "ns", "Busy", "Union of the queue's transfers"),
              Column("utilization_percent", "percent", "Utilisation", "busy / total_time"),
              Column("achieved_bandwidth_bytes_per_s", "bytes/s", "Achieved bandwidth", "bytes / busy"),
              Column("average_bytes", "bytes", "Transfer size (mean)"),
              Column("small_transfer_percent", "percent", "Small transfers", "Share below 32768 B"))
SIZE_SPEC = (Column("bucket_low_bytes", "bytes", "From"), Column("bucket_high_bytes", "bytes", "To"),
             Column("transfers", "count", "Transfers"), Column("bytes", "bytes", "Bytes"),
             Column("below_efficient", "", "Below 32 KiB"))
THROUGHPUT_COLUMNS = [c.name for c in THROUGHPUT_SPEC]
QUEUE_COLUMNS = [c.name for c in QUEUE_SPEC]
SIZE_COLUMNS = [c.name for c in SIZE_SPEC]


def _queue_names(trace, dma: pd.DataFrame) -> pd.Series:
    tr = trace.whole_table("tracks", ["name"])
    if not len(tr):
        return pd.Series("", index=dma.index)
    names = tr["name"].astype(str)
    return pd.Series(names.reindex(dma["track"].to_numpy()).fillna("").to_numpy(), index=dma.index)


def _binned_bytes(start: np.ndarray, dur: np.ndarray, nbytes: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Bytes per bin, each transfer spread uniformly over [start, start + max(dur, 1)). Vectorised and exact
    up to float rounding of each transfer's own share (no large cumulative sums)."""
    nb = len(edges) - 1
    s = start.astype(np.int64)
    d = np.maximum(dur, 1).astype(np.int64)
    e = s + d
    r = nbytes.astype(float) / d
    b0 = np.clip(np.searchsorted(edges, s, side="right") - 1, 0, nb - 1)
    b1 = np.clip(np.searchsorted(edges, e, side="left") - 1, 0, nb - 1)
    out = np.zeros(nb)
    same = b0 == b1
    np.add.at(out, b0[same], nbytes[same].astype(float))
    sp = ~same
    if sp.any():
        s0, e0, r0, f, last = s[sp], e[sp], r[sp], b0[sp], b1[sp]
        np.add.at(out, f, r0 * (edges[f + 1] - s0))
        np.add.at(out, last, r0 * (e0 - edges[last]))
        diff = np.zeros(nb + 1)
        np.add.at(diff, f + 1, r0)
        np.add.at(diff, last, -r0)
        out += np.cumsum(diff[:nb]) * np.diff(edges)
    return out


@register("dma_throughput", columns=THROUGHPUT_SPEC, figure="dma_throughput_figure")
def dma_throughput(trace, bins: int = 200, by: str | None = None) -> pd.DataFrame:
    """DMA bytes per time bin over the analysed span (transfers spread uniformly over their duration; in a
    window, the parts outside it are dropped).

    Columns: bin_start_ts, bin_end_ts (ns), bytes, throughput_bytes_per_s; with ``by`` ("queue_type" or
    "queue") a leading column of that name and one block of bins per value. Empty (same columns) when the
    trace has neither DMA rows nor a time span.
    """
    if by not in (None, "queue_type", "queue"):
        raise ValueError(f"unknown grouping {by!r}; valid: None, 'queue_type', 'queue'")
    if bins < 1:
        raise ValueError(f"bins must be >= 1, got {bins}")
    dma = trace.dma
    lo, hi = analysis_span(trace)
    if len(dma) and trace.window_bounds is None:
        s = dma["start_ts"].to_numpy()
        lo, hi = min(lo, int(s.min())), max(hi, int((s + np.maximum(dma["duration_ns"].to_numpy(), 1)).max()))
    if hi <= lo and not len(dma):  # empty trace: no span to bin
        return pd.DataFrame({c: pd.Series(dtype=np.int64 if c.endswith("_ts") else float) for c in THROUGHPUT_COLUMNS}
                            if by is None else {c: [] for c in [by] + THROUGHPUT_COLUMNS})
    edges = lo + np.round(np.linspace(0, max(hi - lo, 1), bins + 1)).astype(np.int64)
    width = np.diff(edges)

    def one(d: pd.DataFrame) -> pd.DataFrame:
        if len(d):
            b = _binned_bytes(d["start_ts"].to_numpy(), d["duration_ns"].to_numpy(),
                              d["transfer_bytes"].to_numpy(), edges)
        else:
            b = np.zeros(bins)
        return pd.DataFrame({"bin_start_ts": edges[:-1], "bin_end_ts": edges[1:],
                             "bytes": b, "throughput_bytes_per_s": M.rate_per_s(b, width)})

    if by is None:
        return one(dma)
    key = dma["queue_type"].astype(str) if by == "queue_type" else _queue_names(trace, dma)
    parts = [one(d).assign(**{by: k}) for k, d in dma.groupby(key.to_numpy())]
    if not parts:
        return pd.DataFrame(columns=[by] + THROUGHPUT_COLUMNS)
    out = pd.concat(parts, ignore_index=True)
    return out[[by] + THROUGHPUT_COLUMNS]


@register("dma_queues", columns=QUEUE_SPEC, figure="dma_queues_figure")
def dma_queues(trace) -> pd.DataFrame:
    """Per DMA queue (track name, e.g. qSyncIO0). Columns: queue, queue_type (most frequent), transfers,
    bytes, busy_ns (union of its transfers), utilization_percent (busy / total_time),
    achieved_bandwidth_bytes_per_s (bytes / busy), average_bytes, small_transfer_percent (share of transfers
    < 32768 B). Sorted by bytes, descending."""
    dma = trace.dma
    if not len(dma):
        return pd.DataFrame(columns=QUEUE_COLUMNS)
    lo, hi = analysis_span(trace)
    total = hi - lo
    q = _queue_names(trace, dma)
    rows = []
    for name, d in dma.groupby(q.to_numpy()):  # one iteration per queue
        s = d["start_ts"].to_numpy()
        sz = d["transfer_bytes"].to_numpy()
        busy = union_ns(s, s + d["duration_ns"].to_numpy())
        qt = d["queue_type"].astype(str).mode()
        rows.append((name, qt.iloc[0] if len(qt) else "", len(d), int(sz.sum()), busy,
                     M._div(100.0 * busy, total), M.rate_per_s(sz.sum(), busy), sz.mean(),
                     100.0 * (sz < M.EFFICIENT_DMA_BYTES).mean()))
    return pd.DataFrame(rows, columns=QUEUE_COLUMNS).sort_values("bytes", ascending=False).reset_index(drop=True)


@register("dma_sizes", columns=SIZE_SPEC, figure="dma_sizes_figure")
def dma_sizes(trace) -> pd.DataFrame:
    """Histogram of DMA transfer sizes in power-of-two buckets [low, high). Columns: bucket_low_bytes,
    bucket_high_bytes, transfers, bytes, below_efficient (bucket entirely below Neuron Explorer's efficient
    size, 32768 B). Only non-empty buckets."""
    dma = trace.dma
    if not len(dma):
        return pd.DataFrame(columns=SIZE_COLUMNS)
    sz = dma["transfer_bytes"].to_numpy().astype(np.int64)
    b = np.where(sz > 0, np.floor(np.log2(np.maximum(sz, 1))).astype(np.int64) + 1, 0)
    cnt = np.bincount(b)
    tot = np.bincount(b, weights=sz)
    k = np.nonzero(cnt)[0]
    low = np.where(k == 0, 0, 2 ** np.maximum(k - 1, 0))
    high = np.where(k == 0, 1, 2 ** k)
    return pd.DataFrame({"bucket_low_bytes": low.astype(np.int64), "bucket_high_bytes": high.astype(np.int64),
                         "transfers": cnt[k], "bytes": tot[k], "below_efficient": high <= M.EFFICIENT_DMA_BYTES})
