"""The work of each device row: the op it belongs to, its FLOPs and HBM bytes, placement and dtype.

* :func:`op_flops_and_bytes`: per host op, from its recorded shapes through the project's one op model
  (:func:`neuron_profiler.opmodel.lower_signature`: FLOPs of matrix and elementwise work, the bytes an op
  moves), or Kineto's ``flops`` when present. This is how imported GPU traces get FLOPs and bytes.
* :func:`instruction_work`: per device instruction, the basis of summary, hot_ops, roofline and diff.
  Neuron instructions carry ``raw_flops`` and ``hbm_*_bytes`` themselves; on traces whose instructions carry
  none (imported GPU traces), the launching op's shape-derived FLOPs/bytes are split over its kernels in
  proportion to their durations. ``flops_known`` / ``bytes_known`` say where that is impossible (no recorded
  shapes, kernels without a launching op, data-dependent sizes): those rows count 0 and the aggregates say so.
"""
from __future__ import annotations

import json
from functools import lru_cache

import numpy as np
import pandas as pd

from neuron_profiler.opmodel import TENSOR_ENGINE_CLASSES, classify, known_no_work, lower_signature, wants_concrete
from neuron_profiler.opmodel.inductor import is_inductor_kernel

from ..core.categorical import (
    as_cat,
    cat_map,
    cat_pick,
    cat_values,
    cat_where,
    column,
    empty_cat,
)
from ..core.commkernels import is_collective_kernel, is_collective_op
from ..core.tables import ANALYSIS_COLUMNS, COPY_ENGINES, MATRIX_ENGINES, NON_COMPUTE_ENGINES, row_positions
from ..metrics import canonical_dtype
from ..registry import Column, register
from .opcontext import (
    NEEDS_OUT_SHAPE,
    NO_SHAPES,
    REDUCED_DIMS_UNKNOWN,
    backward_signatures,
    conv_out_shapes,
    reduction_out_shapes,
)

__all__ = ["instruction_work", "op_flops_and_bytes", "instruction_placement", "work_source", "host_op_work",
           "module_path_from_stack", "module_from_stack", "WORK_COLUMNS", "OP_WORK_COLUMNS"]

WORK_SPEC = (
    Column("op", "", "Op", "Launching host op name, else the instruction name, else its opcode"),
    Column("module", "", "Module", "nn.Module path of the launching op"),
    Column("stack", "", "Python stack", "Python stack of the launching op"),
    Column("engine", "", "Engine", "Engine (Neuron) or Kernel / Memcpy / Memset / Sync (GPU)"),
    Column("dtype", "", "Data type", "Canonical dtype (bfloat16, float32, ...)"),
    Column("device", "count", "Device", "Position of the device in header.devices (-1 unknown)"),
    Column("nc_idx", "count", "NeuronCore", "Core index (-1 for GPUs / unknown)"),
    Column("start_ts", "ns", "Start", "Instruction start"),
    Column("duration_ns", "ns", "Duration", "Instruction duration"),
    Column("framework_op", "count", "Host op row", "Launching host op row (-1 none)"),
    Column("flops", "FLOP", "Model FLOPs", "Neuron raw_flops of non-TRANSPOSE rows; GPU: op FLOPs split by duration"),
    Column("hardware_flops", "FLOP", "Hardware FLOPs", "FLOPs including transposes"),
    Column("transpose_flops", "FLOP", "Transpose FLOPs", "Tensor-engine FLOPs of TRANSPOSE instructions"),
    Column("hbm_read_bytes", "bytes", "HBM read", "HBM bytes read"),
    Column("hbm_write_bytes", "bytes", "HBM written", "HBM bytes written"),
    Column("hbm_bytes", "bytes", "HBM traffic", "HBM bytes read + written"),
    Column("is_matmul", "", "Matrix work", "Matrix-engine / matmul-family work"),
    Column("flops_known", "", "FLOPs known", "False: FLOPs cannot be derived (counted as 0)"),
    Column("bytes_known", "", "Bytes known", "False: HBM bytes cannot be derived (counted as 0)"),
)
WORK_COLUMNS = [c.name for c in WORK_SPEC]
OP_WORK_COLUMNS = ["flops", "bytes", "dtype", "is_matmul", "note"]


def _args_concrete(name: str, args: str) -> list | None:
    if not args:
        return None
    try:
        c = json.loads(args).get("Concrete Inputs")
    except (ValueError, AttributeError):
        return None
    return c if isinstance(c, list) else None


