"""``recommendations``: ranked, rule-based insights with evidence, time range, estimated saving, action.

Neuron Explorer's rules and thresholds (``neuron-explorer-data-model.md`` §7.3): model-FLOP share < 50%
of active FLOPs, transpose FLOPs > 10% of hardware FLOPs, spill-reload bytes > 25% of HBM reads,
average DMA size < 32 KiB, collectives slower than their group median, throttling. Ours: host-bound idle
gaps, FP32 matmuls, exposed (non-overlapped) collectives, low Tensor-engine / matrix utilisation.
Each rule is one vectorised function ``(trace, ctx) -> list[dict]``.

**Savings never add up to more than the time they come from.** Each rule names the time its saving comes
from (``time_pool``): device ``idle`` time, ``compute``, ``memory`` (DMA / memcpy) or ``communication``
time (the unions of the device activity of that kind in the analysed span). Findings are taken largest
estimate first and each draws on what is left of its pool and of the device's busy time (or idle time), so the
estimates of one pool never exceed that pool and all of them together never exceed the analysed span; an
estimate cut this way says so in its evidence. Cross-rank findings (stragglers) are
:func:`analysis.run_recommendations`.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from .. import metrics as M
from ..core.categorical import cat_values, cat_where
from ..core.intervals import union_ns
from ..core.tables import MATRIX_ENGINES
from ..registry import Column, register
from .activity import (
    COMMUNICATION,
    COMPUTATION,
    MEMORY,
    analysis_span,
    kernel_type_mask,
    merged_activity,
    trace_activity,
)
from .breakdown import comm_comp_overlap
from .collectives import collectives as collectives_table
from .roofline import roofline
from .summary import primary_device, summary_dict
from .work import instruction_work

REC_SPEC = (
    Column("rule", "", "Rule"), Column("severity", "", "Severity", "high >= 10% of the span saved, medium >= 2%"),
    Column("title", "", "Finding"), Column("evidence", "", "Evidence"),
    Column("start_ts", "ns", "From", "-1 when not tied to a range"), Column("end_ts", "ns", "To"),
    Column("event_rows", "", "Events", "Up to 100 row ids in event_table"),
    Column("est_time_saved_ns", "ns", "Estimated saving", "Upper-bound estimate within its time pool; NaN unknown"),
    Column("action", "", "What to change"), Column("event_table", "", "Event table"),
    Column("time_pool", "", "Saving comes from", "idle, compute, memory or communication time"))
REC_COLUMNS = [c.name for c in REC_SPEC]
MAX_EVENT_ROWS = 100

# thresholds
MODEL_FLOP_SHARE_MIN = 0.50
TRANSPOSE_SHARE_MAX = 0.10
SPILL_RELOAD_SHARE_MAX = 0.25
COLLECTIVE_OUTLIER_FACTOR = 2.0
HOST_GAP_MIN_NS = 10_000
HOST_GAP_SHARE = 0.05
EXPOSED_COMM_SHARE = 0.05
LOW_MFU_PCT = 30.0


def _rec(rule, title, evidence, action, saved, rows=None, table="", lo=None, hi=None, pool="compute"):
    rows = [] if rows is None else [int(r) for r in list(rows)[:MAX_EVENT_ROWS]]
    return {"rule": rule, "title": title, "evidence": evidence, "action": action,
            "est_time_saved_ns": float(saved) if saved is not None else math.nan,
            "event_rows": rows, "event_table": table, "time_pool": pool,
            "start_ts": int(lo) if lo is not None else -1, "end_ts": int(hi) if hi is not None else -1}


def _span_of(df: pd.DataFrame) -> tuple[int | None, int | None]:
    if not len(df):
        return None, None
    s = df["start_ts"].to_numpy()
    return int(s.min()), int((s + df["duration_ns"].to_numpy()).max())


def _busy(df: pd.DataFrame) -> float:
    """Union of a set of rows (start_ts, duration_ns), ns."""
    s = df["start_ts"].to_numpy()
    return float(union_ns(s, s + df["duration_ns"].to_numpy()))


def _flop_share_rules(trace, ctx):
    w = ctx["work"]
    out: list[dict] = []
    tens = w[["hardware_flops", "flops", "transpose_flops", "start_ts", "duration_ns"]][  # only what is read
        cat_values(w["engine"], MATRIX_ENGINES)]
    if not len(tens):
        return out
    hw = float(tens["hardware_flops"].sum())
    model = float(tens["flops"].sum())
    tr = float(tens["transpose_flops"].sum())
    busy = _busy(tens)
    if hw > 0 and model / hw < MODEL_FLOP_SHARE_MIN:
        out.append(_rec("low_model_flop_share", "Less than half of the Tensor engine's FLOPs are model FLOPs",
                        f"model FLOPs {model:.3g} = {100 * model / hw:.1f}% of active FLOPs {hw:.3g} (target ≥ 50%)",
                        "Avoid layout transposes and padding on the Tensor engine (pre-transpose weights, pick "
                        "shapes that are multiples of 128).", busy * (1 - model / hw),
                        tens.index[tens["transpose_flops"].to_numpy() > 0], "instructions", *_span_of(tens)))
    if hw > 0 and tr / hw > TRANSPOSE_SHARE_MAX:
        trows = tens[tens["transpose_flops"].to_numpy() > 0]
        out.append(_rec("transpose_overhead", "Transposes take more than 10% of hardware FLOPs",
                        f"transpose FLOPs {tr:.3g} = {100 * tr / hw:.1f}% of hardware FLOPs (threshold 10%)",
                        "Keep tensors in the layout the matmul needs (contraction dim on partitions); fuse or "
                        "hoist transposes out of loops.", _busy(trows),
                        trows.sort_values("duration_ns", ascending=False).index, "instructions", *_span_of(trows)))
    return out


def _spill_rule(trace, ctx):
    dma = trace.table("dma", ["track", "start_ts", "duration_ns", "transfer_bytes", "variable"])
    if not len(dma):
        return []
    tr = trace.whole_table("tracks", ["name"])
    spill_tracks = tr.index[cat_where(tr["name"], lambda s: "spillreload" in s.lower())] if len(tr) else []
    reload = np.isin(dma["track"].to_numpy(), np.asarray(spill_tracks))
    reload |= cat_where(dma["variable"], lambda s: "spill_reload" in s.lower())
    if not reload.any():
        return []
    rb = float(dma["transfer_bytes"].to_numpy()[reload].sum())
    hbm_r = ctx["summary"].get("hbm_read_bytes", math.nan)
    if not (hbm_r > 0) or rb / hbm_r <= SPILL_RELOAD_SHARE_MAX:
        return []
    rows = dma[reload]
    return [_rec("spilling", "SBUF spilling: spill reloads exceed 25% of HBM reads",
                 f"spill-reload bytes {rb:.3g} = {100 * rb / hbm_r:.1f}% of HBM reads (threshold 25%)",
                 "Reduce live tensor size per tile (smaller tiles, recompute) so activations stay in SBUF.",
                 _busy(rows), rows.index, "dma", *_span_of(rows), pool="memory")]


def _small_dma_rule(trace, ctx):
    dma = trace.table("dma", ["start_ts", "duration_ns", "transfer_bytes"])
    if not len(dma):
        return []
    sz = dma["transfer_bytes"].to_numpy().astype(float)
    avg = sz.mean()
    small = sz < M.EFFICIENT_DMA_BYTES
    if avg >= M.EFFICIENT_DMA_BYTES:
        return []
    d = dma["duration_ns"].to_numpy().astype(float)
    big_bw = M.rate_per_s(sz[~small].sum(), d[~small].sum()) if (~small).any() else math.nan
    rows = dma[small]
    t_small = _busy(rows)
    saved = (t_small - sz[small].sum() * M.NS_PER_S / big_bw) if np.isfinite(big_bw) else 0.5 * t_small
    return [_rec("small_dma", "Small DMA transfers (average below 32 KiB)",
                 f"average DMA size {avg:.0f} B (target ≥ {M.EFFICIENT_DMA_BYTES} B); {100 * small.mean():.1f}% of "
                 f"{len(dma)} transfers are smaller; estimate is DMA-queue time",
                 "Batch transfers: larger tiles, ≥ 2 KiB contiguous per partition, coalesce small tensors.",
                 min(max(0.0, saved), t_small), rows.sort_values("duration_ns", ascending=False).index, "dma",
                 *_span_of(rows), pool="memory")]


def _collective_outlier_rule(trace, ctx):
    c = collectives_table(trace)
    if len(c) < 3:
        return []
    key = c["operation"].astype(str) + "|" + c["process_group"].astype(str) + "|" + c["size_bytes"].astype(str)
    med = c.groupby(key.to_numpy())["duration_ns"].transform("median").to_numpy()
    n = c.groupby(key.to_numpy())["duration_ns"].transform("size").to_numpy()
    d = c["duration_ns"].to_numpy()
    out_m = (n >= 3) & (d > COLLECTIVE_OUTLIER_FACTOR * med)
    if not out_m.any():
        return []
    rows = c[out_m]
    excess = float((d[out_m] - med[out_m]).sum())
    return [_rec("collective_outliers", f"{int(out_m.sum())} collectives took over 2× their group median",
                 f"outliers vs the median of the same (operation, group, size); excess {excess / 1e3:.1f} µs",
                 "Look for stragglers (analysis.run_recommendations, analysis.collectives_across_ranks) and host "
                 "delays before these collectives.", excess, rows.sort_values("duration_ns", ascending=False).index,
                 "collectives", int(rows["start_ts"].min()), int(rows["end_ts"].max()), pool="communication")]


def _throttling_rule(trace, ctx):
    tr = trace.whole_table("tracks", ["name"])
    cnt = trace.table("counters", ["track", "ts", "value"])
    if not len(tr) or not len(cnt):
        return []
    th = tr.index[cat_where(tr["name"], lambda s: "throttl" in s.lower())]
    rows = cnt[cnt["track"].isin(th)]
    if not len(rows) or not (rows["value"].to_numpy() > 0).any():
        return []
    ts = rows["ts"].to_numpy()
    v = rows["value"].to_numpy()
    order = np.argsort(ts, kind="stable")
    ts, v = ts[order], v[order]
    nxt = np.append(ts[1:], ts[-1])
    active = float(((nxt - ts) * (v > 0)).sum())
    on = ts[v > 0]
    return [_rec("throttling", "Tensor-engine throttling is active",
                 f"throttling counter > 0 for {active / 1e3:.1f} µs", "Keep the Tensor engine continuously fed "
                 "(dI/dt throttling re-engages after ~3 µs below 50% utilisation); avoid bursty matmul phases.",
                 math.nan, rows.index[order][v > 0], "counters", int(on.min()), int(on.max()))]


#: host op names that only a torch.compile'd run records
_COMPILED_MARKERS = ("TorchDynamo Cache Lookup", "Torch-Compiled Region", "## Call CompiledFxGraph", "CompiledFunction",
                     "entire_frame_compile")


def _compiled(trace) -> bool:
    """True when the trace was taken of a torch.compile'd program (dynamo / inductor host ops)."""
    ho = trace.whole_table("host_ops", ["name"])
    if not len(ho):
        return False
    names = pd.Series(ho["name"].astype("category").cat.categories.astype(str))
    return bool(names.str.startswith(_COMPILED_MARKERS).any())


