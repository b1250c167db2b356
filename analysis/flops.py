"""FLOPs and bytes of work.

* :func:`op_flops_and_bytes`: per host op, from its input shapes and dtypes (Kineto ``Input Dims`` /
  ``Input type``, stored as ``input_shapes`` / ``input_dtypes``), or Kineto's ``flops`` when present.
  This is how imported GPU traces get FLOPs and bytes.
* :func:`instruction_work`: per device instruction, the work used by summary, hot_ops, roofline and diff:
  the op it belongs to, its FLOPs and HBM bytes, placement (device, core) and dtype.
  Neuron instructions carry ``raw_flops`` and ``hbm_*_bytes`` themselves; on traces whose instructions
  carry none (imported GPU traces), the launching op's shape-derived FLOPs/bytes are split over its kernels
  in proportion to their durations.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pandas as pd

from neuron_profiler.opmodel import classify, lower_signature

from .metrics import canonical_dtype, dtype_bytes

_MATRIX_CLASSES = ("matmul", "conv", "attention")

MATRIX_ENGINES = ("Tensor", "TensorMatrix")
COPY_ENGINES = ("Memcpy", "Memset")

_VIEWS = {"aten::view", "aten::reshape", "aten::_reshape_alias", "aten::t", "aten::transpose",
          "aten::permute", "aten::expand", "aten::as_strided", "aten::slice", "aten::select",
          "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::alias", "aten::empty",
          "aten::empty_strided", "aten::empty_like", "aten::resize_", "aten::_unsafe_view", "aten::split",
          "aten::chunk", "aten::narrow", "aten::unbind", "aten::contiguous", "aten::lift_fresh",
          "aten::set_", "aten::flatten", "aten::numpy_T", "aten::result_type"}
# FLOPs per output element for common pointwise / normalisation ops.
_POINTWISE = {"add": 1, "add_": 1, "sub": 1, "sub_": 1, "mul": 1, "mul_": 1, "div": 1, "div_": 1,
              "relu": 1, "relu_": 1, "gelu": 8, "silu": 4, "silu_": 4, "tanh": 4, "sigmoid": 4, "exp": 1,
              "neg": 1, "rsqrt": 1, "sqrt": 1, "pow": 1, "addcmul_": 2, "addcdiv_": 2, "lerp_": 2,
              "softmax": 5, "_softmax": 5, "log_softmax": 5, "_log_softmax": 5, "layer_norm": 5,
              "native_layer_norm": 5, "rms_norm": 4, "_fused_rms_norm": 4, "batch_norm": 4,
              "native_batch_norm": 4, "dropout": 1, "native_dropout": 1, "mean": 1, "sum": 1}

WORK_COLUMNS = ["op", "module", "stack", "engine", "dtype", "device", "nc_idx", "start_ts", "duration_ns",
                "framework_op", "flops", "hardware_flops", "transpose_flops", "hbm_read_bytes",
                "hbm_write_bytes", "hbm_bytes", "is_matmul"]


def _numel(shape) -> int:
    try:
        return int(np.prod([int(x) for x in shape])) if len(shape) else 1
    except (TypeError, ValueError):
        return 0


def _tensors(shapes, dtypes):
    """[(shape, dtype)] of tensor inputs; TensorList inputs are expanded, scalars ([]) skipped."""
    out = []
    for i, s in enumerate(shapes):
        d = dtypes[i] if i < len(dtypes) else ""
        if isinstance(s, list) and s and isinstance(s[0], list):
            d_in = d if isinstance(d, str) else ""
            out.extend((x, d_in) for x in s if isinstance(x, list) and x)
        elif isinstance(s, list) and s and all(isinstance(x, (int, float)) for x in s):
            out.append((s, d if isinstance(d, str) else ""))
    return out


@lru_cache(maxsize=65536)
def _work_of(name: str, shapes_json: str, dtypes_json: str, args_json: str) -> tuple[float, float, str, bool]:
    """(FLOPs, bytes, dtype, is_matmul) of one op signature. FLOPs NaN when unknown; never raises on odd
    shapes (a malformed signature gives NaN FLOPs and bytes)."""
    try:
        return _work_of_unchecked(name, shapes_json, dtypes_json, args_json)
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, OverflowError):
        return float("nan"), float("nan"), "", False


def _work_of_unchecked(name: str, shapes_json: str, dtypes_json: str,
                       args_json: str) -> tuple[float, float, str, bool]:
    try:
        shapes = json.loads(shapes_json) if shapes_json else []
        dtypes = json.loads(dtypes_json) if dtypes_json else []
    except ValueError:
        return float("nan"), float("nan"), "", False
    if not isinstance(shapes, list):
        return float("nan"), float("nan"), "", False
    dtypes = dtypes if isinstance(dtypes, list) else []
    t = _tensors(shapes, dtypes)
    dtype = next((canonical_dtype(d) for _, d in t if d), "")
    if name in _VIEWS:
        return 0.0, 0.0, dtype, False
    in_bytes = 0.0
    for s, d in t:
        b = dtype_bytes(d) if d else np.nan
        in_bytes += _numel(s) * (b if math.isfinite(b) else 4.0)
    elt = dtype_bytes(dtype) if dtype else np.nan
    elt = elt if math.isfinite(elt) else 4.0
    largest = max((_numel(s) for s, _ in t), default=0)
    if classify(name) in _MATRIX_CLASSES:
        # matmul / conv / attention: the simulated runtime's op model is the one source of these formulas
        concrete = None
        if args_json:
            try:
                concrete = json.loads(args_json).get("Concrete Inputs")
            except (ValueError, AttributeError):
                concrete = None
        w = lower_signature(name, shapes_json, dtypes_json, 0, concrete if isinstance(concrete, list) else None)
        if w.cls in _MATRIX_CLASSES:
            return float(w.flops), float(w.in_bytes + w.out_bytes), dtype, True
        return float("nan"), in_bytes, dtype, True
    short = name.split("::", 1)[-1]
    if short in _POINTWISE:
        return float(_POINTWISE[short] * largest), in_bytes + largest * elt, dtype, False
    if not t:
        return float("nan"), float("nan"), dtype, False
    # Unknown op: no FLOPs claimed; bytes = read inputs + write one output the size of the largest input.
    return float("nan"), in_bytes + largest * elt, dtype, False


def _col(df: pd.DataFrame, name: str, default=""):
    return df[name] if name in df.columns else pd.Series(default, index=df.index)


def op_flops_and_bytes(host_ops: pd.DataFrame) -> pd.DataFrame:
    """Per host op (same index): columns ``flops`` (FLOP; Kineto ``flops`` when > 0, else derived from
    shapes, NaN when unknown), ``bytes`` (bytes read + written, from shapes and dtypes; NaN unknown),
    ``dtype`` (canonical name of the first tensor input, '' unknown), ``is_matmul`` (matmul / conv /
    attention family). Computed once per distinct (name, shapes, dtypes) signature."""
    if host_ops.empty:
        return pd.DataFrame({"flops": pd.Series(dtype=float), "bytes": pd.Series(dtype=float),
                             "dtype": pd.Series(dtype=str), "is_matmul": pd.Series(dtype=bool)})
    keys = pd.DataFrame({"name": _col(host_ops, "name").astype(str),
                         "s": _col(host_ops, "input_shapes").astype(str),
                         "d": _col(host_ops, "input_dtypes").astype(str)})
    conv_mask = keys["name"].map(lambda n: classify(n) == "conv").to_numpy(dtype=bool)
    keys["a"] = np.where(conv_mask, _col(host_ops, "args").astype(str), "")
    codes, uniq = pd.factorize(pd.MultiIndex.from_frame(keys))
    res = [_work_of(*u) for u in uniq]
    arr = np.array([(r[0], r[1]) for r in res], dtype=float).reshape(-1, 2)
    flops = arr[codes, 0]
    kineto = _col(host_ops, "flops", 0).to_numpy(dtype=float)
    flops = np.where(kineto > 0, kineto, flops)
    return pd.DataFrame({"flops": flops, "bytes": arr[codes, 1],
                         "dtype": pd.Categorical(np.array([r[2] for r in res], dtype=object)[codes]),
                         "is_matmul": np.array([r[3] for r in res], dtype=bool)[codes]},
                        index=host_ops.index)


def _empty_cat(n: int) -> pd.Series:
    """n rows of '' as a Categorical Series (no n-long Python list)."""
    return pd.Series(pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), [""]))


def _as_cat(s: pd.Series) -> pd.Series:
    return s if isinstance(s.dtype, pd.CategoricalDtype) else s.astype("category")


# Categorical helpers: work on the (few) categories and the integer codes, never on millions of strings.
def cat_values(s: pd.Series, values) -> np.ndarray:
    """Boolean mask: rows of a string column whose value is in ``values``."""
    s = _as_cat(s)
    hit = np.append(np.isin(np.asarray(s.cat.categories.astype(str), dtype=object), list(values)), False)
    return hit[s.cat.codes.to_numpy()]


def cat_where(s: pd.Series, pred) -> np.ndarray:
    """Boolean mask: rows whose string value satisfies ``pred(str) -> bool`` (evaluated per category)."""
    s = _as_cat(s)
    hit = np.append(np.array([bool(pred(c)) for c in s.cat.categories.astype(str)], dtype=bool), False)
    return hit[s.cat.codes.to_numpy()]


def cat_map(s: pd.Series, fn) -> pd.Series:
    """Categorical ``fn(value)`` per row, computed once per category (missing -> fn(''))."""
    s = _as_cat(s)
    mapped = [fn(c) for c in s.cat.categories.astype(str)] + [fn("")]
    codes, uniq = pd.factorize(pd.Index(mapped, dtype=object))
    return pd.Series(pd.Categorical.from_codes(codes[s.cat.codes.to_numpy()], uniq.astype(str)), index=s.index)


def _cat_pick(primary: pd.Series, pos: np.ndarray | None, fallback: pd.Series,
              use_primary: np.ndarray | None) -> pd.Categorical:
    """Categorical: primary.iloc[pos] where use_primary (and non-empty), else fallback (row-aligned).
    ``pos`` None: primary is row-aligned too; ``use_primary`` None: everywhere."""
    p, f = _as_cat(primary), _as_cat(fallback)
    pc = p.cat.categories.astype(str)
    fc = f.cat.categories.astype(str)
    cats = pd.Index(pc).append(pd.Index(fc)).unique()
    dt = np.int32 if len(cats) >= (1 << 15) else np.int16
    empty_code = cats.get_indexer([""])[0]
    pmap = np.append(cats.get_indexer(pc), -1).astype(dt)
    pmap[pmap == empty_code] = -1  # an empty primary value falls back too
    fmap = np.append(cats.get_indexer(fc), -1).astype(dt)
    pcodes = p.cat.codes.to_numpy()
    codes = fmap[f.cat.codes.to_numpy()]
    if len(pcodes):
        if pos is None:
            take = pmap[pcodes]
        else:
            take = pmap[pcodes[pos if use_primary is None else np.where(use_primary, pos, 0)]]
        ok = (take >= 0) if use_primary is None else use_primary & (take >= 0)
        codes = np.where(ok, take, codes)
    return pd.Categorical.from_codes(codes, cats, validate=False)


def module_path_from_stack(stack: str) -> str:
    """Module path from a Kineto ``with_stack`` + ``with_modules`` stack: its "nn.Module: Name_0" frames,
    outermost first, joined by "." ('' when there are none)."""
    mods = [ln[len("nn.Module: "):].strip() for ln in str(stack).split("\n") if ln.startswith("nn.Module: ")]
    return ".".join(mods)


def _module_from_stack(module: pd.Series, stack: pd.Series) -> pd.Categorical:
    """``module``, filled from the python stack's nn.Module frames where it is empty (one parse per
    distinct stack)."""
    module, stack = _as_cat(pd.Series(module)), _as_cat(pd.Series(stack))
    if not len(stack.cat.categories):
        return module.array
    derived = cat_map(stack, module_path_from_stack)
    if (derived.cat.categories == "").all():
        return module.array
    return _cat_pick(module, None, derived, None)


def instruction_placement(trace) -> pd.DataFrame:
    """Per instruction (same index): ``device`` (header device index, -1 unknown), ``nc_idx`` (core,
    -1 for GPUs / unknown) and ``track_name``, looked up through the instruction's track."""
    ins, tr = trace.analysis_table("instructions"), trace._full_table("tracks")
    if "placement" in trace._cache:
        return trace._cache["placement"]
    tpos = tr.index.get_indexer(ins["track"].to_numpy()) if len(tr) else np.full(len(ins), -1)
    ok = tpos >= 0
    dev = np.where(ok, tr["device"].to_numpy()[np.where(ok, tpos, 0)], -1) if len(tr) else tpos
    nc = np.where(ok, tr["nc_idx"].to_numpy()[np.where(ok, tpos, 0)], -1) if len(tr) else tpos
    if len(tr):
        name = _cat_pick(tr["name"], np.where(ok, tpos, 0), _empty_cat(len(ins)), ok)
    else:
        name = _empty_cat(len(ins)).array
    out = pd.DataFrame({"device": dev.astype("int64", copy=False), "nc_idx": nc.astype("int64", copy=False),
                        "track_name": name},
                       index=ins.index, copy=False)
    trace._cache["placement"] = out
    return out