def _concrete_key(args: str) -> str:
    """The "Concrete Inputs" of an op's args JSON, as args JSON holding only them ('' when absent)."""
    c = _args_concrete("", args)
    return json.dumps({"Concrete Inputs": c}) if c else ""


@lru_cache(maxsize=65536)
def _signature_work(name: str, shapes: str, dtypes: str, args: str,
                    out_shape: str = "") -> tuple[float, float, str, bool, str]:
    """(FLOPs, bytes moved, dtype, is_matmul, note) of one op signature (``out_shape``: its output shape as
    JSON where other records tell it); NaN where the op model cannot tell (the note says why). Never raises."""
    if classify(name) == "none" and not known_no_work(name) and not is_inductor_kernel(name):
        return float("nan"), float("nan"), "", False, f"no op model for {name!r} (not a known aten op)"
    try:
        out = tuple(json.loads(out_shape)) if out_shape else None
        w = lower_signature(name, shapes, dtypes, 0, _args_concrete(name, args), out)
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError, RecursionError):
        return float("nan"), float("nan"), "", classify(name) in TENSOR_ENGINE_CLASSES, "unparsable record"
    dtype = canonical_dtype(w.inputs[0].dtype) if w.inputs else ""
    flops = float(w.flops) if w.flops_known else float("nan")
    nbytes = float(w.moved_bytes) if w.bytes_known else float("nan")
    return flops, nbytes, dtype, classify(name) in TENSOR_ENGINE_CLASSES, w.note


def op_flops_and_bytes(host_ops: pd.DataFrame) -> pd.DataFrame:
    """Per host op (same index): ``flops`` (FLOP; Kineto ``flops`` when > 0, else from shapes, NaN when
    unknown), ``bytes`` (bytes the op moves, read + written, from shapes and dtypes; NaN unknown), ``dtype``
    (canonical name of the first tensor input, '' unknown), ``is_matmul`` (matmul / conv / attention family),
    ``note`` (why a value is unknown or what was assumed). Computed once per distinct signature."""
    if host_ops.empty:
        return pd.DataFrame({"flops": pd.Series(dtype=float), "bytes": pd.Series(dtype=float),
                             "dtype": pd.Series(dtype=str), "is_matmul": pd.Series(dtype=bool),
                             "note": pd.Series(dtype=str)})
    names = column(host_ops, "name").astype(str)
    keys = pd.DataFrame({"name": names, "s": column(host_ops, "input_shapes").astype(str),
                         "d": column(host_ops, "input_dtypes").astype(str)})
    # Concrete Inputs matter for convolutions (stride, padding), gathers (dim), diff (n), ...
    wants_args = np.flatnonzero(cat_where_names(names, wants_concrete))
    a = np.full(len(keys), "", dtype=object)
    if len(wants_args):  # keyed by the Concrete Inputs alone (args also hold per-event ids)
        raw = column(host_ops, "args").astype(str).to_numpy(dtype=object)[wants_args]
        keyed = {x: _concrete_key(x) for x in set(raw)}  # each distinct args text parsed once
        a[wants_args] = [keyed[x] for x in raw]
    keys["a"] = a
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(keys))
    res = [_signature_work(*u) for u in uniq]
    codes, res = _with_out_shapes(host_ops, keys, codes, res)
    codes, res = _with_forward(host_ops, keys, codes, res)
    arr = np.array([(r[0], r[1]) for r in res], dtype=float).reshape(-1, 2)
    flops = arr[codes, 0]
    kineto = column(host_ops, "flops", 0).to_numpy(dtype=float)
    flops = np.where(kineto > 0, kineto, flops)
    return pd.DataFrame({"flops": flops, "bytes": arr[codes, 1],
                         "dtype": pd.Categorical(np.array([r[2] for r in res], dtype=object)[codes]),
                         "is_matmul": np.array([r[3] for r in res], dtype=bool)[codes],
                         "note": pd.Categorical(np.array([r[4] for r in res], dtype=object)[codes])},
                        index=host_ops.index)


