"""Device activity: every device interval of a trace (instructions, DMA transfers and, on Neuron, collectives)
with its kernel type, sorted by start once and shared by summary, hot_ops, roofline, diff and the breakdowns.

Kernel types follow Holistic Trace Analysis 0.5.0 (``hta.utils.utils.get_kernel_type``): COMMUNICATION
``^nccl.*Kernel``; MEMORY ``^Memcpy|^Memset|^dma``; OTHER when not compute by
``(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)`` (so cuda_sync "Stream Sync" is OTHER and "Stream Wait
Event" COMPUTATION, as in HTA); COMPUTATION otherwise. Neuron instructions (whose ``opcode`` is not a Kineto
device category) are classified by engine; DMA rows are MEMORY, collectives not tied to an instruction
COMMUNICATION. See ``docs/hta_definitions.md``.

The **analysed span** (:func:`analysis_span`) is the window of a restricted trace, else first to last device
activity (HTA's kernel span), else the trace's time range when it has no device work. Summary's
``total_time``, its idle share and the default temporal breakdown all use it, so they agree.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.categorical import categorical, category_names, code_dtype, per_category
from ..core.commkernels import is_collective_kernel
from ..core.devicetime import group_time
from ..core.intervals import first_rows, is_sorted, merge_where, union_by_key

COMPUTATION, COMMUNICATION, MEMORY, OTHER = "COMPUTATION", "COMMUNICATION", "MEMORY", "OTHER"
KERNEL_TYPES = (COMMUNICATION, MEMORY, COMPUTATION, OTHER)
#: Kineto categories that ``neuron_profiler.importers.kineto`` stores as instruction ``opcode``
KINETO_DEVICE_OPCODES = frozenset({"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset",
                                   "mtia_ccp_events", "cuda_sync", "xpu_sync"})
#: categories HTA's idle-time breakdown takes as kernels (it leaves cuda_sync out)
HTA_IDLE_KERNEL_OPCODES = frozenset({"kernel", "Kernel", "gpu_memset", "Memset", "gpu_memcpy", "Memcpy",
                                     "mtia_ccp_events"})
NEURON_COMPUTE_ENGINES = frozenset({"Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Pool", "Act"})
#: ``table`` codes of activity rows
INSTRUCTIONS, DMA, COLLECTIVES = 0, 1, 2
ACTIVITY_COLUMNS = ["start_ts", "end_ts", "name", "kernel_type", "track", "opcode", "framework_op", "table", "row"]

_COMM_RE = r"^nccl.*Kernel"
_MEM_RE = r"^(?:Memcpy|Memset|dma)"
_NONCOMP_RE = r"^(?:(?:nccl.*Kernel)|(?:.*(?:Memcpy)|(?:Memset))|(?:.*Sync))"
_KT_CODE = {t: i for i, t in enumerate(KERNEL_TYPES)}


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


def kernel_type_codes(ins: pd.DataFrame, hta: bool = True) -> np.ndarray:
    """int8 code (index into ``KERNEL_TYPES``) per instruction row: Kineto rows by name, Neuron rows by engine;
    each distinct name / engine is classified once. ``hta=False`` (the default mode's activity): collective
    kernels HTA's regex misses (symmetric memory, MSCCL++, custom all-reduce:
    :func:`analysis.core.commkernels.is_collective_kernel`) are COMMUNICATION too."""
    opcode, names, engine = (categorical(ins, c) for c in ("opcode", "name", "engine"))
    kineto = per_category(opcode, np.isin(category_names(opcode), list(KINETO_DEVICE_OPCODES)), False)
    uniq = category_names(names)
    by_name = np.array([_KT_CODE[t] for t in classify_kernels(pd.Series(uniq, dtype=object))], dtype=np.int8)
    if not hta and len(uniq):
        comm = np.array([is_collective_kernel(x) for x in uniq], dtype=bool)
        by_name = np.where(comm, np.int8(_KT_CODE[COMMUNICATION]), by_name).astype(np.int8)
    by_engine = np.where(np.isin(category_names(engine), list(NEURON_COMPUTE_ENGINES)),
                         _KT_CODE[COMPUTATION], _KT_CODE[OTHER]).astype(np.int8)
    return np.where(kineto, per_category(names, by_name, _KT_CODE[COMPUTATION]),
                    per_category(engine, by_engine, _KT_CODE[OTHER])).astype(np.int8)


def kernel_type_mask(act: pd.DataFrame, *types: str) -> np.ndarray:
    """Rows of an activity frame whose kernel type is one of ``types`` (on the Categorical codes)."""
    lut = np.zeros(len(KERNEL_TYPES), dtype=bool)
    lut[[KERNEL_TYPES.index(t) for t in types]] = True
    return lut[np.asarray(act["kernel_type"].cat.codes)]


def _int_col(df: pd.DataFrame, col: str, default: int = -1) -> np.ndarray:
    """An int64 column; missing values (e.g. rows concatenated from another table) become ``default``."""
    if col not in df.columns:
        return np.full(len(df), default, np.int64)
    s = df[col]
    return (s.fillna(default) if s.hasnans else s).to_numpy(np.int64)


#: instruction opcodes that are an engine waiting, not working (simulated Neuron traces: a semaphore wait)
WAIT_OPCODES = ("SemaphoreWait",)


def _busy_positions(ins: pd.DataFrame) -> np.ndarray | None:
    """Positions in ``ins`` of the instructions that are work (waits are idle time of their engine); None when
    every row is."""
    if not len(ins) or "opcode" not in ins.columns:
        return None
    op = categorical(ins, "opcode")
    wait = per_category(op, np.isin(category_names(op), list(WAIT_OPCODES)), False)
    return np.flatnonzero(~wait) if wait.any() else None


class _Part:
    """The rows one table adds to an activity frame: ``sel`` (positions of the kept rows, None = all)."""

    def __init__(self, df: pd.DataFrame, sel: np.ndarray | None, name: pd.Categorical, opcode: pd.Categorical,
                 ktype: np.ndarray | int, table: int, rows: np.ndarray, index: np.ndarray | int) -> None:
        self.df, self.sel, self.name, self.opcode, self.ktype = df, sel, name, opcode, ktype
        self.table, self.rows, self.index = table, rows, index  # index: array, or the start of a RangeIndex
        self.m = len(df) if sel is None else len(sel)
        self.luts: dict[str, np.ndarray] = {}

    def fill(self, out: np.ndarray, col, selected: bool = False) -> None:
        """Write this part's values of ``col`` into ``out``: a scalar, an array over the whole table, or
        (``selected``) an array of the part's rows only."""
        if np.ndim(col) == 0 or selected or self.sel is None:
            out[...] = col
        else:
            np.take(col, self.sel, out=out, mode="clip")  # mode="clip": not buffered (positions are valid)


