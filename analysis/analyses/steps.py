"""Training / inference steps: ``ProfilerStep#N`` annotations and our own step markers.

A step is the device's step: it starts where its host range starts (or where the previous step ended, if
later) and ends when both the host has left its range and the device has finished the work launched from
inside it (kernels, DMA, collectives, including those nobody waited for). A host that runs ahead of the
device therefore does not shorten the step; a one-step window counts the device tail.

A trace without step markers (``neuron-profile capture -- python train.py`` without ``--active``) takes its
host ranges from the training loop: step k runs from the end of the k-th ``optimizer.step()`` to the end of
the (k+1)-th (:func:`_loop_ranges`), with the same device boundary.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import code_dtype
from ..registry import Column, register
from .activity import trace_activity

#: ``ProfilerStep#12`` (torch.profiler), and our capture's markers such as ``NeuronStep#12`` / ``step#12``.
STEP_PATTERN = r"^(?:ProfilerStep|NeuronStep|[Ss]tep)\s*#\s*(\d+)$"
#: a host range that is one optimizer step (torch.optim's profiler label)
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
#: the range ``torch.optim`` records around every ``optimizer.step()`` (``Optimizer.step#AdamW.step``)
OPTIMIZER_STEP_PATTERN = r"^Optimizer\.step#[^#]+\.step$"
#: how the summary and the explorer name the step boundary
STEP_BOUNDARY = ("step = from the ProfilerStep#N host range's start until the host left it and the device "
                 "finished the work launched inside it (device tail and un-waited collectives included)")

STEP_SPEC = (Column("step", "count", "Step", "Step number N of ProfilerStep#N"),
             Column("start_ts", "ns", "Start", "Step start: its host range's start, or the previous step's end "
                                               "if later"),
             Column("end_ts", "ns", "End", "Step end: the later of host_end_ts and device_end_ts"),
             Column("duration_ns", "ns", "Step time", "end - start (" + STEP_BOUNDARY + ")"),
             Column("host_end_ts", "ns", "Host end", "End of the step's host range"),
             Column("device_end_ts", "ns", "Device end",
                    "End of the last device activity launched inside the step's host range (-1: none)"),
             Column("optimizer_steps", "count", "Optimizer steps",
                    "Optimizer.step# ranges starting inside the step (several micro-steps share one with "
                    "gradient accumulation)"))
STEP_COLUMNS = [c.name for c in STEP_SPEC]


@register("steps", columns=STEP_SPEC, figure="steps_figure")
def steps(trace) -> pd.DataFrame:
    """One row per step, sorted by step number (see the module docstring for the boundary).

    Columns: step (int), start_ts, end_ts (ns), duration_ns, host_end_ts, device_end_ts (-1: no device work
    launched inside the step), optimizer_steps. Host annotations are preferred over GPU-side copies
    (``gpu_user_annotation``); when one step appears several times (threads), its host range is the union.
    Without step markers, the steps of the training loop (module docstring); empty when the trace has neither.
    """
    ho = trace.table("host_ops", ["name", "category", "start_ts", "duration_ns"])
    out = pd.DataFrame({c: pd.Series(dtype="int64") for c in STEP_COLUMNS})
    if not len(ho):
        return out
    names = ho["name"]
    cats = pd.Series(names.cat.categories if hasattr(names, "cat") else names.unique())
    ranges = _marker_ranges(ho, names, cats)
    if ranges is None:
        ranges = _loop_ranges(ho, names, cats)
    if ranges is None:
        return out
    step_no, h_start, h_end = ranges
    dev_end = _device_ends(trace, h_start, h_end)
    opt = _optimizer_steps(ho, names, cats, h_start, h_end)
    end = np.maximum(h_end, dev_end)
    start = h_start.copy()
    order = np.argsort(h_start, kind="stable")
    for a, b in zip(order[:-1], order[1:]):  # a step starts no earlier than the previous one's device work ended
        if h_end[a] <= h_start[b]:           # (host ranges that overlap, e.g. annotated on two threads, stay)
            start[b] = max(start[b], end[a])
            end[b] = max(end[b], start[b])
    out = pd.DataFrame({"step": step_no, "start_ts": start, "end_ts": end,
                        "duration_ns": end - start, "host_end_ts": h_end, "device_end_ts": dev_end,
                        "optimizer_steps": opt})
    return out[STEP_COLUMNS].astype("int64")


def _host_rows(ho: pd.DataFrame, names: pd.Series, keep: set) -> pd.DataFrame:
    """The rows of ``ho`` named one of ``keep``; host annotations preferred over GPU-side copies."""
    rows = ho[names.isin(keep)]
    cat = rows["category"].astype(str)
    return rows[cat != "gpu_user_annotation"] if (cat != "gpu_user_annotation").any() else rows


def _marker_ranges(ho: pd.DataFrame, names: pd.Series, cats: pd.Series
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(step number, host start, host end) of the step markers, sorted by step; None without markers. When one
    step appears several times (threads), its host range is the union."""
    ok = cats.astype(str).str.extract(STEP_PATTERN)[0].notna().to_numpy()
    if not ok.any():
        return None
    rows = _host_rows(ho, names, set(cats[ok]))
    n = rows["name"].astype(str).str.extract(STEP_PATTERN)[0].astype("int64")
    df = pd.DataFrame({"step": n.to_numpy(), "start_ts": rows["start_ts"].to_numpy(),
                       "host_end_ts": (rows["start_ts"] + rows["duration_ns"]).to_numpy()})
    st = df.groupby("step", as_index=False).agg(start_ts=("start_ts", "min"), host_end_ts=("host_end_ts", "max"))
    st = st.sort_values("step").reset_index(drop=True)
    return (st["step"].to_numpy(np.int64), st["start_ts"].to_numpy(np.int64),
            st["host_end_ts"].to_numpy(np.int64))