def work_source(trace) -> str:
    """'instructions' when device rows carry FLOPs or HBM bytes (Neuron), else 'shapes' (imported GPU)."""
    from .trace import ANALYSIS_COLUMNS

    ins = trace._full_table("instructions", ANALYSIS_COLUMNS["instructions"])
    if not len(ins):
        return "shapes"
    # GPU memcpy / memset rows carry their byte count; that alone does not make FLOPs/bytes instruction-level.
    compute = ~cat_values(_col(ins, "engine"), COPY_ENGINES)
    for c in ("raw_flops", "hbm_read_bytes", "hbm_write_bytes"):
        if c in ins.columns and (ins[c].to_numpy()[compute] > 0).any():
            return "instructions"
    return "shapes"


def host_op_work(trace) -> pd.DataFrame:
    """:func:`op_flops_and_bytes` of the trace's full host_ops table (cached on the trace)."""
    sh = trace._shared
    if "host_op_work" not in sh:
        sh["host_op_work"] = op_flops_and_bytes(trace._full_table("host_ops"))
    return sh["host_op_work"]


def instruction_work(trace) -> pd.DataFrame:
    """Per device instruction (same index as ``trace.instructions``). Columns:

    op (Categorical: the launching host op's name, else the instruction ``name``, else its ``opcode``),
    module, stack (of the launching host op, '' none), engine, dtype (canonical: bfloat16, float32, ...),
    device, nc_idx, start_ts, duration_ns, framework_op (host op row, -1 none),
    flops (model FLOPs: Neuron ``raw_flops`` of non-TRANSPOSE instructions; GPU: shape-derived op FLOPs split
    over the op's kernels by duration), hardware_flops (FLOP incl. transposes), transpose_flops,
    hbm_read_bytes, hbm_write_bytes, hbm_bytes (bytes), is_matmul (matrix-engine / matmul-family work).
    A windowed trace takes its rows from the whole trace's frame (computed once, shared by all windows).
    """
    if "work" in trace._cache:
        return trace._cache["work"]
    if trace.window_bounds is not None:
        full = trace.whole()
        fw = instruction_work(full)
        out = fw.take(fw.index.get_indexer(trace.analysis_table("instructions").index))
        trace._cache["work"] = out
        return out
    ins = trace.analysis_table("instructions")
    ho = trace._full_table("host_ops")
    n = len(ins)
    fo = _col(ins, "framework_op", -1).to_numpy().astype("int64", copy=False)
    hpos = ho.index.get_indexer(fo) if len(ho) else np.full(n, -1)
    has_ho = hpos >= 0
    empty = _empty_cat(n).set_axis(ins.index)
    iname = _as_cat(_col(ins, "name"))
    opc = _as_cat(_col(ins, "opcode"))
    # instruction name, or opcode where the name is empty
    ilabel = pd.Series(_cat_pick(iname, None, opc, None), index=ins.index) if n else empty
    if len(ho):
        op = _cat_pick(ho["name"], hpos, ilabel, has_ho)
        module = _cat_pick(_col(ho, "module"), hpos, empty, has_ho)
        stack = _cat_pick(_col(ho, "stack"), hpos, empty, has_ho)
    else:
        op, module, stack = ilabel.array, empty.array, empty.array
    module = _module_from_stack(pd.Series(module), pd.Series(stack))
    dur = ins["duration_ns"].to_numpy().astype("int64", copy=False)
    engine = _as_cat(_col(ins, "engine"))
    place = instruction_placement(trace)
    src = work_source(trace)
    if src == "instructions":
        raw = _col(ins, "raw_flops", 0).to_numpy().astype(float)
        tr = cat_values(_col(ins, "tensor_instruction_type"), ["TRANSPOSE"])
        rd = _col(ins, "hbm_read_bytes", 0).to_numpy().astype(float)
        wr = _col(ins, "hbm_write_bytes", 0).to_numpy().astype(float)
        flops = np.where(tr, 0.0, raw)
        tflops = np.where(tr, raw, 0.0)
        is_mm = cat_values(engine, MATRIX_ENGINES)
        dtype = cat_map(_col(ins, "dtype"), canonical_dtype)
        hw = raw
    else:
        w = host_op_work(trace)
        own_r = _col(ins, "hbm_read_bytes", 0).to_numpy().astype(float)
        own_w = _col(ins, "hbm_write_bytes", 0).to_numpy().astype(float)
        own = (own_r + own_w) > 0  # memcpy / memset rows: their recorded bytes, no FLOPs
        split = has_ho & ~own
        share = np.zeros(n)
        if n and split.any():
            key = hpos[split]
            tot = pd.Series(dur[split].astype(float)).groupby(key).transform("sum").to_numpy()
            cnt = pd.Series(np.ones(split.sum())).groupby(key).transform("sum").to_numpy()
            share[split] = np.where(tot > 0, dur[split] / np.where(tot > 0, tot, 1), 1.0 / cnt)
        wf = np.nan_to_num(w["flops"].to_numpy(dtype=float)) if len(w) else np.zeros(1)
        wb = np.nan_to_num(w["bytes"].to_numpy(dtype=float)) if len(w) else np.zeros(1)
        safe = np.where(has_ho, hpos, 0)
        flops = np.where(split, wf[safe] * share, 0.0) if len(w) else np.zeros(n)
        hbm = np.where(split, wb[safe] * share, 0.0) if len(w) else np.zeros(n)
        # shapes give the total; the read/write split is unknown (counted as reads)
        rd, wr = np.where(own, own_r, hbm), np.where(own, own_w, 0.0)
        tflops = np.zeros(n)
        is_mm = (np.where(split, w["is_matmul"].to_numpy()[safe], False) & (flops > 0)) if len(w) else np.zeros(n, bool)
        d_ins = cat_map(_col(ins, "dtype"), canonical_dtype)
        d_ho = pd.Series(_cat_pick(w["dtype"], hpos, _empty_cat(n), has_ho), index=ins.index) \
            if len(w) else d_ins
        dtype = pd.Series(_cat_pick(d_ins, None, d_ho, (d_ins != "").to_numpy()), index=ins.index)
        hw = flops
    out = pd.DataFrame({"op": op, "module": module, "stack": stack, "engine": engine.array,
                        "dtype": dtype.array if hasattr(dtype, "array") else dtype,
                        "device": place["device"].to_numpy(), "nc_idx": place["nc_idx"].to_numpy(),
                        "start_ts": ins["start_ts"].to_numpy(), "duration_ns": dur, "framework_op": fo,
                        "flops": flops, "hardware_flops": hw.astype(float, copy=False), "transpose_flops": tflops,
                        "hbm_read_bytes": rd, "hbm_write_bytes": wr, "hbm_bytes": rd + wr,
                        "is_matmul": is_mm}, index=ins.index, copy=False)
    for c in ("op", "module", "stack", "engine", "dtype"):
        if not isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = _as_cat(out[c])
    trace._cache["work"] = out
    return out