def _union_categories(cats: list[pd.Categorical]) -> tuple[pd.Index, list[np.ndarray]]:
    """(categories of the concatenation, per part the lookup from its codes to the union's codes, -1 last),
    the categories :func:`analysis.core.categorical.concat_categoricals` gives."""
    if len(cats) == 1:
        c = cats[0].categories
        return c, [np.append(np.arange(len(c)), -1).astype(code_dtype(len(c)))]
    union = pd.Index(np.concatenate([category_names(c) for c in cats]), dtype=object).unique()
    dt = code_dtype(len(union))
    return union, [np.append(union.get_indexer(category_names(c)), -1).astype(dt) for c in cats]


def _union_codes(p: _Part, key: str) -> np.ndarray:
    """A part's ``key`` codes in the categories of the concatenation: as they are when its categories come
    first in the union (the instructions' always do: no lookup of every row, no intp copy of the codes)."""
    codes = np.asarray(getattr(p, key).codes)
    lut = p.luts[key]
    if np.array_equal(lut[:-1], np.arange(len(lut) - 1)):
        return codes if codes.dtype == lut.dtype else codes.astype(lut.dtype)
    return lut[codes]


def _instruction_part(ins: pd.DataFrame, hta: bool = True) -> _Part:
    busy = _busy_positions(ins)
    n = len(ins) if busy is None else len(busy)
    idx = ins.index
    # a RangeIndex: row id = start + position, no n-long id array materialised
    index = int(idx.start) if isinstance(idx, pd.RangeIndex) and idx.step == 1 else idx.to_numpy()
    return _Part(ins, busy, categorical(ins, "name"), categorical(ins, "opcode"),
                 kernel_type_codes(ins, hta) if n else np.zeros(0, np.int8), INSTRUCTIONS,
                 np.arange(len(ins), dtype=np.int64) if busy is None else busy, index)


def _table_part(df: pd.DataFrame, name: str, opcode: str, ktype: str, code: int, pos: np.ndarray) -> _Part:
    m = len(df)
    names = categorical(df, name) if name != "dma" else pd.Categorical.from_codes(np.zeros(m, np.int8), ["dma"])
    return _Part(df, None, names, pd.Categorical.from_codes(np.zeros(m, np.int8), [opcode]), _KT_CODE[ktype],
                 code, pos, -1 - df.index.to_numpy(np.int64))