def _with_out_shapes(host_ops: pd.DataFrame, keys: pd.DataFrame, codes: np.ndarray, res: list) -> tuple:
    """Convolutions whose record lacks the stride, and reductions whose record lacks the reduced dims,
    re-priced with the output shape other records give (:func:`.opcontext.conv_out_shapes`,
    :func:`.opcontext.reduction_out_shapes`): new signatures appended to ``res``, their rows' codes moved."""
    found: dict[int, str] = {}
    ho = None
    for marker, derive in ((NEEDS_OUT_SHAPE, conv_out_shapes), (REDUCED_DIMS_UNKNOWN, reduction_out_shapes)):
        bad = [i for i, r in enumerate(res) if marker in r[4]]
        if bad:
            ho = host_ops.reset_index(drop=True) if ho is None else ho
            found.update(derive(ho, np.flatnonzero(np.isin(codes, bad))))
    if not found:
        return codes, res
    codes, res = codes.copy(), list(res)
    index: dict[tuple, int] = {}
    k = keys.to_numpy(dtype=object)
    for pos, out in found.items():
        sig = (*k[pos], out)
        if sig not in index:
            index[sig] = len(res)
            res.append(_signature_work(*sig))
        codes[pos] = index[sig]
    return codes, res


def _with_forward(host_ops: pd.DataFrame, keys: pd.DataFrame, codes: np.ndarray, res: list) -> tuple:
    """Backward ops recorded without shapes priced from their forward's (:func:`.opcontext.backward_signatures`),
    the note saying so: new results appended to ``res``, their rows' codes moved. Nothing to do when no op of
    the trace has shapes."""
    bad = [i for i, r in enumerate(res) if r[4] == NO_SHAPES]
    if not bad:
        return codes, res
    mask = np.isin(codes, bad)
    sh = keys["s"].to_numpy(dtype=object)
    if not ((sh[~mask] != "") & (sh[~mask] != "[]")).any():
        return codes, res
    need = np.flatnonzero(mask)
    found = backward_signatures(host_ops.reset_index(drop=True), need)
    if not found:
        return codes, res
    codes, res = codes.copy(), list(res)
    index: dict[tuple, int] = {}
    for pos, sig in found.items():
        if sig not in index:
            f, b, d, mm, note = _signature_work(*sig)
            index[sig] = len(res)
            why = "; ".join(x for x in ("priced from its forward's shapes (this record has none)", note) if x)
            res.append((f, b, d, mm, why))
        codes[pos] = index[sig]
    return codes, res


def cat_where_names(names: pd.Series, pred) -> np.ndarray:
    """Boolean mask of ``pred(name)`` per row, evaluated once per distinct name."""
    u, inv = np.unique(names.to_numpy(dtype=object), return_inverse=True)
    return np.array([bool(pred(x)) for x in u], dtype=bool)[inv] if len(u) else np.zeros(0, bool)


def module_path_from_stack(stack: str) -> str:
    """Module path from a Kineto ``with_stack`` + ``with_modules`` stack: its "nn.Module: Name_0" frames,
    outermost first, joined by "." ('' when there are none)."""
    mods = [ln[len("nn.Module: "):].strip() for ln in str(stack).split("\n") if ln.startswith("nn.Module: ")]
    return ".".join(mods)


def module_from_stack(module: pd.Series, stack: pd.Series) -> pd.Categorical:
    """``module``, filled from the python stack's nn.Module frames where it is empty (one parse per
    distinct stack)."""
    module, stack = as_cat(pd.Series(module)), as_cat(pd.Series(stack))
    if not len(stack.cat.categories):
        return module.array
    derived = cat_map(stack, module_path_from_stack)
    if (derived.cat.categories == "").all():
        return module.array
    return cat_pick(module, None, derived, None)


def instruction_placement(trace) -> pd.DataFrame:
    """Per instruction (same index): ``device`` (position in ``header.devices``, -1 unknown), ``nc_idx``
    (core, -1 for GPUs / unknown) and ``track_name``, looked up through the instruction's track."""
    return trace.memo("placement", lambda: _placement(trace))


def _placement(trace) -> pd.DataFrame:
    ins = trace.table("instructions", ["track"])
    tr = trace.whole_table("tracks", ["device", "nc_idx", "name"])
    n = len(ins)
    track = ins["track"].to_numpy()
    lo = int(track.min()) if n else 0
    lo = 0 if lo > 0 else lo  # small non-negative ids index the lookup directly (no offset copy)
    span = int(track.max()) - lo + 1 if n else 0
    if not len(tr) or not n or span > 4 * len(tr) + (1 << 16):
        return _placement_rows(ins, tr, track)
    # one lookup per track id (a few dozen tracks), then one gather per column: no n-long temporaries
    ids = np.arange(lo, lo + span, dtype=np.int64)
    lut = _placement_rows(pd.DataFrame({"track": ids}), tr, ids)
    key = track if lo == 0 else track - lo
    name = lut["track_name"].array
    return pd.DataFrame({"device": lut["device"].to_numpy()[key], "nc_idx": lut["nc_idx"].to_numpy()[key],
                         "track_name": pd.Categorical.from_codes(np.asarray(name.codes)[key], name.categories,
                                                                 validate=False)},
                        index=ins.index, copy=False)


