"""Where device time goes, with the definitions of Holistic Trace Analysis (HTA) 0.5.0 so numbers compare.

Pure functions on the trace tables (reader conventions: ns ints, Categorical strings):

* ``classify_kernels(names)``: COMMUNICATION / MEMORY / COMPUTATION / OTHER as HTA's
  ``hta.utils.utils.get_kernel_type`` (the one its breakdowns call): COMMUNICATION ``^nccl.*Kernel``;
  MEMORY ``^Memcpy|^Memset|^dma``; OTHER when not compute by ``(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)``
  (so cuda_sync "Stream Sync" / "Context Sync" are OTHER, and "Stream Wait Event" is COMPUTATION, as in HTA);
  COMPUTATION otherwise. (HTA's ``hta/common/types.py`` grouping patterns, e.g. ``^(hip)?Memcpy``, are used by
  other HTA features, not by these breakdowns.)
* ``kernel_breakdown``: HTA ``get_gpu_kernel_breakdown`` (per-type exclusive time of the union of each type's
  intervals, "A overlapping B" rows for time where several types run) plus per-name statistics.
* ``temporal_breakdown``: HTA ``get_temporal_breakdown``: span = last end - first start of all device
  activity of the rank (every stream merged), idle = span - union busy time, compute = union of COMPUTATION,
  non_compute = span - compute - idle (memory, communication, syncs and OTHER).
* ``idle_time_breakdown``: HTA ``get_idle_time_breakdown`` per stream (host_wait / kernel_wait / other).
* ``comm_comp_overlap``: HTA ``get_comm_comp_overlap``: time when COMMUNICATION and COMPUTATION unions
  overlap / COMMUNICATION union time.

Reproducing HTA's exact numbers needs two of its load-time choices, both opt-in here:
``hta_rounding=True`` (HTA rounds float µs timestamps inward: ts = ceil(ts_us), end = floor(end_us), which
shortens or zeroes sub-µs kernels) and ``hta_kernel_selection`` (HTA drops kernels launched in the last
ProfilerStep when the trace has two or more, and events whose stream is -1). Without them the functions use
exact ns on every imported device event.

Neuron (simulated or captured) traces have engine instructions instead of kernels: rows whose ``opcode`` is
not a Kineto device category are classified by ``engine`` (Tensor / TensorMatrix / Vector / Scalar / GpSimd
-> COMPUTATION, Sync and queue engines -> OTHER); pass ``dma=`` (DMA transfers -> MEMORY) and
``collectives=`` (rows not already tied to an instruction -> COMMUNICATION) to count those too.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

COMPUTATION, COMMUNICATION, MEMORY, OTHER = "COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"
KERNEL_TYPES = (COMMUNICATION, MEMORY, COMPUTATION, OTHER)
#: Kineto categories that ``neuron_profiler.importers.kineto`` stores as instruction ``opcode``
KINETO_DEVICE_OPCODES = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
                                   "mtia_ccp_events", "cuda_sync", "xpu_sync"})
#: categories HTA's idle-time breakdown takes as kernels (it leaves cuda_sync out)
HTA_IDLE_KERNEL_OPCODES = frozenset({"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy",
                                     "mtia_ccp_events"})
NEURON_COMPUTE_ENGINES = frozenset({"Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Pool", "Act"})

_COMM_RE = r"^nccl.*Kernel"
_MEM_RE = r"^(?:Memcpy|Memset|dma)"
_NONCOMP_RE = r"^(?:(?:nccl.*Kernel)|(?:.*(?:Memcpy)|(?:Memset))|(?:.*Sync))"


def classify_kernels(names: pd.Series) -> pd.Series:
    """Kernel type of each GPU kernel / memcpy / memset name, as HTA 0.5.0 (see module doc).

    Returns a Series of str (COMMUNICATION, MEMORY, COMPUTATION, OTHER) with the index of ``names``."""
    s = pd.Series(names, copy=False)
    idx = s.index
    if isinstance(s.dtype, pd.CategoricalDtype):  # classify each category once
        cats = pd.Series(s.cat.categories.astype(str))
        per_cat = classify_kernels(cats).to_numpy()
        codes = s.cat.codes.to_numpy()
        out = np.where(codes >= 0, per_cat[np.maximum(codes, 0)] if len(per_cat) else COMPUTATION, COMPUTATION)
        return pd.Series(out, index=idx, dtype=object)
    st = s.astype(str)
    comm = st.str.contains(_COMM_RE, regex=True).to_numpy()
    mem = st.str.contains(_MEM_RE, regex=True).to_numpy()
    noncomp = st.str.contains(_NONCOMP_RE, regex=True).to_numpy()
    out = np.where(comm, COMMUNICATION, np.where(mem, MEMORY, np.where(noncomp, OTHER, COMPUTATION)))
    return pd.Series(out, index=idx, dtype=object)


def _engine_types(engine: pd.Series) -> np.ndarray:
    e = engine.astype(str).to_numpy()
    return np.where(np.isin(e, list(NEURON_COMPUTE_ENGINES)), COMPUTATION, OTHER)


def device_activity(instructions: pd.DataFrame, *, dma: pd.DataFrame | None = None,
                    collectives: pd.DataFrame | None = None, hta_rounding: bool = False) -> pd.DataFrame:
    """Device intervals with their kernel type: columns ``start_ts``, ``end_ts`` (ns), ``name``,
    ``kernel_type``, ``track``, ``opcode``; index = instruction row id (dma / collective rows get -1 - row).

    Kineto rows are classified by name (``classify_kernels``), Neuron rows by engine; DMA rows are MEMORY and
    collectives without an ``instruction`` COMMUNICATION. ``hta_rounding`` rounds inward to whole µs as
    HTA does on load (ts = ceil, end = floor; may give zero or negative durations, like HTA)."""
    ins = instructions
    start = ins["start_ts"].to_numpy(np.int64)
    end = start + ins["duration_ns"].to_numpy(np.int64)
    opcode = ins["opcode"].astype(str).to_numpy() if "opcode" in ins else np.full(len(ins), "", object)
    names = ins["name"] if "name" in ins else pd.Series([""] * len(ins), index=ins.index)
    kineto = np.isin(opcode, list(KINETO_DEVICE_OPCODES))
    ktype = np.empty(len(ins), dtype=object)
    if kineto.any():
        ktype[kineto] = classify_kernels(names[kineto]).to_numpy()
    if (~kineto).any():
        ktype[~kineto] = _engine_types(ins["engine"][~kineto])
    parts = [pd.DataFrame({"start_ts": start, "end_ts": end, "name": names.astype(str).to_numpy(),
                           "kernel_type": ktype, "track": ins["track"].to_numpy(np.int64) if "track" in ins
                           else np.full(len(ins), -1, np.int64), "opcode": opcode}, index=ins.index)]
    if dma is not None and len(dma):
        s = dma["start_ts"].to_numpy(np.int64)
        parts.append(pd.DataFrame({"start_ts": s, "end_ts": s + dma["duration_ns"].to_numpy(np.int64),
                                   "name": "dma", "kernel_type": MEMORY, "track": dma["track"].to_numpy(np.int64),
                                   "opcode": "dma"}, index=-1 - dma.index.to_numpy()))
    if collectives is not None and len(collectives):
        c = collectives[collectives["instruction"].to_numpy() < 0] if "instruction" in collectives else collectives
        s = c["start_ts"].to_numpy(np.int64)
        parts.append(pd.DataFrame({"start_ts": s, "end_ts": s + c["duration_ns"].to_numpy(np.int64),
                                   "name": c["operation"].astype(str).to_numpy(), "kernel_type": COMMUNICATION,
                                   "track": c["track"].to_numpy(np.int64), "opcode": "collective"},
                                  index=-1 - c.index.to_numpy()))
    act = pd.concat(parts) if len(parts) > 1 else parts[0]
    if hta_rounding:
        act["start_ts"] = -((-act["start_ts"]) // 1000) * 1000
        act["end_ts"] = (act["end_ts"] // 1000) * 1000
    return act


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint (start, end) arrays; same grouping rule as HTA's
    ``merge_kernel_intervals`` (an interval starting at or before the running max end joins the group)."""
    if len(start) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    o = np.argsort(start, kind="stable")
    s, e = np.asarray(start)[o], np.asarray(end)[o]
    prev_max = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > prev_max[:-1]
    grp = np.cumsum(new) - 1
    gs = s[new]
    ge = np.full(grp[-1] + 1, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(ge, grp, e)
    return gs, ge


def _union_ns(act: pd.DataFrame, mask: np.ndarray | None = None) -> int:
    a = act if mask is None else act[mask]
    gs, ge = merge_intervals(a["start_ts"].to_numpy(), a["end_ts"].to_numpy())
    return int(ge.sum() - gs.sum())


def _activity(instructions: pd.DataFrame, kw: dict) -> pd.DataFrame:
    return device_activity(instructions, dma=kw.get("dma"), collectives=kw.get("collectives"),
                           hta_rounding=kw.get("hta_rounding", False))


def temporal_breakdown(instructions: pd.DataFrame, rank: int = 0, *, hta_rounding: bool = False,
                       dma: pd.DataFrame | None = None, collectives: pd.DataFrame | None = None) -> pd.DataFrame:
    """Idle / compute / non-compute device time of one rank (HTA ``get_temporal_breakdown``).

    One row; columns: ``rank``; ``idle_time_ns``, ``compute_time_ns``, ``non_compute_time_ns``,
    ``kernel_time_ns`` (ns; kernel_time = span from the first device event start to the last end, the
    denominator); ``idle_time_pctg``, ``compute_time_pctg``, ``non_compute_time_pctg`` (percent, 2 decimals).
    All zero when there is no device activity."""
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding})
    if len(act) == 0:
        span = busy = compute = 0
    else:
        gs, ge = merge_intervals(act["start_ts"].to_numpy(), act["end_ts"].to_numpy())
        span = int(ge[-1] - gs[0])
        busy = int(ge.sum() - gs.sum())
        compute = _union_ns(act, (act["kernel_type"] == COMPUTATION).to_numpy())
    idle = span - busy
    non_compute = span - compute - idle
    row = {"rank": int(rank), "idle_time_ns": idle, "compute_time_ns": compute,
           "non_compute_time_ns": non_compute, "kernel_time_ns": span}
    for k in ("idle_time", "compute_time", "non_compute_time"):
        row[f"{k}_pctg"] = round(100.0 * row[f"{k}_ns"] / span, 2) if span else 0.0
    return pd.DataFrame([row])


