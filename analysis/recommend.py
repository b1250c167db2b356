"""``recommendations``: ranked, rule-based insights with evidence, time range, estimated saving, action.

Neuron Explorer's rules and thresholds (``neuron-explorer-data-model.md`` §7.3): model-FLOP share < 50%
of active FLOPs, transpose FLOPs > 10% of hardware FLOPs, spill-reload bytes > 25% of HBM reads,
average DMA size < 32 KiB, collectives slower than their group median, throttling. Ours: host-bound idle
gaps, FP32 matmuls, exposed (non-overlapped) collectives, low Tensor-engine / matrix utilisation.
Each rule is one vectorised function ``(trace, ctx) -> list[dict]``.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from . import metrics as M
from .collectives import collectives as collectives_table
from .flops import MATRIX_ENGINES, cat_values, cat_where, instruction_work
from .roofline import roofline
from .summary import analysis_span, primary_device, summary_dict, union_ns

REC_COLUMNS = ["rule", "severity", "title", "evidence", "start_ts", "end_ts", "event_rows", "est_time_saved_ns",
               "action", "event_table"]
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


def _rec(rule, title, evidence, action, saved, rows=None, table="", lo=None, hi=None):
    rows = [] if rows is None else [int(r) for r in list(rows)[:MAX_EVENT_ROWS]]
    return {"rule": rule, "title": title, "evidence": evidence, "action": action,
            "est_time_saved_ns": float(saved) if saved is not None else math.nan,
            "event_rows": rows, "event_table": table,
            "start_ts": int(lo) if lo is not None else -1, "end_ts": int(hi) if hi is not None else -1}


def _span_of(df: pd.DataFrame):
    if not len(df):
        return None, None
    s = df["start_ts"].to_numpy()
    return int(s.min()), int((s + df["duration_ns"].to_numpy()).max())


def _flop_share_rules(trace, ctx):
    w, out = ctx["work"], []
    tens = w[cat_values(w["engine"], MATRIX_ENGINES)]
    if not len(tens):
        return out
    hw = float(tens["hardware_flops"].sum())
    model = float(tens["flops"].sum())
    tr = float(tens["transpose_flops"].sum())
    busy = float(tens["duration_ns"].sum())
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
                        "hoist transposes out of loops.", float(trows["duration_ns"].sum()),
                        trows.sort_values("duration_ns", ascending=False).index, "instructions", *_span_of(trows)))
    return out


def _spill_rule(trace, ctx):
    dma = trace.dma
    if not len(dma):
        return []
    tr = trace._full_table("tracks")
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
    s = rows["start_ts"].to_numpy()
    saved = union_ns(s, s + rows["duration_ns"].to_numpy())
    return [_rec("spilling", "SBUF spilling: spill reloads exceed 25% of HBM reads",
                 f"spill-reload bytes {rb:.3g} = {100 * rb / hbm_r:.1f}% of HBM reads (threshold 25%)",
                 "Reduce live tensor size per tile (smaller tiles, recompute) so activations stay in SBUF.",
                 saved, rows.index, "dma", *_span_of(rows))]


def _small_dma_rule(trace, ctx):
    dma = trace.dma
    if not len(dma):
        return []
    sz = dma["transfer_bytes"].to_numpy().astype(float)
    avg = sz.mean()
    small = sz < M.EFFICIENT_DMA_BYTES
    if avg >= M.EFFICIENT_DMA_BYTES:
        return []
    d = dma["duration_ns"].to_numpy().astype(float)
    big_bw = M.rate_per_s(sz[~small].sum(), d[~small].sum()) if (~small).any() else math.nan
    t_small = d[small].sum()
    saved = (t_small - sz[small].sum() * M.NS_PER_S / big_bw) if np.isfinite(big_bw) else 0.5 * t_small
    rows = dma[small]
    return [_rec("small_dma", "Small DMA transfers (average below 32 KiB)",
                 f"average DMA size {avg:.0f} B (target ≥ {M.EFFICIENT_DMA_BYTES} B); {100 * small.mean():.1f}% of "
                 f"{len(dma)} transfers are smaller; estimate is DMA-queue time",
                 "Batch transfers: larger tiles, ≥ 2 KiB contiguous per partition, coalesce small tensors.",
                 max(0.0, saved), rows.sort_values("duration_ns", ascending=False).index, "dma", *_span_of(rows))]


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
                 "Look for stragglers (analysis.collectives_across_ranks) and host delays before these collectives.",
                 excess, rows.sort_values("duration_ns", ascending=False).index, "collectives",
                 int(rows["start_ts"].min()), int(rows["end_ts"].max()))]


def _throttling_rule(trace, ctx):
    tr = trace._full_table("tracks")
    cnt = trace.counters
    if not len(tr) or not len(cnt):
        return []
    th = tr.index[tr["name"].astype(str).str.lower().str.contains("throttl").to_numpy()]
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


def _host_gap_rule(trace, ctx):
    w = ctx["work"]
    if len(w) < 2:
        return []
    lo, hi = ctx["span"]
    s = np.maximum(w["start_ts"].to_numpy(), lo)
    e = np.minimum(s + w["duration_ns"].to_numpy(), hi)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    cummax = np.maximum.accumulate(e)
    gap = s[1:] - cummax[:-1]
    big = gap >= HOST_GAP_MIN_NS
    total_gap = float(gap[big].sum())
    if total_gap < HOST_GAP_SHARE * (hi - lo) or not big.any():
        return []
    gs, ge = cummax[:-1][big], s[1:][big]
    top = np.argmax(ge - gs)
    return [_rec("host_bound_gaps", f"Device idle in {int(big.sum())} gaps ≥ 10 µs "
                 f"({100 * total_gap / (hi - lo):.1f}% of the time)",
                 f"idle gaps total {total_gap / 1e3:.1f} µs; longest {int(ge[top] - gs[top]) / 1e3:.1f} µs at "
                 f"{int(gs[top])} ns; see analysis.breakdown.idle_time_breakdown for host vs device wait",
                 "Reduce host overhead between launches: capture larger graphs (torch.compile / XLA), "
                 "overlap data loading, avoid host syncs (.item(), prints) inside the step.",
                 total_gap, [], "", int(gs[top]), int(ge[top]))]


def _fp32_rule(trace, ctx):
    w = ctx["work"]
    m = w["is_matmul"].to_numpy() & cat_values(w["dtype"], ["float32"])
    if not m.any():
        return []
    t = float(w["duration_ns"].to_numpy()[m].sum())
    _, spec, _ = primary_device(trace, w)
    ratio = math.nan
    if spec is not None:
        ratio = M.lookup_peak(dict(spec.peak_flops_per_s), "float32") / M.lookup_peak(dict(spec.peak_flops_per_s))
    kind = trace.header.devices[0].kind if len(trace.header.devices) else ""
    if not np.isfinite(ratio) and M.adjusted_flops_multiplier("float32", kind) != 1.0:  # Neuron table
        ratio = 1.0 / M.adjusted_flops_multiplier("float32", kind)
    saved = t * (1 - ratio) if np.isfinite(ratio) else math.nan
    rows = w[m]
    return [_rec("fp32_matmuls", "Matmuls run in FP32",
                 f"{int(m.sum())} FP32 matmul rows, {t / 1e3:.1f} µs; "
                 + (f"FP32 peak is {ratio:.2f}× the BF16 peak" if np.isfinite(ratio) else "device peaks unknown"),
                 "Run matmuls in BF16 (autocast / model.to(torch.bfloat16)); keep FP32 master weights if needed.",
                 saved, rows.sort_values("duration_ns", ascending=False).index, "instructions", *_span_of(rows))]


def _exposed_comm_rule(trace, ctx):
    cc = trace.collectives
    if not len(cc):
        return []
    lo, hi = ctx["span"]
    cs = cc["start_ts"].to_numpy()
    ce = cs + cc["duration_ns"].to_numpy()
    w = ctx["work"]
    comp = ~cat_values(w["engine"], ["Memcpy", "Memset", "Sync"])
    comp &= ~cat_where(w["op"], lambda s: "nccl" in s.lower())
    ws = w["start_ts"].to_numpy()[comp]
    we = ws + w["duration_ns"].to_numpy()[comp]
    a = union_ns(cs, ce, lo, hi)
    b = union_ns(ws, we, lo, hi)
    ab = union_ns(np.concatenate([cs, ws]), np.concatenate([ce, we]), lo, hi)
    exposed = a - (a + b - ab)
    if exposed < EXPOSED_COMM_SHARE * (hi - lo):
        return []
    return [_rec("exposed_collectives", "Collectives are not hidden behind compute",
                 f"{exposed / 1e3:.1f} µs of collective time ({100 * exposed / (hi - lo):.1f}% of the span) "
                 f"has no concurrent compute", "Overlap communication with compute: bucketed / async gradient "
                 "all-reduce, prefetch all-gathers (FSDP), reorder independent work.",
                 exposed, cc.index, "collectives", int(cs.min()), int(ce.max()))]


def _low_matrix_util_rule(trace, ctx):
    mfu = ctx["summary"].get("mfu_estimated_percent", math.nan)
    w = ctx["work"]
    if not w["is_matmul"].any() or not np.isfinite(mfu) or mfu >= LOW_MFU_PCT:
        return []
    r = roofline(trace)
    mmops = set(w.loc[w["is_matmul"].to_numpy(), "op"].cat.remove_unused_categories().cat.categories.astype(str))
    r = r[r["op"].isin(mmops)]
    saved = float(r["time_saved_at_roof_ns"].sum()) if len(r) else math.nan
    worst = r.iloc[0]["op"] if len(r) else "?"
    return [_rec("low_tensor_utilization", f"Low matrix-engine utilisation (MFU {mfu:.1f}%)",
                 f"MFU {mfu:.1f}% < {LOW_MFU_PCT:.0f}%; matmul ops could save {saved / 1e3:.1f} µs at the roof; "
                 f"worst: {worst}", "Use larger, 128-aligned matmul tiles and BF16; fuse small matmuls; check "
                 "the roofline for memory-bound matmuls.", saved, [], "", *ctx["span"])]


RULES = (_flop_share_rules, _spill_rule, _small_dma_rule, _collective_outlier_rule, _throttling_rule,
         _host_gap_rule, _fp32_rule, _exposed_comm_rule, _low_matrix_util_rule)


def recommendations(trace) -> pd.DataFrame:
    """Ranked insights (largest estimated saving first; rules without an estimate last).

    Columns: rule (id), severity ("high" ≥ 10% of total_time saved, "medium" ≥ 2%, else "low"), title,
    evidence (numbers behind the finding), start_ts, end_ts (ns; -1 when not tied to a range),
    event_rows (list of up to 100 row ids in ``event_table``), est_time_saved_ns (ns, upper-bound estimate,
    NaN unknown), action (what to change), event_table (table of event_rows, '' none).
    """
    if "recommendations" in trace._cache:
        return trace._cache["recommendations"]
    ctx = {"work": instruction_work(trace), "summary": summary_dict(trace), "span": analysis_span(trace)}
    total = max(1, ctx["span"][1] - ctx["span"][0])
    recs = [r for rule in RULES for r in rule(trace, ctx)]
    df = pd.DataFrame(recs, columns=[c for c in REC_COLUMNS if c != "severity"])
    share = df["est_time_saved_ns"].to_numpy(dtype=float) / total
    df["severity"] = np.where(share >= 0.10, "high", np.where(share >= 0.02, "medium", "low"))
    if "throttling" in set(df["rule"]):
        df.loc[df["rule"] == "throttling", "severity"] = "medium"
    df = df.sort_values("est_time_saved_ns", ascending=False, na_position="last", kind="stable").reset_index(drop=True)
    out = df[REC_COLUMNS]
    trace._cache["recommendations"] = out
    return out
