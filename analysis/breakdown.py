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
``collectives=`` (rows not already tied to an instruction -> COMMUNICATION) to count those too. The ``Trace``
methods do so (collectives only for Neuron traces: in Kineto imports they are host-side ``record_param_comms``)
and pass one shared, start-sorted ``Trace.device_activity()`` frame as ``activity=``.

Speed: names, engines and opcodes stay Categorical and are classified once per category; rows are looked up
by integer code, and interval unions run on sorted int64 arrays (5M device rows: well under a second).
Where HTA raises (no device events, negative rounded durations) these functions return the documented
empty / zero / NaN results instead.
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


_KT_CODE = {t: i for i, t in enumerate(KERNEL_TYPES)}
TEMPORAL_COLUMNS = ["rank", "idle_time_ns", "compute_time_ns", "non_compute_time_ns", "kernel_time_ns",
                    "idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
KERNEL_TYPE_COLUMNS = ["kernel_type", "sum_ns", "percentage"]
KERNEL_NAME_COLUMNS = ["name", "kernel_type", "sum_ns", "max_ns", "min_ns", "mean_ns", "std_ns", "count"]
OVERLAP_COLUMNS = ["rank", "comm_time_ns", "overlap_time_ns", "comp_comm_overlap_pctg"]


def _as_categorical(df: pd.DataFrame, col: str) -> pd.Categorical:
    """Column ``col`` as a Categorical ("" for every row when absent); object columns are factorised once."""
    if col not in df.columns:
        return pd.Categorical.from_codes(np.zeros(len(df), dtype=np.int8), [""])
    s = df[col]
    return s.array if isinstance(s.dtype, pd.CategoricalDtype) else pd.Categorical(s.astype(object))


def _per_category(cat: pd.Categorical, per_cat: np.ndarray, missing) -> np.ndarray:
    """Row values looked up by category code (``per_cat[i]`` for category i, ``missing`` for NaN)."""
    return np.append(np.asarray(per_cat), missing)[np.asarray(cat.codes)]


def _category_names(cat: pd.Categorical) -> np.ndarray:
    return np.asarray(cat.categories.astype(str), dtype=object)


def _concat_categoricals(parts: list[pd.Categorical]) -> pd.Categorical:
    """Concatenate Categoricals on their codes (categories unioned as plain strings)."""
    if len(parts) == 1:
        return parts[0]
    cats = pd.Index(np.concatenate([_category_names(p) for p in parts]), dtype=object).unique()
    codes = [np.append(cats.get_indexer(_category_names(p)), -1)[np.asarray(p.codes)] for p in parts]
    return pd.Categorical.from_codes(np.concatenate(codes), cats, validate=False)


def _kernel_type_codes(ins: pd.DataFrame) -> np.ndarray:
    """int8 code (index into ``KERNEL_TYPES``) per instruction row: Kineto rows by name, Neuron rows by engine;
    each distinct name / engine is classified once."""
    opcode, names, engine = (_as_categorical(ins, c) for c in ("opcode", "name", "engine"))
    kineto = _per_category(opcode, np.isin(_category_names(opcode), list(KINETO_DEVICE_OPCODES)), False)
    by_name = np.array([_KT_CODE[t] for t in classify_kernels(pd.Series(_category_names(names), dtype=object))],
                       dtype=np.int8)
    by_engine = np.where(np.isin(_category_names(engine), list(NEURON_COMPUTE_ENGINES)),
                         _KT_CODE[COMPUTATION], _KT_CODE[OTHER]).astype(np.int8)
    return np.where(kineto, _per_category(names, by_name, _KT_CODE[COMPUTATION]),
                    _per_category(engine, by_engine, _KT_CODE[OTHER])).astype(np.int8)


def device_activity(instructions: pd.DataFrame, *, dma: pd.DataFrame | None = None,
                    collectives: pd.DataFrame | None = None, hta_rounding: bool = False,
                    sort: bool = False) -> pd.DataFrame:
    """Device intervals with their kernel type: columns ``start_ts``, ``end_ts`` (ns, int64), ``name``,
    ``kernel_type`` (one of ``KERNEL_TYPES``), ``opcode`` (Categoricals), ``track`` (int64); index =
    instruction row id (dma / collective rows get -1 - row).

    Kineto rows are classified by name (``classify_kernels``), Neuron rows by engine; DMA rows are MEMORY and
    collectives without an ``instruction`` COMMUNICATION. ``hta_rounding`` rounds inward to whole µs as
    HTA does on load (ts = ceil, end = floor; may give zero or negative durations, like HTA). ``sort`` orders
    the rows by start (stable), which makes every later interval union cheap (``Trace.device_activity``)."""
    ins = instructions
    n = len(ins)
    starts = [ins["start_ts"].to_numpy(np.int64)]
    ends = [starts[0] + ins["duration_ns"].to_numpy(np.int64)]
    names = [_as_categorical(ins, "name")]
    opcodes = [_as_categorical(ins, "opcode")]
    ktypes = [_kernel_type_codes(ins) if n else np.zeros(0, np.int8)]
    tracks = [ins["track"].to_numpy(np.int64) if "track" in ins else np.full(n, -1, np.int64)]
    index = [ins.index.to_numpy()]

    def add(df: pd.DataFrame, name, opcode: str, ktype: str) -> None:
        s = df["start_ts"].to_numpy(np.int64)
        starts.append(s)
        ends.append(s + df["duration_ns"].to_numpy(np.int64))
        m = len(df)
        names.append(_as_categorical(df, name) if name != "dma" else pd.Categorical.from_codes(
            np.zeros(m, np.int8), ["dma"]))
        opcodes.append(pd.Categorical.from_codes(np.zeros(m, np.int8), [opcode]))
        ktypes.append(np.full(m, _KT_CODE[ktype], np.int8))
        tracks.append(df["track"].to_numpy(np.int64))
        index.append(-1 - df.index.to_numpy(np.int64))

    if dma is not None and len(dma):
        add(dma, "dma", "dma", MEMORY)
    if collectives is not None and len(collectives):
        c = collectives[collectives["instruction"].to_numpy() < 0] if "instruction" in collectives else collectives
        if len(c):
            add(c, "operation", "collective", COMMUNICATION)
    cat = lambda parts: parts[0] if len(parts) == 1 else np.concatenate(parts)  # noqa: E731
    start, end, kt, track, idx = cat(starts), cat(ends), cat(ktypes), cat(tracks), cat(index)
    name, opcode = _concat_categoricals(names), _concat_categoricals(opcodes)
    if hta_rounding:
        start, end = -((-start) // 1000) * 1000, (end // 1000) * 1000
    if sort and len(start) and not _is_sorted(start):
        o = np.argsort(start, kind="stable")
        start, end, kt, track, idx, name, opcode = (x[o] for x in (start, end, kt, track, idx, name, opcode))
    return pd.DataFrame({"start_ts": start, "end_ts": end, "name": name,
                         "kernel_type": pd.Categorical.from_codes(kt, list(KERNEL_TYPES), validate=False),
                         "track": track, "opcode": opcode},
                        index=pd.Index(idx, name=ins.index.name), copy=False)


def _is_sorted(a: np.ndarray) -> bool:
    return bool(len(a) < 2 or (a[1:] >= a[:-1]).all())


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of intervals as sorted disjoint (start, end) arrays; same grouping rule as HTA's
    ``merge_kernel_intervals`` (an interval starting at or before the running max end joins the group; a
    group ends at the max end of its members). Already sorted input skips the sort."""
    s, e = np.asarray(start, dtype=np.int64), np.asarray(end, dtype=np.int64)
    if len(s) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if not _is_sorted(s):
        o = np.argsort(s, kind="stable")
        s, e = s[o], e[o]
    prev_max = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    np.greater(s[1:], prev_max[:-1], out=new[1:])
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def _type_mask(act: pd.DataFrame, ktype: str) -> np.ndarray:
    return np.asarray(act["kernel_type"].cat.codes) == KERNEL_TYPES.index(ktype) \
        if isinstance(act["kernel_type"].dtype, pd.CategoricalDtype) else (act["kernel_type"] == ktype).to_numpy()


def _merged(act: pd.DataFrame, ktype: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    s, e = act["start_ts"].to_numpy(np.int64), act["end_ts"].to_numpy(np.int64)
    if ktype is not None:
        m = _type_mask(act, ktype)
        s, e = s[m], e[m]
    return merge_intervals(s, e)


def _activity(instructions: pd.DataFrame | None, kw: dict) -> pd.DataFrame:
    if kw.get("activity") is not None:
        return kw["activity"]
    if instructions is None:
        raise ValueError("pass the instructions table or activity= (a device_activity frame)")
    return device_activity(instructions, dma=kw.get("dma"), collectives=kw.get("collectives"),
                           hta_rounding=kw.get("hta_rounding", False))


def temporal_breakdown(instructions: pd.DataFrame | None, rank: int = 0, *, hta_rounding: bool = False,
                       dma: pd.DataFrame | None = None, collectives: pd.DataFrame | None = None,
                       activity: pd.DataFrame | None = None) -> pd.DataFrame:
    """Idle / compute / non-compute device time of one rank (HTA ``get_temporal_breakdown``).

    One row; columns: ``rank``; ``idle_time_ns``, ``compute_time_ns``, ``non_compute_time_ns``,
    ``kernel_time_ns`` (ns; kernel_time = span from the first device event start to the last end, the
    denominator); ``idle_time_pctg``, ``compute_time_pctg``, ``non_compute_time_pctg`` (percent, 2 decimals).
    All zero when there is no device activity (HTA raises there). ``activity``: a precomputed
    :func:`device_activity` frame (then ``instructions``, ``dma``, ``collectives``, ``hta_rounding`` are unused)."""
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding,
                                   "activity": activity})
    if len(act) == 0:
        span = busy = compute = 0
    else:
        gs, ge = _merged(act)
        span = int(ge[-1] - gs[0])
        busy = int(ge.sum() - gs.sum())
        cs, ce = _merged(act, COMPUTATION)
        compute = int(ce.sum() - cs.sum())
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
        gs, ge = _merged(act, t)
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
    sums = np.bincount(running[keep], weights=dur[keep], minlength=1 << len(types))
    present = np.flatnonzero(np.bincount(running[keep], minlength=1 << len(types)))
    labels = [" overlapping ".join(tp for i, tp in enumerate(types) if r & (1 << i)) for r in present]
    return pd.DataFrame({"kernel_type": pd.Series(labels, dtype=object),
                         "sum_ns": sums[present].round().astype(np.int64)}).sort_values(
        "kernel_type", ignore_index=True)


def kernel_breakdown(instructions: pd.DataFrame | None, *, include_memory_kernels: bool = True,
                     hta_rounding: bool = False, dma: pd.DataFrame | None = None,
                     collectives: pd.DataFrame | None = None,
                     activity: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Device time by kernel type and by kernel name (HTA ``get_gpu_kernel_breakdown``).

    Returns ``(by_type, by_name)``:
    * ``by_type``: ``kernel_type`` (COMPUTATION, COMMUNICATION, MEMORY, or "A overlapping B" for time when
      several types run at once), ``sum_ns`` (ns of exclusive wall time), ``percentage`` (of the total, 1
      decimal); sorted by sum_ns descending. MEMORY is left out when ``include_memory_kernels`` is False;
      OTHER (syncs) is never included, as in HTA.
    * ``by_name``: ``name``, ``kernel_type``, ``sum_ns``, ``max_ns``, ``min_ns``, ``mean_ns``, ``std_ns``
      (sample std, 0 for one kernel), ``count``; every kernel name, sorted by sum_ns descending.
    Both empty (same columns) without device activity. ``activity``: see :func:`temporal_breakdown`."""
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding,
                                   "activity": activity})
    types = [COMPUTATION, COMMUNICATION] + ([MEMORY] if include_memory_kernels else [])
    by_type = _type_time(act, types)
    by_type = by_type.sort_values("sum_ns", ascending=False, ignore_index=True)
    total = by_type["sum_ns"].sum()
    by_type["percentage"] = (100.0 * by_type["sum_ns"] / total).round(1) if total else 0.0
    g = pd.DataFrame({"name": act["name"], "kernel_type": act["kernel_type"],
                      "dur": act["end_ts"].to_numpy() - act["start_ts"].to_numpy()}, index=act.index)
    by_name = g.groupby(["name", "kernel_type"], as_index=False, observed=True)["dur"].agg(
        sum_ns="sum", max_ns="max", min_ns="min", mean_ns="mean", std_ns="std", count="count")
    by_name["std_ns"] = by_name["std_ns"].fillna(0.0)
    for c in ("name", "kernel_type"):
        by_name[c] = by_name[c].astype(object)
    by_name = by_name.sort_values("sum_ns", ascending=False, ignore_index=True)
    return by_type, by_name