def _host_gap_rule(trace, ctx):
    ms, me = ctx["merged"]
    if len(ms) < 2:
        return []
    lo, hi = ctx["span"]
    gs, ge = me[:-1], ms[1:]
    big = (ge - gs) >= HOST_GAP_MIN_NS
    total_gap = float((ge - gs)[big].sum())
    if not big.any() or total_gap < HOST_GAP_SHARE * (hi - lo):
        return []
    top = int(np.argmax(np.where(big, ge - gs, -1)))
    return [_rec("host_bound_gaps", f"Device idle in {int(big.sum())} gaps ≥ 10 µs "
                 f"({100 * total_gap / (hi - lo):.1f}% of the time)",
                 f"idle gaps total {total_gap / 1e3:.1f} µs; longest {int(ge[top] - gs[top]) / 1e3:.1f} µs at "
                 f"{(int(gs[top]) - int(trace.time_range[0])) / 1e6:.3f} ms from the trace start; see "
                 "analysis.idle_time_breakdown for host vs device wait",
                 ("The run already uses torch.compile: remove graph breaks (torch._dynamo.explain), capture "
                  "the step in CUDA graphs (mode='reduce-overhead'), " if _compiled(trace) else
                  "Reduce host overhead between launches: capture larger graphs (torch.compile / XLA), ")
                 + "overlap data loading, avoid host syncs (.item(), prints) inside the step.",
                 total_gap, [], "", int(gs[top]), int(ge[top]), pool="idle")]