def _fill_parts(parts: list[_Part], out: np.ndarray, value, selected: bool = False) -> np.ndarray:
    """``out`` filled part by part with ``value(part)`` (see :meth:`_Part.fill`)."""
    o = 0
    for p in parts:
        p.fill(out[o:o + p.m], value(p), selected)
        o += p.m
    return out


def activity_frame(instructions: pd.DataFrame, *, dma: pd.DataFrame | None = None,
                   collectives: pd.DataFrame | None = None, sort: bool = False,
                   window: tuple[int, int] | None = None, hta_kernel_types: bool = True) -> pd.DataFrame:
    """Device intervals with their kernel type. Columns: ``start_ts``, ``end_ts`` (ns, int64), ``name``,
    ``kernel_type`` (one of ``KERNEL_TYPES``), ``opcode`` (Categoricals), ``track``, ``framework_op`` (host op
    row, -1 none), ``table`` (0 instructions, 1 dma, 2 collectives), ``row`` (position of the row in its
    table); index = instruction row id (dma / collective rows get -1 - row).

    Kineto rows are classified by name (:func:`classify_kernels`; with ``hta_kernel_types=False`` collective
    kernels HTA's regex misses are COMMUNICATION too, as in a trace's default activity), Neuron rows by engine;
    DMA rows are MEMORY and collectives without an ``instruction`` COMMUNICATION; ``WAIT_OPCODES`` rows (an
    engine waiting on a semaphore) are not activity (HTA's rounding to whole µs:
    :func:`analysis.analyses.hta.quantise`). ``window`` clips the intervals to [lo, hi). ``sort`` orders the
    rows by start (stable), which makes every later interval union cheap (``Trace.device_activity``).

    Each column is written once, straight from the tables into its array (no per-table copy, no
    concatenated copy); when sorting, the unsorted int64 columns pass through one scratch array reused
    column by column, so a 5M-row frame allocates little beyond itself."""
    parts = [_instruction_part(instructions, hta_kernel_types)]
    if dma is not None and len(dma):
        parts.append(_table_part(dma, "dma", "dma", MEMORY, DMA, np.arange(len(dma), dtype=np.int64)))
    if collectives is not None and len(collectives):
        keep = (collectives["instruction"].to_numpy() < 0) if "instruction" in collectives else \
            np.ones(len(collectives), bool)
        if keep.any():
            parts.append(_table_part(collectives[keep], "operation", "collective", COMMUNICATION, COLLECTIVES,
                                     np.flatnonzero(keep)))
    n = sum(p.m for p in parts)
    start = _fill_parts(parts, np.empty(n, np.int64), lambda p: p.df["start_ts"].to_numpy(np.int64))
    if sort and window is None and n and not is_sorted(start):
        # the order depends on the starts alone: the sorted ends are made from the sorted starts, the
        # durations passing through the starts' array (no unsorted end column)
        order = np.argsort(start, kind="stable")
        cols = {"start_ts": np.take(start, order)}
        cols["end_ts"] = np.take(_fill_parts(parts, start, _durations), order)
        cols["end_ts"] += cols["start_ts"]
        return _activity_columns(parts, n, order, start, cols, instructions.index.name)
    end = _fill_parts(parts, np.empty(n, np.int64), _durations)
    end += start
    if window is not None:
        _clip_inplace(start, end, *window)
    order_or_none = np.argsort(start, kind="stable") if sort and n and not is_sorted(start) else None
    cols = {"start_ts": start if order_or_none is None else np.take(start, order_or_none),
            "end_ts": end if order_or_none is None else np.take(end, order_or_none)}
    del end
    return _activity_columns(parts, n, order_or_none, start, cols, instructions.index.name)


