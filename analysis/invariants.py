"""Invariants as code: ``analysis.check(trace)`` verifies that what the analyses report is physically possible
and self-consistent, and says why where an invariant can legitimately break.

Checked (each row of the report is one invariant on one subject):

* shares: every percent of ``summary`` within 0-100; busy + idle = 100 %; the summary's idle share equals the
  temporal breakdown's; ``hot_ops`` shares within 0-100 % and adding up to at most 100 % for every grouping;
* peaks: roofline efficiency within 0-100 %, distance to the roof within 0-1, achieved FLOP/s within the
  compute peak and achieved bandwidth within the memory roof (hot_ops: within what HBM and DMA can move,
  ``ceilings.hbm_ceiling``); each hot_ops group's FLOPs / self time within
  the peak of its own dtype and engine (a V100's FP32 peak for FP32 work, not its FP16 tensor-core peak); no
  op with device time whose FLOPs are neither known nor explained; MFU / MBU a number wherever the device's
  peaks and the work are known;
* time: the union of device activity never above the analysed span; the temporal breakdown's parts add up to
  its span, for the trace and for each step (per-step sums within the step); recommendation savings within
  their time pools and the span;
* legitimately broken (status "explained", with the reason): overlapping steps (several threads annotate
  steps), kernels that start before the host call that launched them (host / device clock skew).

``neuron-trace validate --analysis FILE`` runs the same checks from the command line.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .core.categorical import cat_values
from .core.intervals import union_sorted_ns
from .core.tables import row_positions

__all__ = ["check", "check_path", "CheckReport", "CHECK_COLUMNS"]

CHECK_COLUMNS = ["invariant", "subject", "value", "limit", "status", "reason"]
PCT_TOL = 0.01  # percent points (breakdown percentages are rounded to 2 decimals)
REL_TOL = 1e-6
MAX_STEPS_CHECKED = 20


@dataclass
class CheckReport:
    """Result of :func:`check`: ``frame`` (columns ``CHECK_COLUMNS``; status "pass" | "fail" | "explained")."""

    trace: str
    frame: pd.DataFrame

    @property
    def ok(self) -> bool:
        """True when no invariant failed without an explanation."""
        return not (self.frame["status"] == "fail").any()

    @property
    def failures(self) -> pd.DataFrame:
        return self.frame[self.frame["status"] == "fail"]

    @property
    def explained(self) -> pd.DataFrame:
        return self.frame[self.frame["status"] == "explained"]

    def __str__(self) -> str:
        n = len(self.frame)
        head = f"{self.trace}: {n - len(self.failures)} of {n} checks pass" + \
               (f" ({len(self.explained)} explained)" if len(self.explained) else "")
        lines = [head]
        for r in pd.concat([self.failures, self.explained]).itertuples(index=False):
            lines.append(f"  {r.status.upper()} {r.invariant} [{r.subject}]: {r.value:.6g} vs {r.limit:.6g}"
                         + (f" - {r.reason}" if r.reason else ""))
        return "\n".join(lines)


class _Rows:
    def __init__(self) -> None:
        self.rows: list[tuple] = []

    def add(self, invariant: str, subject: str, value: float, limit: float, ok: bool, reason: str = "",
            explained: str = "") -> None:
        status = "pass" if ok else ("explained" if explained else "fail")
        self.rows.append((invariant, subject, float(value), float(limit), status, explained or reason))

    def within(self, invariant: str, subject: str, values: Iterable[float], lo: float, hi: float,
               tol: float = PCT_TOL, reason: str = "") -> None:
        """One row: the worst value of ``values`` (NaN ignored) against [lo, hi]."""
        v = np.asarray(list(values), dtype=float)
        v = v[np.isfinite(v)]
        if not len(v):
            self.add(invariant, subject, math.nan, hi, True, "no values")
            return
        worst_hi, worst_lo = float(v.max()), float(v.min())
        if worst_lo < lo - tol:
            self.add(invariant, subject, worst_lo, lo, False, reason)
        else:
            self.add(invariant, subject, worst_hi, hi, worst_hi <= hi + tol, reason)


def check(obj: Any) -> CheckReport:
    """Check the invariants of a Trace, or of every trace (and every run) of a TraceSet."""
    traces = list(getattr(obj, "traces", [obj]))
    R = _Rows()
    for t in traces:
        _check_trace(t, R, prefix=f"{t.name}: " if len(traces) > 1 else "")
    if len(traces) > 1:
        _check_runs(traces, R)
    name = getattr(obj, "name", None) or (str(obj.path) if getattr(obj, "path", None) else f"{len(traces)} traces")
    return CheckReport(name, pd.DataFrame(R.rows, columns=CHECK_COLUMNS))


def check_path(path: str) -> list[str]:
    """The failed invariants of :func:`check` on a trace file or folder, one line each (empty when all hold or
    are explained); used by ``neuron-trace validate --analysis``."""
    from .trace import load

    rep = check(load(path, cache=False))
    return [f"analysis invariant failed: {r.invariant} [{r.subject}]: {r.value:.6g} vs limit {r.limit:.6g}"
            + (f" ({r.reason})" if r.reason else "") for r in rep.failures.itertuples(index=False)]


def _check_trace(t, R: _Rows, prefix: str) -> None:
    from . import registry

    call = registry.call
    s = call("summary", t)
    v = dict(zip(s["metric"], s["value"]))
    pct = s[s["unit"] == "percent"]
    R.within("summary shares within 0-100 %", prefix + "summary", pct["value"], 0.0, 100.0, REL_TOL)
    if np.isfinite(v.get("idle_percent", math.nan)):
        busy_idle = v["idle_percent"] + v["device_active_percent"]
        R.add("busy + idle = 100 %", prefix + "summary", busy_idle, 100.0, abs(busy_idle - 100.0) <= 1e-6)
        tb = call("temporal_breakdown", t).iloc[0]
        R.add("summary idle = temporal breakdown idle", prefix + "summary", v["idle_percent"], tb["idle_time_pctg"],
              abs(v["idle_percent"] - tb["idle_time_pctg"]) <= PCT_TOL)
    _check_union(t, R, prefix)
    _check_temporal(t, R, prefix + "trace", call("temporal_breakdown", t))
    _check_known(t, s, R, prefix)
    for by in ("op", "module", "stack", "engine"):
        h = call("hot_ops", t, by=by)
        R.within("hot_ops share within 0-100 %", f"{prefix}hot_ops by {by}", h["share_of_step_time_percent"],
                 0.0, 100.0, REL_TOL)
        R.add("hot_ops shares add up to <= 100 %", f"{prefix}hot_ops by {by}",
              float(np.nansum(h["share_of_step_time_percent"])), 100.0,
              float(np.nansum(h["share_of_step_time_percent"])) <= 100.0 + 1e-6)
    _check_rates(t, R, prefix)
    _check_roofline(t, R, prefix)
    _check_steps(t, R, prefix)
    _check_launch_order(t, R, prefix)
    _check_recommendations(t, R, prefix)


def _check_union(t, R: _Rows, prefix: str) -> None:
    from .analyses.activity import analysis_span, trace_activity

    act = trace_activity(t)
    lo, hi = analysis_span(t)
    u = union_sorted_ns(act["start_ts"].to_numpy(), act["end_ts"].to_numpy())
    R.add("device union <= analysed span", prefix + "activity", u, hi - lo, u <= hi - lo)


def _check_temporal(t, R: _Rows, subject: str, tb: pd.DataFrame, explained: str = "") -> None:
    r = tb.iloc[0]
    parts = [r["idle_time_ns"], r["compute_time_ns"], r["non_compute_time_ns"]]
    R.add("temporal parts add up to the span", subject, sum(parts), r["kernel_time_ns"],
          sum(parts) == r["kernel_time_ns"], explained=explained if sum(parts) != r["kernel_time_ns"] else "")
    R.add("temporal parts >= 0", subject, min(parts), 0.0, min(parts) >= 0,
          explained=explained if min(parts) < 0 else "")


def _check_known(t, s: pd.DataFrame, R: _Rows, prefix: str) -> None:
    """MFU / MBU are numbers wherever the device's peaks and the work are known; a NaN there must say why."""
    from .analyses.summary import primary_device

    _, peaks, _ = primary_device(t)
    if peaks is None:
        return
    v = dict(zip(s["metric"], s["value"]))
    desc = dict(zip(s["metric"], s["description"]))
    for metric, known, peak in (("mfu_estimated_percent", "model_flops", peaks.matrix_peak()),
                                ("mbu_estimated_percent", "hbm_total_bytes", peaks.hbm_per_core)):
        work = v.get(known, math.nan)
        if np.isfinite(peak) and np.isfinite(work) and v.get("total_time", 0) > 0:
            why = desc[metric].split("NaN: ", 1)[1] if "NaN: " in desc[metric] else ""
            R.add(f"{metric} known where peaks and work are", prefix + "summary", v[metric], peak,
                  bool(np.isfinite(v[metric])), explained=why if not np.isfinite(v[metric]) else "")