def _fp32_rule(trace, ctx):
    w = ctx["work"]
    m = w["is_matmul"].to_numpy() & cat_values(w["dtype"], ["float32"])
    if not m.any():
        return []
    rows = w[["start_ts", "duration_ns"]][m]  # only what is read
    t = _busy(rows)
    _, peaks, _ = primary_device(trace, w)
    ratio = math.nan
    if peaks is not None:
        ratio = peaks.matrix_peak("float32") / peaks.matrix_peak()
    kind = peaks.kind if peaks is not None else ""
    if not np.isfinite(ratio) and M.adjusted_flops_multiplier("float32", kind) != 1.0:  # Neuron table
        ratio = 1.0 / M.adjusted_flops_multiplier("float32", kind)
    saved = t * (1 - ratio) if np.isfinite(ratio) else math.nan
    return [_rec("fp32_matmuls", "Matmuls run in FP32",
                 f"{int(m.sum())} FP32 matmul rows busy {t / 1e3:.1f} µs; "
                 + (f"FP32 (or TF32) peak is {ratio:.2f}× the BF16 peak" if np.isfinite(ratio) else
                    "device peaks unknown"),
                 "Run matmuls in BF16 (autocast / model.to(torch.bfloat16)); keep FP32 master weights if needed.",
                 max(0.0, saved) if np.isfinite(saved) else saved,
                 rows.sort_values("duration_ns", ascending=False).index, "instructions", *_span_of(rows))]