def _activity_columns(parts: list[_Part], n: int, order: np.ndarray | None, scratch: np.ndarray, cols: dict,
                      index_name) -> pd.DataFrame:
    """The activity frame from its sorted start / end columns ``cols``: the other columns written part by part
    and put in ``order`` (None: as they are); ``scratch`` (an int64 array of ``n``, free once sorted) holds
    each unsorted int64 column in turn."""
    def final(unsorted: np.ndarray) -> np.ndarray:
        return unsorted if order is None else np.take(unsorted, order)

    pool = [scratch]  # emptied once the columns are written, so the scratch array is freed before the frame
    del scratch

    def buf(dtype=np.int64) -> np.ndarray:  # where an unsorted column is written
        return np.empty(n, dtype) if order is None or dtype != np.int64 else pool[0]

    categories = {}
    for key in ("name", "opcode"):
        categories[key], luts = _union_categories([getattr(p, key) for p in parts])
        for p, lut in zip(parts, luts):
            p.luts[key] = lut
    codes = {key: _fill_parts(parts, np.empty(n, parts[0].luts[key].dtype),
                              lambda p, key=key: _union_codes(p, key))
             for key in ("name", "opcode")}
    cols["name"] = final(codes.pop("name"))
    cols["kernel_type"] = final(_fill_parts(parts, buf(np.int8), lambda p: p.ktype))
    cols["track"] = final(_fill_parts(parts, buf(), lambda p: _int_col(p.df, "track")))
    cols["opcode"] = final(codes.pop("opcode"))
    cols["framework_op"] = final(_fill_parts(parts, buf(), lambda p: _int_col(p.df, "framework_op")))
    cols["table"] = final(_fill_parts(parts, buf(np.int8), lambda p: p.table))
    cols["row"] = final(_fill_parts(parts, buf(), lambda p: p.rows, selected=True))
    index = _index_from_rows(parts, cols["row"], cols["table"], order)
    if index is None:
        index = final(_fill_parts(parts, buf(), _index_values, selected=True))
    pool.clear()
    for k in ("name", "kernel_type", "opcode"):
        cols[k] = pd.Categorical.from_codes(cols[k], list(KERNEL_TYPES) if k == "kernel_type" else categories[k],
                                            validate=False)
    return pd.DataFrame(cols, index=pd.Index(index, name=index_name, copy=False), copy=False)


def _index_from_rows(parts: list[_Part], row: np.ndarray, table: np.ndarray, order: np.ndarray | None
                     ) -> np.ndarray | None:
    """The sorted index values made from the sorted ``row`` / ``table`` columns, in the array of ``order`` (free
    once every column is gathered: no gather, no new array), when each part's index follows from its rows (the
    instructions' RangeIndex: start + row; the other tables' -1 - row); None otherwise."""
    if order is None or order.dtype != np.int64 or not isinstance(parts[0].index, int) \
            or not all(isinstance(p.index, np.ndarray) and np.array_equal(p.index, -1 - p.rows) for p in parts[1:]):
        return None
    out, start = order, parts[0].index
    if len(parts) == 1:
        return np.add(row, start, out=out)
    np.negative(row, out=out)
    out -= 1
    is_ins = table == INSTRUCTIONS
    np.copyto(out, row, where=is_ins)
    if start:
        np.add(out, start, out=out, where=is_ins)
    return out


def _durations(p: _Part) -> np.ndarray:
    return p.df["duration_ns"].to_numpy(np.int64)


def _index_values(p: _Part) -> np.ndarray:
    """The index values of a part's rows (instruction row ids; -1 - row of the other tables)."""
    if isinstance(p.index, int):  # a RangeIndex: row id = start + position
        return p.rows + p.index if p.index else p.rows
    return p.index if p.sel is None else p.index[p.sel]


def _clip_inplace(start: np.ndarray, end: np.ndarray, lo: int | None, hi: int | None) -> None:
    """:func:`analysis.core.intervals.clip`, in place."""
    if lo is not None:
        np.maximum(start, lo, out=start)
        np.maximum(end, lo, out=end)
    if hi is not None:
        np.minimum(end, hi, out=end)
        np.minimum(start, end, out=start)


def trace_activity(trace) -> pd.DataFrame:
    """:func:`activity_frame` of a trace, sorted by start, memoised per trace (window).

    The trace's instructions, DMA transfers and, for Neuron traces, collectives (in Kineto imports the
    collectives table holds host-side ``record_param_comms`` calls; the device side of NCCL collectives is in
    the instructions as kernels), clipped to the window of a restricted trace. HTA's activity instead:
    :func:`analysis.analyses.hta.hta_activity`."""
    return trace.memo("activity", lambda: _trace_activity(trace))


def _trace_activity(trace) -> pd.DataFrame:
    cc = None if trace.is_kineto_import else trace.table("collectives")
    dma = trace.table("dma", ["track", "start_ts", "duration_ns", "framework_op"])
    return activity_frame(trace.analysis_table("instructions"), dma=dma, collectives=cc, sort=True,
                          window=trace.window_bounds, hta_kernel_types=False)


def analysis_span(trace) -> tuple[int, int]:
    """(start_ns, end_ns) of the analysed span (see the module doc)."""
    if trace.window_bounds is not None:
        return trace.window_bounds
    return trace.memo("analysis_span", lambda: _span(trace))