def _loop_ranges(ho: pd.DataFrame, names: pd.Series, cats: pd.Series
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Host ranges of a trace without step markers: step k runs from the end of the k-th ``optimizer.step()``
    to the end of the (k+1)-th. With several optimizers the most frequent one (ties: the first name) paces the
    loop. What precedes the first ``optimizer.step()`` (model construction, data loading, the first iteration)
    and what follows the last are not steps: N calls give N - 1 steps, numbered 1..N-1. None with fewer than 2."""
    opt = cats[cats.astype(str).str.match(OPTIMIZER_STEP_PATTERN)]
    if not len(opt):
        return None
    rows = _host_rows(ho, names, set(opt))
    rn = rows["name"].astype(str)
    counts = rn.value_counts()
    pace = sorted(counts.index[counts == counts.max()])[0]
    ends = np.sort((rows["start_ts"] + rows["duration_ns"]).to_numpy(np.int64)[(rn == pace).to_numpy()])
    if len(ends) < 2:
        return None
    return np.arange(1, len(ends), dtype=np.int64), ends[:-1].copy(), ends[1:].copy()


def _step_of(ts: np.ndarray, te: np.ndarray, h_start: np.ndarray, h_end: np.ndarray) -> np.ndarray:
    """Index of the step whose host range holds each host op [ts, te] (-1: none). An op of no duration at the
    boundary of two steps belongs to the one that ends there (a projected step ends with its last op)."""
    o = np.argsort(h_start, kind="stable")
    k = np.searchsorted(h_start[o], np.maximum(te, ts + 1), side="left") - 1
    kk = o[np.maximum(k, 0)]
    hit = (k >= 0) & (ts >= h_start[kk]) & (te <= h_end[kk])
    return np.where(hit, kk, -1)


def _device_ends(trace, h_start: np.ndarray, h_end: np.ndarray) -> np.ndarray:
    """Per step: the end of the last device activity (:func:`trace_activity`: instructions, DMA, a Neuron trace's
    collectives) whose launching host op (``framework_op``) lies inside the step's host range; -1: none.

    The step of each host op is found once per host op (:func:`_step_of` over the host table, thousands of rows);
    each activity row then looks its host op's step up in a narrow table (no per-row search)."""
    out = np.full(len(h_start) + 1, -1, dtype=np.int64)  # the last entry collects the rows of no step (-1)
    act = trace_activity(trace)
    if not len(act) or not len(h_start):
        return out[:-1]
    host = trace.whole_table("host_ops", ["start_ts", "duration_ns"])
    hs = host["start_ts"].to_numpy(np.int64)
    step = _step_of(hs, hs + host["duration_ns"].to_numpy(np.int64), h_start, h_end)
    np.maximum.at(out, _step_per_row(act["framework_op"].to_numpy(np.int64), host.index, step, len(h_start)),
                  act["end_ts"].to_numpy(np.int64))
    return out[:-1]


def _step_per_row(fop: np.ndarray, host_index: pd.Index, step: np.ndarray, n_steps: int) -> np.ndarray:
    """The step (index, -1: none) of the host op of each row (``fop``: host-op row ids, -1 none), from the step
    of each host-op row (``step``, in the order of ``host_index``), in the narrowest int dtype that holds
    ``n_steps`` (and -1)."""
    n, dt = len(step), code_dtype(n_steps)
    if isinstance(host_index, pd.RangeIndex) and host_index.step == 1 and host_index.start >= 0 and len(fop):
        lo = int(host_index.start)
        lut: np.ndarray = np.full(lo + n + 1, -1, dtype=dt)  # by row id; the last entry (-1) is where id -1 wraps to
        lut[lo:lo + n] = step
        if int(fop.min()) >= -1 and int(fop.max()) < len(lut):
            return np.take(lut, fop, mode="wrap")
    pos = host_index.get_indexer(fop)
    return np.where((fop >= 0) & (pos >= 0), step[pos], -1).astype(dt)


def _optimizer_steps(ho: pd.DataFrame, names: pd.Series, cats: pd.Series, h_start: np.ndarray,
                     h_end: np.ndarray) -> np.ndarray:
    """Per step: how many ``Optimizer.step#`` ranges start inside its host range."""
    is_opt = cats.astype(str).str.startswith(OPTIMIZER_STEP_PREFIX).to_numpy()
    out = np.zeros(len(h_start), dtype=np.int64)
    if not is_opt.any():
        return out
    rows = ho[names.isin(set(cats[is_opt]))]
    rs = rows["start_ts"].to_numpy(np.int64)
    k = _step_of(rs, rs + rows["duration_ns"].to_numpy(np.int64), h_start, h_end)
    np.add.at(out, k[k >= 0], 1)
    return out


@register("step_window", returns="value", memo=False)
def step_window(trace, first: int, last: int | None = None) -> tuple[int, int]:
    """(start_ns, end_ns) spanning steps ``first``..``last`` inclusive. ``ValueError`` names the available
    steps when a requested one is missing."""
    last = first if last is None else last
    st = steps(trace)
    sel = st[(st["step"] >= first) & (st["step"] <= last)]
    if sel.empty:
        avail = st["step"].tolist()
        raise ValueError(f"no steps {first}..{last} in {trace.name}; available steps: {avail or 'none'}")
    return int(sel["start_ts"].min()), int(sel["end_ts"].max())