def _placement_rows(ins: pd.DataFrame, tr: pd.DataFrame, track: np.ndarray) -> pd.DataFrame:
    """The placement of each row of ``ins`` looked up row by row (``track``: its track ids)."""
    n = len(ins)
    tpos = row_positions(tr.index, track) if len(tr) else np.full(n, -1)
    ok = tpos >= 0
    safe = np.where(ok, tpos, 0)
    dev = np.where(ok, tr["device"].to_numpy()[safe], -1) if len(tr) else tpos
    nc = np.where(ok, tr["nc_idx"].to_numpy()[safe], -1) if len(tr) else tpos
    name = cat_pick(tr["name"], safe, empty_cat(n), ok) if len(tr) else empty_cat(n).array
    return pd.DataFrame({"device": dev.astype("int64", copy=False), "nc_idx": nc.astype("int64", copy=False),
                         "track_name": name}, index=ins.index, copy=False)


def work_source(trace) -> str:
    """'instructions' when device rows carry FLOPs or HBM bytes (Neuron), else 'shapes' (imported GPU)."""
    return trace.memo("work_source", lambda: _work_source(trace), shared=True)


def _work_source(trace) -> str:
    ins = trace.whole_table("instructions", ANALYSIS_COLUMNS["instructions"])
    if not len(ins):
        return "shapes"
    # GPU memcpy / memset rows carry their byte count; that alone does not make FLOPs/bytes instruction-level.
    copy = cat_values(column(ins, "engine"), COPY_ENGINES)
    for c in ("raw_flops", "hbm_read_bytes", "hbm_write_bytes"):
        if c in ins.columns and _any_positive(ins[c].to_numpy(), copy):
            return "instructions"
    return "shapes"


def _any_positive(values: np.ndarray, excluded: np.ndarray, block: int = 1 << 20) -> bool:
    """Whether a value is > 0 on a row not ``excluded``, block by block (stops at the first; no gathered copy)."""
    for lo in range(0, len(values), block):
        if ((values[lo:lo + block] > 0) & ~excluded[lo:lo + block]).any():
            return True
    return False


def host_op_work(trace) -> pd.DataFrame:
    """:func:`op_flops_and_bytes` of the trace's whole host_ops table (memoised with the trace)."""
    return trace.memo("host_op_work", lambda: op_flops_and_bytes(trace.whole_table("host_ops")), shared=True)


@register("instruction_work", columns=WORK_SPEC, method=None)
def instruction_work(trace) -> pd.DataFrame:
    """Per device instruction (same index as ``trace.instructions``). Columns:

    op (Categorical: the launching host op's name, else the instruction ``name``, else its ``opcode``),
    module, stack (of the launching host op, '' none), engine, dtype (canonical: bfloat16, float32, ...),
    device (position in header.devices), nc_idx, start_ts, duration_ns, framework_op (host op row, -1 none),
    flops (model FLOPs: Neuron ``raw_flops`` of non-TRANSPOSE instructions; GPU: shape-derived op FLOPs split
    over the op's kernels by duration), hardware_flops (FLOP incl. transposes), transpose_flops,
    hbm_read_bytes, hbm_write_bytes, hbm_bytes (bytes), is_matmul (matrix-engine / matmul-family work),
    flops_known, bytes_known (False where the value cannot be derived: it is then 0 here).
    A windowed trace takes its rows from the whole trace's frame (computed once, shared by all windows).
    """
    if trace.window_bounds is not None:
        fw = instruction_work(trace.whole())
        idx = trace.table("instructions", ["start_ts"]).index
        return fw.take(row_positions(fw.index, idx.to_numpy()))
    return _work(trace)