def _span(trace) -> tuple[int, int]:
    act = trace_activity(trace)
    if len(act):
        return int(act["start_ts"].iloc[0]), int(act["end_ts"].to_numpy().max())
    return trace.time_range


def invocation_time(trace) -> pd.Series:
    """Device time per host-op row (its invocation): the union of its instructions, DMA transfers and
    collectives (ns, indexed by host-op row id; memoised per trace)."""
    def compute() -> pd.Series:
        if trace.window_bounds is None and not trace.has_memo("activity"):
            return _invocation_time_from_tables(trace)  # the same sums without building the activity frame
        act = trace_activity(trace)  # the rows without a launching op left out chunk by chunk (no copies)
        return union_by_key(act["framework_op"].to_numpy(), act["start_ts"].to_numpy(), act["end_ts"].to_numpy(),
                            sorted_by_start=True, skip_negative=True)
    return trace.memo("invocation_time", compute)


def _invocation_time_from_tables(trace) -> pd.Series:
    """:func:`invocation_time` of a whole trace read from the tables: the rows :func:`_trace_activity` takes (busy
    instructions, DMA transfers, collectives without an instruction on non-Kineto traces), only their host op,
    start and end (Compare's partner trace needs these sums, not the rest of the activity frame)."""
    ins = trace.analysis_table("instructions")
    parts: list[tuple[pd.DataFrame, np.ndarray | None]] = [(ins, _busy_positions(ins))]
    parts.append((trace.table("dma", ["track", "start_ts", "duration_ns", "framework_op"]), None))
    if not trace.is_kineto_import:
        cc = trace.table("collectives")
        if len(cc):
            parts.append((cc[cc["instruction"].to_numpy() < 0] if "instruction" in cc else cc, None))
    keys, starts, ends = [], [], []
    for df, sel in parts:
        fop, s = _int_col(df, "framework_op"), df["start_ts"].to_numpy(np.int64)
        e = s + df["duration_ns"].to_numpy(np.int64)
        m = fop >= 0 if sel is None else np.zeros(len(df), bool)
        if sel is not None:
            m[sel] = fop[sel] >= 0
        keys.append(fop[m])
        starts.append(s[m])
        ends.append(e[m])
    key = np.concatenate(keys)
    return union_by_key(key, np.concatenate(starts), np.concatenate(ends))


def invocation_group_time(trace, work: pd.DataFrame, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Device time per group of instruction rows (``work`` rows, ``group`` codes): each invocation's time
    (:func:`invocation_time`, DMA included) counted once, in the group of its first row; rows without a
    launching op: the union of the group's own rows. The definition of :mod:`analysis.core.devicetime`."""
    fop = work["framework_op"].to_numpy()
    linked = fop >= 0
    t = np.zeros(n_groups)
    if linked.any():
        every = bool(linked.all())  # then no gathered copies of the columns
        inv, first_idx = first_rows(fop if every else fop[linked])
        elapsed = invocation_time(trace).reindex(inv).fillna(0.0).to_numpy()
        t += np.bincount((group if every else group[linked])[first_idx], weights=elapsed, minlength=n_groups)
    if (~linked).any():
        s = work["start_ts"].to_numpy()[~linked]
        e = s + work["duration_ns"].to_numpy()[~linked]
        t += group_time(group[~linked], np.full(int((~linked).sum()), -1), s, e, n_groups)
    return t


def merged_activity(trace, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The union of the trace's device activity (of one kernel type, or all) as sorted disjoint (start, end)
    arrays, memoised: the summary, the breakdowns and the recommendations share it (HTA's:
    :func:`analysis.analyses.hta.hta_merged`)."""
    return trace.memo(("merged", kernel_type), lambda: union_of_kind(trace_activity(trace), kernel_type))


def union_of_kind(act: pd.DataFrame, kernel_type: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The union of a start-sorted activity frame's intervals (of one kernel type, or all) as sorted disjoint
    (start, end) arrays (:func:`analysis.core.intervals.merge_where`: chunk by chunk, no copies of the columns)."""
    s, e = act["start_ts"].to_numpy(np.int64), act["end_ts"].to_numpy(np.int64)
    if kernel_type is None:
        return merge_where(s, e)
    lut = np.zeros(len(KERNEL_TYPES), dtype=bool)
    lut[KERNEL_TYPES.index(kernel_type)] = True
    codes = np.asarray(act["kernel_type"].cat.codes)
    return merge_where(s, e, lambda a, b: lut[codes[a:b]])