def _type_time(act: pd.DataFrame, types: list[str]) -> pd.DataFrame:
    """HTA ``_get_gpu_kernel_type_time``: sweep over the per-type unions with one bit per type."""
    times, deltas = [], []
    for i, t in enumerate(types):
        gs, ge = merge_intervals(*(act.loc[act["kernel_type"] == t, c].to_numpy() for c in ("start_ts", "end_ts")))
        times += [gs, ge]
        deltas += [np.full(len(gs), 1 << i), np.full(len(ge), -(1 << i))]
    if not times or sum(len(x) for x in times) == 0:
        return pd.DataFrame({"kernel_type": pd.Series(dtype=object), "sum_ns": pd.Series(dtype=np.int64)})
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    running = np.cumsum(d)
    dur = np.diff(t, append=t[-1])
    keep = running > 0
    labels = {}
    for r in np.unique(running[keep]):
        labels[r] = " overlapping ".join(tp for i, tp in enumerate(types) if r & (1 << i))
    lab = np.array([labels.get(r, "") for r in running[keep]], dtype=object)
    df = pd.DataFrame({"kernel_type": lab, "sum_ns": dur[keep]})
    return df.groupby("kernel_type", as_index=False)["sum_ns"].sum()


def kernel_breakdown(instructions: pd.DataFrame, *, include_memory_kernels: bool = True,
                     hta_rounding: bool = False, dma: pd.DataFrame | None = None,
                     collectives: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Device time by kernel type and by kernel name (HTA ``get_gpu_kernel_breakdown``).

    Returns ``(by_type, by_name)``:
    * ``by_type``: ``kernel_type`` (COMPUTATION, COMMUNICATION, MEMORY, or "A overlapping B" for time when
      several types run at once), ``sum_ns`` (ns of exclusive wall time), ``percentage`` (of the total, 1
      decimal); sorted by sum_ns descending. MEMORY is left out when ``include_memory_kernels`` is False;
      OTHER (syncs) is never included, as in HTA.
    * ``by_name``: ``name``, ``kernel_type``, ``sum_ns``, ``max_ns``, ``min_ns``, ``mean_ns``, ``std_ns``
      (sample std, 0 for one kernel), ``count``; every kernel name, sorted by sum_ns descending."""
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding})
    types = [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])
    by_type = _type_time(act, types)
    by_type = by_type.sort_values("sum_ns", ascending=False, ignore_index=True)
    total = by_type["sum_ns"].sum()
    by_type["percentage"] = (100.0 * by_type["sum_ns"] / total).round(1) if total else 0.0
    dur = (act["end_ts"] - act["start_ts"]).rename("dur")
    g = pd.DataFrame({"name": act["name"], "kernel_type": act["kernel_type"], "dur": dur})
    by_name = g.groupby(["name", "kernel_type"], as_index=False, observed=True)["dur"].agg(
        sum_ns="sum", max_ns="max", min_ns="min", mean_ns="mean", std_ns="std", count="count")
    by_name["std_ns"] = by_name["std_ns"].fillna(0.0)
    by_name = by_name.sort_values("sum_ns", ascending=False, ignore_index=True)
    return by_type, by_name


def comm_comp_overlap(instructions: pd.DataFrame, rank: int = 0, *, hta_rounding: bool = False,
                      dma: pd.DataFrame | None = None, collectives: pd.DataFrame | None = None) -> pd.DataFrame:
    """Share of communication time overlapped by computation (HTA ``get_comm_comp_overlap``).

    One row: ``rank``, ``comm_time_ns`` (union of COMMUNICATION), ``overlap_time_ns`` (ns when a
    communication and a computation interval both run), ``comp_comm_overlap_pctg`` (percent, 2 decimals;
    NaN when there is no communication, like HTA's 0/0)."""
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding})
    cs, ce = merge_intervals(*(act.loc[act["kernel_type"] == COMMUNICATION, c].to_numpy()
                               for c in ("start_ts", "end_ts")))
    ps, pe = merge_intervals(*(act.loc[act["kernel_type"] == COMPUTATION, c].to_numpy()
                               for c in ("start_ts", "end_ts")))
    comm = int(ce.sum() - cs.sum())
    overlap = _overlap_ns(cs, ce, ps, pe)
    pct = round(100.0 * overlap / comm, 2) if comm else float("nan")
    return pd.DataFrame([{"rank": int(rank), "comm_time_ns": comm, "overlap_time_ns": overlap,
                          "comp_comm_overlap_pctg": pct}])