def _labels(trace, ins: pd.DataFrame, ho: pd.DataFrame, hpos: np.ndarray, has_ho: np.ndarray):
    """(op, module, stack) Categoricals per instruction. Module and stack are worked out once per host op (and
    once for "no host op", the last entry, which ``hpos`` -1 indexes) and gathered, with the categories the
    same picks row by row give: those depend on the categories alone."""
    n = len(ins)
    empty = empty_cat(n, ins.index)
    # instruction name, or opcode where the name is empty
    ilabel = pd.Series(cat_pick(as_cat(column(ins, "name")), None, as_cat(column(ins, "opcode")), None),
                       index=ins.index) if n else empty
    if not len(ho):
        return ilabel.array, module_from_stack(empty, empty), empty.array
    op = cat_pick(ho["name"], hpos, ilabel, has_ho)
    per = np.append(np.arange(len(ho)), -1)  # each host op, then none
    has = per >= 0
    module = pd.Series(cat_pick(column(ho, "module"), per, empty_cat(len(per)), has))
    stack = cat_pick(column(ho, "stack"), per, empty_cat(len(per)), has)
    module = module_from_stack(module, pd.Series(stack))
    rows = lambda c: pd.Categorical.from_codes(np.asarray(c.codes)[hpos], c.categories, validate=False)  # noqa: E731
    return op, rows(module), rows(stack)


def _host_positions(ho: pd.DataFrame, fo: np.ndarray) -> np.ndarray:
    """Position of each instruction's launching host op in ``ho`` (-1 none): ``framework_op`` itself (no copy)
    where the whole table's row ids are its positions and every id is one of them or -1."""
    if not len(ho):
        return np.full(len(fo), -1)
    idx = ho.index
    direct = isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1 and len(fo) > 0
    return fo if direct and int(fo.min()) >= -1 and int(fo.max()) < len(idx) else row_positions(idx, fo)


def _work(trace) -> pd.DataFrame:
    ins = trace.analysis_table("instructions")
    ho = trace.whole_table("host_ops", ["name", "module", "stack", "duration_ns"])
    fo = column(ins, "framework_op", -1).to_numpy().astype("int64", copy=False)
    hpos = _host_positions(ho, fo)
    has_ho = hpos >= 0
    op, module, stack = _labels(trace, ins, ho, hpos, has_ho)
    dur = ins["duration_ns"].to_numpy().astype("int64", copy=False)
    engine = as_cat(column(ins, "engine"))
    place = instruction_placement(trace)
    if work_source(trace) == "instructions":
        cols = _instruction_level(ins, engine)
        cols["dtype"] = _fill_dtype(trace, cols["dtype"], hpos, has_ho, ins.index)
    else:
        cols = _shape_level(trace, ins, engine, dur, hpos, has_ho)
    out = pd.DataFrame({"op": op, "module": module, "stack": stack, "engine": engine.array, "dtype": cols["dtype"],
                        "device": place["device"].to_numpy(), "nc_idx": place["nc_idx"].to_numpy(),
                        "start_ts": ins["start_ts"].to_numpy(), "duration_ns": dur, "framework_op": fo,
                        "flops": cols["flops"], "hardware_flops": cols["hw"], "transpose_flops": cols["tflops"],
                        "hbm_read_bytes": cols["rd"], "hbm_write_bytes": cols["wr"],
                        "hbm_bytes": cols["rd"] + cols["wr"],
                        "is_matmul": cols["is_mm"], "flops_known": cols["fk"], "bytes_known": cols["bk"]},
                       index=ins.index, copy=False)
    for c in ("op", "module", "stack", "engine", "dtype"):
        if not isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = as_cat(out[c])
    return out


def _fill_dtype(trace, dtype, hpos: np.ndarray, has_ho: np.ndarray, index: pd.Index):
    """Instruction dtypes, the launching host op's (from its recorded input dtypes) where an instruction records
    none: a compiled graph's instructions carry no dtype, the ops it runs do."""
    d = pd.Series(dtype, index=index)
    blank = cat_where(d, lambda v: v == "")  # on the categories, not per row (missing is no blank, as before)
    if not (blank & has_ho).any():
        return dtype
    w = host_op_work(trace)
    if not len(w):
        return dtype
    d_ho = pd.Series(cat_pick(w["dtype"], hpos, empty_cat(len(index)), has_ho), index=index)
    return cat_pick(as_cat(d), None, as_cat(d_ho), ~blank)