def _check_rates(t, R: _Rows, prefix: str) -> None:
    """Each hot_ops group's FLOPs over its self time within the peak of its own work (the matrix peak of its
    dtype for matmul-family rows, the engine's vector peak otherwise, × its active cores), computed from its
    FLOPs (the shown rate is NaN above that peak); bandwidth within the HBM ceiling (``ceilings.hbm_ceiling``);
    and no group with device time whose FLOPs are neither known nor explained."""
    from .analyses.ceilings import group_bounds
    from .analyses.work import instruction_work

    w = instruction_work(t)
    if not len(w):
        return
    for by in ("op", "engine"):
        h = t.hot_ops(by=by)
        cats = pd.Index(w[by].cat.categories.astype(str))
        peak, roof = group_bounds(t, w, w[by].cat.codes.to_numpy().astype(np.int64), len(cats))
        pos = cats.get_indexer(h.index.astype(str))
        pk = np.where(pos >= 0, peak[np.maximum(pos, 0)], np.nan)
        rf = np.where(pos >= 0, roof[np.maximum(pos, 0)], np.nan)
        secs = h["device_time_self_ns"].to_numpy(dtype=float) / 1e9
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(secs > 0, h["flops"].to_numpy(dtype=float) / secs / pk, np.nan)
            bw = np.where(secs > 0, h["achieved_bandwidth_bytes_per_s"].to_numpy(dtype=float) / rf, np.nan)
        subj = f"{prefix}hot_ops by {by}"
        worst = int(np.nanargmax(ratio)) if np.isfinite(ratio).any() else -1
        R.within("hot_ops FLOP/s within the peak of their dtype and engine", subj, ratio, 0.0, 1.0, REL_TOL,
                 reason=f"worst: {h.index[worst]}" if worst >= 0 and ratio[worst] > 1.0 + REL_TOL else "")
        R.within("hot_ops bandwidth within what HBM and DMA can move", subj, bw, 0.0, 1.0, REL_TOL)
        if by == "op":
            silent = (h["device_time_self_ns"].to_numpy() > 0) & h["flops"].isna().to_numpy() \
                & (h["note"].astype(str).to_numpy() == "")
            R.add("device time has FLOPs or a reason", subj, float(silent.sum()), 0.0, not silent.any(),
                  reason=", ".join(h.index[silent].astype(str)[:3]))