def _exposed_comm_rule(trace, ctx):
    ov = comm_comp_overlap(trace).iloc[0]
    exposed = float(ov["comm_time_ns"] - ov["overlap_time_ns"])
    lo, hi = ctx["span"]
    if exposed <= 0 or exposed < EXPOSED_COMM_SHARE * (hi - lo):
        return []
    act = ctx["activity"]
    comm = act[kernel_type_mask(act, COMMUNICATION)]
    table = "collectives" if (comm["table"].to_numpy() == 2).any() else "instructions"
    ids = comm.index.to_numpy()
    rows = -1 - ids[ids < 0] if table == "collectives" else ids[ids >= 0]
    return [_rec("exposed_collectives", "Collectives are not hidden behind compute",
                 f"{exposed / 1e3:.1f} µs of communication ({100 * exposed / (hi - lo):.1f}% of the span) "
                 f"has no concurrent compute (analysis.comm_comp_overlap)", "Overlap communication with compute: "
                 "bucketed / async gradient all-reduce, prefetch all-gathers (FSDP), reorder independent work.",
                 exposed, rows, table, int(comm["start_ts"].min()), int(comm["end_ts"].max()),
                 pool="communication")]


def _low_matrix_util_rule(trace, ctx):
    mfu = ctx["summary"].get("mfu_estimated_percent", math.nan)
    w = ctx["work"]
    if not w["is_matmul"].any() or not np.isfinite(mfu) or mfu >= LOW_MFU_PCT:
        return []
    r = roofline(trace)
    op = w["op"].array  # the ops of matrix rows, from a count per op code (no copy of the rows)
    used = np.bincount(np.asarray(op.codes)[w["is_matmul"].to_numpy()] + 1, minlength=len(op.categories) + 1)[1:]
    mmops = set(op.categories[used > 0].astype(str))
    r = r[r["op"].isin(mmops) & r["time_saved_at_roof_ns"].notna()]
    saved = float(r["time_saved_at_roof_ns"].sum()) if len(r) else math.nan
    worst = r.iloc[0]["op"] if len(r) else "?"
    return [_rec("low_tensor_utilization", f"Low matrix-engine utilisation (MFU {mfu:.1f}%)",
                 f"MFU {mfu:.1f}% < {LOW_MFU_PCT:.0f}%; matmul ops could save {saved / 1e3:.1f} µs at the roof; "
                 f"worst: {worst}", "Use larger, 128-aligned matmul tiles and BF16; fuse small matmuls; check "
                 "the roofline for memory-bound matmuls.", saved, [], "", *ctx["span"])]