def _instruction_level(ins: pd.DataFrame, engine: pd.Series) -> dict:
    """Neuron: every instruction carries its FLOPs and HBM bytes."""
    n = len(ins)
    raw = column(ins, "raw_flops", 0).to_numpy().astype(float)
    tr = cat_values(column(ins, "tensor_instruction_type"), ["TRANSPOSE"])
    if tr.any():
        flops, tflops = np.where(tr, 0.0, raw), np.where(tr, raw, 0.0)
    else:  # no transposes: model FLOPs are the hardware FLOPs (one array, read-only in the frame, as on GPU
        flops, tflops = raw, np.zeros(n)  # traces); zeros from calloc: pages only mapped when read
    known = np.ones(n, bool)
    return {"flops": flops, "tflops": tflops, "hw": raw,
            "rd": column(ins, "hbm_read_bytes", 0).to_numpy().astype(float),
            "wr": column(ins, "hbm_write_bytes", 0).to_numpy().astype(float),
            "is_mm": cat_values(engine, MATRIX_ENGINES), "dtype": cat_map(column(ins, "dtype"), canonical_dtype).array,
            "fk": known, "bk": known}


def _communication_rows(trace, ins: pd.DataFrame, hpos: np.ndarray, has_ho: np.ndarray) -> np.ndarray:
    """Rows that are collectives: a collective kernel (:func:`~analysis.core.commkernels.is_collective_kernel`)
    or a kernel launched by a collective call (:func:`~analysis.core.commkernels.is_collective_op`)."""
    comm = cat_where(column(ins, "name"), is_collective_kernel) if len(ins) else np.zeros(0, bool)
    if has_ho.any():
        op_comm = cat_where(trace.whole_table("host_ops", ["name"])["name"], is_collective_op)
        comm |= np.where(has_ho, op_comm[np.where(has_ho, hpos, 0)], False)
    return comm


def _shape_level(trace, ins: pd.DataFrame, engine: pd.Series, dur: np.ndarray, hpos: np.ndarray,
                 has_ho: np.ndarray) -> dict:
    """Imported GPU traces: the launching op's shape-derived work split over its kernels by duration."""
    n = len(ins)
    w = host_op_work(trace)
    own_r = column(ins, "hbm_read_bytes", 0).to_numpy().astype(float)
    own_w = column(ins, "hbm_write_bytes", 0).to_numpy().astype(float)
    own = (own_r + own_w) > 0  # memcpy / memset rows: their recorded bytes, no FLOPs
    no_work = cat_values(engine, NON_COMPUTE_ENGINES) & ~own  # syncs: no FLOPs, no bytes
    split = has_ho & ~own & ~no_work
    share = np.zeros(n)
    if n and split.any():
        key = hpos[split]
        tot = np.bincount(key, weights=dur[split].astype(float), minlength=len(w))[key]
        cnt = np.bincount(key, minlength=len(w))[key]
        share[split] = np.where(tot > 0, dur[split] / np.where(tot > 0, tot, 1), 1.0 / cnt)
    safe = np.where(has_ho, hpos, 0)
    if len(w):
        wf, wb = w["flops"].to_numpy(dtype=float)[safe], w["bytes"].to_numpy(dtype=float)[safe]
    else:
        wf = wb = np.full(n, np.nan)
    comm = _communication_rows(trace, ins, hpos, has_ho)  # collectives do no model FLOPs
    fk = own | no_work | comm | (split & np.isfinite(wf))
    bk = own | no_work | (split & np.isfinite(wb))
    flops = np.where(split & fk & ~comm, np.nan_to_num(wf) * share, 0.0)
    hbm = np.where(split & bk, np.nan_to_num(wb) * share, 0.0)
    is_mm = (np.where(split, w["is_matmul"].to_numpy()[safe], False) if len(w) else np.zeros(n, bool))
    d_ins = cat_map(column(ins, "dtype"), canonical_dtype)
    d_ho = pd.Series(cat_pick(w["dtype"], hpos, empty_cat(n), has_ho), index=ins.index) if len(w) else d_ins
    dtype = cat_pick(d_ins, None, d_ho, (d_ins != "").to_numpy())
    # shapes give the total; the read/write split is unknown (counted as reads)
    return {"flops": flops, "tflops": np.zeros(n), "hw": flops, "rd": np.where(own, own_r, hbm),
            "wr": np.where(own, own_w, 0.0), "is_mm": is_mm.astype(bool) & (flops > 0), "dtype": dtype,
            "fk": fk, "bk": bk}