def _check_roofline(t, R: _Rows, prefix: str) -> None:
    r = t.roofline()
    if not len(r):
        return
    subj = prefix + "roofline"
    R.within("roofline efficiency within 0-100 %", subj, r["efficiency_percent"], 0.0, 100.0, 1e-4)
    R.within("roofline distance to the roof within 0-1", subj, r["distance_to_roof"], 0.0, 1.0, 1e-6)
    ratio = r["achieved_flops_per_s"].astype(float) / r["peak_flops_per_s"].astype(float)
    R.within("roofline FLOP/s within the peak", subj, ratio, 0.0, 1.0, 1e-6)
    ratio = r["achieved_bandwidth_bytes_per_s"].astype(float) / r["bandwidth_bytes_per_s"].astype(float)
    R.within("roofline bandwidth within the memory roof", subj, ratio, 0.0, 1.0, 1e-6)
    R.within("roofline time saved >= 0", subj, r["time_saved_at_roof_ns"], 0.0, math.inf, 0.0)


def _check_steps(t, R: _Rows, prefix: str) -> None:
    st = t.steps()
    if len(st) < 1:
        return
    s, e = st["start_ts"].to_numpy(), st["end_ts"].to_numpy()
    o = np.argsort(s, kind="stable")
    overlap = float(np.maximum(0, e[o][:-1] - s[o][1:]).max()) if len(st) > 1 else 0.0
    R.add("steps do not overlap", prefix + "steps", overlap, 0.0, overlap <= 0,
          explained="overlapping steps: several threads annotate ProfilerStep, or steps nest" if overlap > 0 else "")
    for n in st["step"].to_numpy()[:MAX_STEPS_CHECKED]:
        w = t.select_steps(int(n))
        tb = w.temporal_breakdown()
        _check_temporal(w, R, f"{prefix}step {int(n)}", tb)
        lo, hi = w.window_bounds
        r = tb.iloc[0]
        R.add("per-step device span = the step", f"{prefix}step {int(n)}", r["kernel_time_ns"], hi - lo,
              r["kernel_time_ns"] == hi - lo or r["kernel_time_ns"] == 0)
        h = w.hot_ops()
        tot = float(np.nansum(h["share_of_step_time_percent"]))
        R.add("per-step hot_ops shares <= 100 %", f"{prefix}step {int(n)}", tot, 100.0, tot <= 100.0 + 1e-6)