def _overlap_ns(as_: np.ndarray, ae: np.ndarray, bs: np.ndarray, be: np.ndarray) -> int:
    """Total intersection length of two sets of disjoint sorted intervals."""
    if len(as_) == 0 or len(bs) == 0:
        return 0
    t = np.concatenate([as_, ae, bs, be])
    d = np.concatenate([np.full(len(as_), 1), np.full(len(ae), -1), np.full(len(bs), 2), np.full(len(be), -2)])
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    running = np.cumsum(d)
    dur = np.diff(t, append=t[-1])
    return int(dur[running == 3].sum())


def idle_time_breakdown(instructions: pd.DataFrame, host_ops: pd.DataFrame, flows: pd.DataFrame, *,
                        rank: int = 0, tracks: pd.DataFrame | None = None, streams: list[int] | None = None,
                        consecutive_kernel_delay_ns: int = 30_000, hta_rounding: bool = False) -> pd.DataFrame:
    """Why each stream sits idle between kernels (HTA ``get_idle_time_breakdown``).

    For consecutive kernels on a stream, the gap before a kernel is ``host_wait`` when the host call that
    launched it (``launch`` flow) started after the previous kernel ended, else ``kernel_wait`` when the gap
    is shorter than ``consecutive_kernel_delay_ns`` (HTA: 30 µs), else ``other``. Kineto cuda_sync rows are
    left out as in HTA; Neuron instructions count per engine track.

    Columns: ``rank``, ``stream`` (GPU stream id from ``tracks.tid`` when ``tracks`` is given, else the track
    id), ``idle_category`` (host_wait / kernel_wait / other), ``idle_time_ns`` (ns), ``idle_time_ratio``
    (share of the stream's idle time)."""
    ins = instructions
    opcode = ins["opcode"].astype(str).to_numpy() if "opcode" in ins else np.full(len(ins), "", object)
    keep = np.isin(opcode, list(HTA_IDLE_KERNEL_OPCODES)) | ~np.isin(opcode, list(KINETO_DEVICE_OPCODES))
    k = ins[keep]
    start = k["start_ts"].to_numpy(np.int64)
    end = start + k["duration_ns"].to_numpy(np.int64)
    launch = np.zeros(len(k), dtype=np.int64)
    has_launch = np.zeros(len(k), dtype=bool)
    if flows is not None and len(flows) and host_ops is not None and len(host_ops):
        fl = flows[(flows["kind"].astype(str) == "launch") & (flows["src_table"].astype(str) == "host_ops")
                   & (flows["dst_table"].astype(str) == "instructions")]
        fl = fl.drop_duplicates("dst_row")
        src_ts = host_ops["start_ts"].reindex(fl["src_row"].to_numpy())
        m = pd.Series(src_ts.to_numpy(), index=fl["dst_row"].to_numpy()).reindex(k.index)
        has_launch = m.notna().to_numpy()
        launch[has_launch] = m.to_numpy()[has_launch].astype(np.int64)
    if hta_rounding:
        start, end = -((-start) // 1000) * 1000, (end // 1000) * 1000
        launch = -((-launch) // 1000) * 1000
    track = k["track"].to_numpy(np.int64)
    stream = track
    if tracks is not None and len(tracks):
        stream = tracks["tid"].reindex(track).to_numpy(np.int64)
    # relative to the first start: float64 holds these gaps exactly (absolute ns near 1.7e18 would not)
    t0 = int(start.min()) if len(start) else 0
    lts = np.where(has_launch, (launch - t0).astype(np.float64), np.nan)
    df = pd.DataFrame({"stream": stream, "start": start - t0, "end": end - t0, "launch": lts})
    if streams:
        df = df[df["stream"].isin(streams)]
    df = df.sort_values(["stream", "start"], kind="stable")
    prev_end = df.groupby("stream")["end"].shift(1).to_numpy(np.float64)
    gap = df["start"].to_numpy(np.float64) - prev_end
    host_wait = df["launch"].to_numpy() > prev_end
    kernel_wait = ~host_wait & (gap < consecutive_kernel_delay_ns)
    cat = np.where(host_wait, "host_wait", np.where(kernel_wait, "kernel_wait", "other"))
    res = pd.DataFrame({"stream": df["stream"].to_numpy(), "idle_category": cat, "idle": gap})
    out = res.groupby(["stream", "idle_category"], as_index=False)["idle"].sum()
    out["idle"] = out["idle"].round().astype(np.int64)
    totals = out.groupby("stream")["idle"].transform("sum")
    out["idle_time_ratio"] = np.where(totals > 0, out["idle"] / totals.where(totals > 0, 1), 0.0).round(4)
    out.insert(0, "rank", int(rank))
    return out.rename(columns={"idle": "idle_time_ns"})[["rank", "stream", "idle_category", "idle_time_ns",
                                                         "idle_time_ratio"]]


def _host_ops_with_stream(host_ops: pd.DataFrame) -> pd.DataFrame:
    """Host ops whose Kineto args carry an integer ``stream`` other than -1, shaped as instruction rows."""
    import json

    if "args" not in host_ops or len(host_ops) == 0:
        return host_ops.iloc[0:0][[]]
    a = host_ops["args"].astype(str)
    cand = host_ops[a.str.contains('"stream"', regex=False).to_numpy()]
    keep = []
    for r, txt in zip(cand.index, cand["args"].astype(str)):
        try:
            v = json.loads(txt).get("stream")
        except (ValueError, AttributeError):
            continue
        if type(v) is int and v != -1:
            keep.append(r)
    h = host_ops.loc[keep]
    return pd.DataFrame({"track": -1, "start_ts": h["start_ts"].to_numpy(np.int64),
                         "duration_ns": h["duration_ns"].to_numpy(np.int64), "engine": "Host",
                         "opcode": "kernel", "name": h["name"].astype(str).to_numpy(),
                         "correlation_id": h["correlation_id"].to_numpy(np.int64)},
                        index=pd.Index(-1 - np.asarray(keep, dtype=np.int64), name=host_ops.index.name))


def hta_kernel_selection(instructions: pd.DataFrame, host_ops: pd.DataFrame, *,
                         tracks: pd.DataFrame | None = None, include_last_profiler_step: bool = False,
                         hta_rounding: bool = True, host_ops_with_stream: bool = True) -> pd.DataFrame:
    """The instruction rows HTA 0.5.0 ``TraceAnalysis`` analyses (for exact comparisons with HTA).

    HTA (``Trace._filter_irrelevant_gpu_kernels``), when the trace has two or more distinct
    ``ProfilerStep#N`` names, keeps only host events starting before the last ProfilerStep (or ending by its
    end with ``include_last_profiler_step``) and the device events whose correlation id matches one of them
    (one copy per matching host event, as its merge does); device events without a correlation (e.g. MTIA)
    are filtered by their own start. Rows on stream -1 (device-wide "Event Sync") are dropped: HTA's
    breakdowns only take events with a stream. Needs ``tracks`` for the stream test.

    ``host_ops_with_stream``: HTA takes *every* event with an ``args.stream`` as a GPU event, including the
    host-side ``cpu_op`` that torch.compile / Triton launchers annotate with ``stream``; such host ops are
    appended as pseudo kernel rows (opcode "kernel", index -1 - host row) so the numbers match HTA. They are
    CPU time, so our own (non-emulated) breakdowns never include them."""
    ins = instructions
    if tracks is not None and len(tracks) and len(ins):
        ins = ins[tracks["tid"].reindex(ins["track"].to_numpy()).to_numpy() != -1]
    if host_ops_with_stream:
        ins = pd.concat([ins, _host_ops_with_stream(host_ops)])
    names = host_ops["name"].astype(str)
    is_step = names.str.contains("ProfilerStep", regex=False).to_numpy()
    if names[is_step].nunique() < 2 or len(ins) == 0:
        return ins

    def r_start(s: np.ndarray) -> np.ndarray:
        return -((-s) // 1000) * 1000 if hta_rounding else s

    h_start = r_start(host_ops["start_ts"].to_numpy(np.int64))
    h_end_raw = host_ops["start_ts"].to_numpy(np.int64) + host_ops["duration_ns"].to_numpy(np.int64)
    h_end = (h_end_raw // 1000) * 1000 if hta_rounding else h_end_raw
    if include_last_profiler_step:
        kept_host = h_start <= h_end[is_step].max()
    else:
        kept_host = h_start < h_start[is_step].max()
    cutoff_ok = kept_host
    corr = host_ops["correlation_id"].to_numpy(np.int64)[cutoff_ok]
    counts = pd.Series(corr).value_counts()
    i_corr = ins["correlation_id"].to_numpy(np.int64)
    i_name = ins["name"].astype(str).to_numpy()
    gpu_like = (i_corr >= 0) | np.isin(i_name, ["Event Sync", "Context Sync"])
    reps = counts.reindex(i_corr).fillna(0).to_numpy(np.int64)
    reps = np.where(gpu_like & (i_corr < 0), np.minimum(reps, 1), reps)  # no -1 cross product
    i_start = r_start(ins["start_ts"].to_numpy(np.int64))
    limit = h_end[is_step].max() if include_last_profiler_step else h_start[is_step].max()
    own = (i_start <= limit) if include_last_profiler_step else (i_start < limit)
    reps = np.where(gpu_like, reps, own.astype(np.int64))
    return ins.iloc[np.repeat(np.arange(len(ins)), reps)]


__all__ = ["classify_kernels", "device_activity", "merge_intervals", "temporal_breakdown", "kernel_breakdown",
           "comm_comp_overlap", "idle_time_breakdown", "hta_kernel_selection", "KERNEL_TYPES"]