def comm_comp_overlap(instructions: pd.DataFrame | None, rank: int = 0, *, hta_rounding: bool = False,
                      dma: pd.DataFrame | None = None, collectives: pd.DataFrame | None = None,
                      activity: pd.DataFrame | None = None) -> pd.DataFrame:
    """Share of communication time overlapped by computation (HTA ``get_comm_comp_overlap``).

    One row: ``rank``, ``comm_time_ns`` (union of COMMUNICATION), ``overlap_time_ns`` (ns when a
    communication and a computation interval both run), ``comp_comm_overlap_pctg`` (percent, 2 decimals;
    NaN when there is no communication, like HTA's 0/0). ``activity``: see :func:`temporal_breakdown`."""
    act = _activity(instructions, {"dma": dma, "collectives": collectives, "hta_rounding": hta_rounding,
                                   "activity": activity})
    cs, ce = _merged(act, COMMUNICATION)
    ps, pe = _merged(act, COMPUTATION)
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


IDLE_CATEGORIES = ("host_wait", "kernel_wait", "other")
IDLE_COLUMNS = ["rank", "stream", "idle_category", "idle_time_ns", "idle_time_ratio"]


def _launch_start(k: pd.DataFrame, host_ops: pd.DataFrame | None, flows: pd.DataFrame | None
                  ) -> tuple[np.ndarray, np.ndarray]:
    """(start ns of the launching host op, has one) per row of ``k`` (first ``launch`` flow per instruction)."""
    launch, has = np.zeros(len(k), dtype=np.int64), np.zeros(len(k), dtype=bool)
    if flows is None or not len(flows) or host_ops is None or not len(host_ops) or not len(k):
        return launch, has
    m = (_per_category(_as_categorical(flows, "kind"), _category_names(_as_categorical(flows, "kind")) == "launch",
                       False)
         & _per_category(_as_categorical(flows, "src_table"),
                         _category_names(_as_categorical(flows, "src_table")) == "host_ops", False)
         & _per_category(_as_categorical(flows, "dst_table"),
                         _category_names(_as_categorical(flows, "dst_table")) == "instructions", False))
    dst = flows["dst_row"].to_numpy(np.int64)[m]
    src = flows["src_row"].to_numpy(np.int64)[m]
    dst, first = np.unique(dst, return_index=True)  # first launch flow of each instruction, as drop_duplicates
    src = src[first]
    hpos = host_ops.index.get_indexer(src)
    ok = hpos >= 0
    dst, src_ts = dst[ok], host_ops["start_ts"].to_numpy(np.int64)[hpos[ok]]
    pos = np.searchsorted(dst, k.index.to_numpy(np.int64)) if len(dst) else np.zeros(len(k), np.int64)
    pos = np.minimum(pos, max(len(dst) - 1, 0))
    has = (dst[pos] == k.index.to_numpy(np.int64)) if len(dst) else has
    launch[has] = src_ts[pos[has]]
    return launch, has


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
    (share of the stream's idle time). Empty (same columns) without device rows (HTA raises there)."""
    ins = instructions
    opcode = _as_categorical(ins, "opcode")
    names = _category_names(opcode)
    keep_cat = np.isin(names, list(HTA_IDLE_KERNEL_OPCODES)) | ~np.isin(names, list(KINETO_DEVICE_OPCODES))
    keep = _per_category(opcode, keep_cat, True)
    k = ins[keep] if not keep.all() else ins
    start = k["start_ts"].to_numpy(np.int64)
    end = start + k["duration_ns"].to_numpy(np.int64)
    launch, has_launch = _launch_start(k, host_ops, flows)
    if hta_rounding:
        start, end = -((-start) // 1000) * 1000, (end // 1000) * 1000
        launch = -((-launch) // 1000) * 1000
    track = k["track"].to_numpy(np.int64) if "track" in k else np.full(len(k), -1, np.int64)
    # stream per distinct track (few), then per row by lookup: no hashing of millions of rows
    t_lo = int(track.min()) if len(track) else 0
    t_ids = np.flatnonzero(np.bincount(track - t_lo)) + t_lo if len(track) else track
    t_stream = t_ids
    if tracks is not None and len(tracks) and len(k):
        pos = tracks.index.get_indexer(t_ids)
        t_stream = np.where(pos >= 0, tracks["tid"].to_numpy(np.int64)[np.maximum(pos, 0)], -1)
    s_vals, t_code = np.unique(t_stream, return_inverse=True)
    lut = np.zeros(int(t_ids[-1] - t_lo) + 1 if len(t_ids) else 1, dtype=np.int32)
    lut[t_ids - t_lo] = t_code
    s_codes = lut[track - t_lo] if len(track) else np.zeros(0, np.int32)
    if streams:
        m = np.isin(s_vals, list(streams))[s_codes]
        s_codes, start, end, launch, has_launch = s_codes[m], start[m], end[m], launch[m], has_launch[m]
    if not len(start):
        return pd.DataFrame({"rank": pd.Series(dtype=np.int64), "stream": pd.Series(dtype=np.int64),
                             "idle_category": pd.Series(dtype=object), "idle_time_ns": pd.Series(dtype=np.int64),
                             "idle_time_ratio": pd.Series(dtype=float)})
    if _is_sorted(start) and len(s_vals) < (1 << 15):  # already by start: a stable radix sort by stream
        o = np.argsort(s_codes.astype(np.int16), kind="stable")
    else:
        o = np.lexsort((start, s_codes))  # by stream, then start (stable)
    s_codes, start, end, launch, has_launch = s_codes[o], start[o], end[o], launch[o], has_launch[o]
    first = np.ones(len(start), dtype=bool)
    first[1:] = s_codes[1:] != s_codes[:-1]
    prev_end = np.empty_like(end)
    prev_end[0] = 0
    prev_end[1:] = end[:-1]
    gap = np.where(first, 0, start - prev_end)  # first kernel of a stream: no gap (HTA: NaN, summed as 0)
    host_wait = ~first & has_launch & (launch > prev_end)
    kernel_wait = ~first & ~host_wait & (gap < consecutive_kernel_delay_ns)
    cat = np.where(host_wait, 0, np.where(kernel_wait, 1, 2))
    key = s_codes.astype(np.int64) * 3 + cat
    sums = np.bincount(key, weights=gap.astype(np.float64), minlength=3 * len(s_vals))
    present = np.flatnonzero(np.bincount(key, minlength=3 * len(s_vals)))
    idle = sums[present].round().astype(np.int64)
    per_stream = np.bincount(present // 3, weights=idle, minlength=len(s_vals))[present // 3]
    ratio = np.where(per_stream > 0, idle / np.where(per_stream > 0, per_stream, 1), 0.0).round(4)
    return pd.DataFrame({"rank": np.full(len(present), int(rank), dtype=np.int64),
                         "stream": np.asarray(s_vals)[present // 3].astype(np.int64),
                         "idle_category": np.array(IDLE_CATEGORIES, dtype=object)[present % 3],
                         "idle_time_ns": idle, "idle_time_ratio": ratio})


from .hta_selection import hta_kernel_selection  # noqa: E402  (re-exported; HTA's event selection)


__all__ = ["TEMPORAL_COLUMNS", "KERNEL_TYPE_COLUMNS", "KERNEL_NAME_COLUMNS", "OVERLAP_COLUMNS", "IDLE_COLUMNS",
           "classify_kernels", "device_activity", "merge_intervals", "temporal_breakdown", "kernel_breakdown",
           "comm_comp_overlap", "idle_time_breakdown", "hta_kernel_selection", "KERNEL_TYPES"]