def _check_launch_order(t, R: _Rows, prefix: str) -> None:
    fl = t.flows
    if not len(fl):
        return
    m = cat_values(fl["kind"], ["launch"]) & cat_values(fl["src_table"], ["host_ops"]) \
        & cat_values(fl["dst_table"], ["instructions"])
    if not m.any():
        return
    ho = t.whole_table("host_ops", ["start_ts"])
    ins = t.whole_table("instructions", ["start_ts"])
    hp = row_positions(ho.index, fl["src_row"].to_numpy()[m])
    ip = row_positions(ins.index, fl["dst_row"].to_numpy()[m])
    ok = (hp >= 0) & (ip >= 0)
    early = ho["start_ts"].to_numpy()[hp[ok]] - ins["start_ts"].to_numpy()[ip[ok]]
    worst = float(early.max()) if len(early) else 0.0
    n_bad = int((early > 0).sum())
    R.add("device rows start after their launch", prefix + "flows", worst, 0.0, worst <= 0,
          explained=(f"host/device clock skew: {n_bad} device rows start before the host call that launched them "
                     f"(by up to {worst / 1e3:.1f} µs)") if worst > 0 else "")


def _check_recommendations(t, R: _Rows, prefix: str) -> None:
    from .analyses.recommend import time_pools

    rec = t.recommendations()
    if not len(rec):
        return
    pools = time_pools(t)
    saved = rec["est_time_saved_ns"].to_numpy(dtype=float)
    R.within("recommendation savings >= 0", prefix + "recommendations", saved, 0.0, math.inf, 0.0)
    tot = float(np.nansum(saved))
    R.add("recommendation savings <= the span", prefix + "recommendations", tot, pools["span"],
          tot <= pools["span"] * (1 + REL_TOL))
    for pool, g in rec.groupby("time_pool"):
        v = float(np.nansum(g["est_time_saved_ns"]))
        R.add("recommendation savings <= their time pool", f"{prefix}recommendations ({pool})", v,
              pools.get(pool, 0.0), v <= pools.get(pool, 0.0) * (1 + REL_TOL) + 1e-6)


def _check_runs(traces: list, R: _Rows) -> None:
    from . import registry

    m = registry.call("collectives_across_ranks", traces)
    if len(m):
        R.within("collective waits >= 0", "runs", m["wait_ns"], 0.0, math.inf, 0.0)
    rr = registry.call("run_recommendations", traces)
    spans = [t.time_range for t in traces]
    span = max(s[1] for s in spans) - min(s[0] for s in spans)
    tot = float(rr["est_time_saved_ns"].sum()) if len(rr) else 0.0
    R.add("run findings <= the runs' span", "runs", tot, span, tot <= span)