RULES = (_flop_share_rules, _spill_rule, _small_dma_rule, _collective_outlier_rule, _throttling_rule,
         _host_gap_rule, _fp32_rule, _exposed_comm_rule, _low_matrix_util_rule)


def time_pools(trace) -> dict[str, float]:
    """The time each kind of saving can come from (ns, within the analysed span): ``idle`` (no device
    activity), ``busy`` (any), ``compute``, ``memory``, ``communication`` (unions of that kernel type), ``span``."""
    lo, hi = analysis_span(trace)

    def length(ktype: str | None) -> float:
        s, e = merged_activity(trace, ktype)
        return float((e - s).sum())

    busy = length(None)
    pools = {"span": float(hi - lo), "busy": busy, "idle": float(max(hi - lo - busy, 0))}
    for name, ktype in (("compute", COMPUTATION), ("memory", MEMORY), ("communication", COMMUNICATION)):
        pools[name] = length(ktype)
    return pools


def allocate(df: pd.DataFrame, pools: dict[str, float]) -> pd.DataFrame:
    """Cap the estimates (largest first) so that each pool, the busy (or idle) time and the span are never
    overdrawn; capped rows say so in their evidence."""
    left = dict(pools)
    saved = df["est_time_saved_ns"].to_numpy(dtype=float).copy()
    evidence = df["evidence"].to_numpy(dtype=object).copy()
    for i in np.argsort(-np.nan_to_num(saved, nan=-1.0), kind="stable"):
        if not np.isfinite(saved[i]):
            continue
        pool = df["time_pool"].iloc[i]
        parent = "idle" if pool == "idle" else "busy"
        cap = min(left.get(pool, 0.0), left[parent], left["span"])
        if saved[i] > cap:
            evidence[i] += (f" (estimate {saved[i] / 1e3:.1f} µs capped to the {cap / 1e3:.1f} µs of {pool} time not "
                            "already claimed by larger findings)")
            saved[i] = cap
        for k in {pool, parent, "span"}:
            left[k] = left.get(k, 0.0) - saved[i]
    out = df.copy()
    out["est_time_saved_ns"], out["evidence"] = saved, evidence
    return out


@register("recommendations", columns=REC_SPEC, figure="recommendations_figure")
def recommendations(trace) -> pd.DataFrame:
    """Ranked insights (largest estimated saving first; rules without an estimate last).

    Columns: rule (id), severity ("high" ≥ 10% of total_time saved, "medium" ≥ 2%, else "low"), title,
    evidence (numbers behind the finding), start_ts, end_ts (ns; -1 when not tied to a range),
    event_rows (list of up to 100 row ids in ``event_table``), est_time_saved_ns (ns, upper-bound estimate
    within its time pool, NaN unknown), action (what to change), event_table (table of event_rows, '' none),
    time_pool (where the saving comes from: idle, compute, memory or communication time; see the module doc).
    """
    act = trace_activity(trace)
    ctx = {"work": instruction_work(trace), "summary": summary_dict(trace), "span": analysis_span(trace),
           "activity": act,
           "merged": merged_activity(trace)}
    total = max(1, ctx["span"][1] - ctx["span"][0])
    recs = [r for rule in RULES for r in rule(trace, ctx)]
    df = pd.DataFrame(recs, columns=[c for c in REC_COLUMNS if c != "severity"])
    df = allocate(df, time_pools(trace)) if len(df) else df
    share = df["est_time_saved_ns"].to_numpy(dtype=float) / total
    df["severity"] = np.where(share >= 0.10, "high", np.where(share >= 0.02, "medium", "low"))
    if "throttling" in set(df["rule"]):
        df.loc[df["rule"] == "throttling", "severity"] = "medium"
    df = df.sort_values("est_time_saved_ns", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
    return df[REC_COLUMNS]
