"""From host ops to a scheduled device timeline of one NeuronCore (all arrays, no per-event loops).

Each lowered op runs as three in-order stages (a flow shop): input DMA (load phase), compute slot
(engine instructions), output DMA (store phase). A stage starts at max(host dispatch = host op start,
previous op's same stage, this op's previous stage). Loads may run ahead of compute by at most
``PREFETCH_DEPTH`` ops (double buffering in SBUF).
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neuron_profiler.runtime.simulated.dma import DmaModel, DmaTemplate
from neuron_profiler.runtime.simulated.engines import EngineModel, InstrTemplate, inorder_scan
from neuron_profiler.runtime.simulated.lowering import classify, leaf_compute_mask, lower_signature

__all__ = ["Schedule", "schedule_ops", "PREFETCH_DEPTH"]

PREFETCH_DEPTH = 2


@dataclass
class Schedule:
    """Scheduled device work of one core. Per op arrays (index i, host order) and flat event arrays."""

    host_row: np.ndarray          # host op row id per op
    load_start: np.ndarray
    load_end: np.ndarray
    compute_start: np.ndarray
    compute_end: np.ndarray
    store_start: np.ndarray
    store_end: np.ndarray
    load_bytes: np.ndarray
    store_bytes: np.ndarray
    dtype: np.ndarray             # object, per op
    name: np.ndarray              # object, per op (framework op name)
    throttle_ns: np.ndarray       # dI/dt throttling time added to the op's Tensor work
    instr: dict[str, np.ndarray]  # columns of the instructions table (+ "op" = op index)
    dma: dict[str, np.ndarray]    # columns of the dma table (+ "op", "issue_ts")


def _expand(counts: np.ndarray, offsets: np.ndarray, sig_of_op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(op index, flat template index) of every event: op i contributes counts[sig[i]] events."""
    c = counts[sig_of_op]
    op = np.repeat(np.arange(len(sig_of_op)), c)
    first = np.cumsum(c) - c
    within = np.arange(int(c.sum())) - np.repeat(first, c)
    return op, offsets[sig_of_op][op] + within


def _concrete_inputs(args: object) -> list | None:
    try:
        a = json.loads(str(args))
    except ValueError:
        return None
    v = a.get("Concrete Inputs") if isinstance(a, dict) else None
    return v if isinstance(v, list) else None


def _codes(col: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(col.dtype, pd.CategoricalDtype):
        return col.cat.codes.to_numpy(np.int64), np.asarray(col.cat.categories, dtype=object)
    codes, uniq = pd.factorize(col.astype(str).fillna(""))
    return codes.astype(np.int64), np.asarray(uniq, dtype=object)


def _cat_value(cats: np.ndarray, code: int) -> str:
    return "" if code < 0 else str(cats[code])


def schedule_ops(host_ops: pd.DataFrame, engines: EngineModel, dmam: DmaModel) -> Schedule:
    """Lower the leaf compute ops of ``host_ops`` and schedule them on one NeuronCore."""
    n = len(host_ops)
    name_codes, name_cats = _codes(host_ops["name"]) if n else (np.zeros(0, np.int64), np.zeros(0, object))
    cls_of_cat = np.array([classify(str(c)) for c in name_cats] + ["none"], dtype=object)
    cls = cls_of_cat[name_codes] if n else np.zeros(0, dtype=object)
    compute = cls != "none"
    if "category" in host_ops.columns and n:
        cat_codes, cat_cats = _codes(host_ops["category"])
        is_cpu = np.append(np.asarray([str(c) in ("cpu_op", "operator", "") for c in cat_cats], bool), True)
        compute &= is_cpu[cat_codes]
    tensor_op = np.isin(cls, ["matmul", "conv", "attention"])
    leaf = leaf_compute_mask(host_ops, compute, tensor_op) if n else np.zeros(0, bool)
    rows = np.flatnonzero(leaf)

    cols = {}
    for c in ("input_shapes", "input_dtypes", "args"):
        cols[c] = _codes(host_ops[c]) if c in host_ops.columns else (np.full(n, -1, np.int64), np.zeros(0, object))
    flops_col = host_ops["flops"].to_numpy(np.int64) if "flops" in host_ops.columns else np.zeros(n, np.int64)
    is_conv = cls[rows] == "conv"
    args_key = np.where(is_conv, cols["args"][0][rows], -1)
    key = np.stack([name_codes[rows], cols["input_shapes"][0][rows], cols["input_dtypes"][0][rows],
                    flops_col[rows], args_key], axis=1) if len(rows) else np.zeros((0, 5), np.int64)
    uniq, sig = np.unique(key, axis=0, return_inverse=True) if len(rows) else (key, np.zeros(0, np.int64))
    sig = sig.reshape(-1)

    itemps: list[InstrTemplate] = []
    dtemps: list[DmaTemplate] = []
    sig_dtype: list[str] = []
    for nc, sc, dc, fl, ac in uniq:
        name = _cat_value(name_cats, nc)
        concrete = _concrete_inputs(_cat_value(cols["args"][1], ac)) if ac >= 0 else None
        w = lower_signature(name, _cat_value(cols["input_shapes"][1], sc), _cat_value(cols["input_dtypes"][1], dc),
                            int(fl), concrete)
        base = name.split("::", 1)[-1]
        itemps.append(engines.template(w, base))
        dtemps.append(dmam.template(w, name))
        sig_dtype.append(w.dtype)
    slot = np.array([t.slot_ns for t in itemps], dtype=np.int64)
    keep = slot[sig] > 0 if len(sig) else np.zeros(0, bool)
    rows, sig = rows[keep], sig[keep]

    start_ts = host_ops["start_ts"].to_numpy(np.int64)[rows]
    order = np.lexsort((rows, start_ts))
    rows, sig, ready = rows[order], sig[order], start_ts[order]
    dl = np.array([t.load_ns for t in dtemps], dtype=np.int64)[sig] if len(sig) else np.zeros(0, np.int64)
    ds = np.array([t.store_ns for t in dtemps], dtype=np.int64)[sig] if len(sig) else np.zeros(0, np.int64)
    dc = slot[sig] if len(sig) else np.zeros(0, np.int64)

    l_end, c_end = _flow_shop(ready, dl, dc)
    # dI/dt throttling: Tensor work that starts after the Tensor engine idled runs slower at first
    tensor_ns = np.array([t.tensor_ns for t in itemps], dtype=np.int64)[sig] if len(sig) else np.zeros(0, np.int64)
    throttle = np.zeros(len(sig), dtype=np.int64)
    mm = np.flatnonzero(tensor_ns > 0)
    if engines.throttling and len(mm):
        c_start = c_end - dc
        prev_end = np.concatenate([[np.iinfo(np.int64).min // 2], c_end[mm][:-1]])
        cold = c_start[mm] - prev_end >= engines.throttle_idle_ns
        throttle[mm[cold]] = engines.throttle_extra_ns(tensor_ns[mm[cold]])
        dc = dc + throttle
        l_end, c_end = _flow_shop(ready, dl, dc)
    c_start = c_end - dc
    s_end = inorder_scan(c_end, ds)

    host_index = host_ops.index.to_numpy(np.int64)
    sched = Schedule(
        host_row=host_index[rows], load_start=l_end - dl, load_end=l_end, compute_start=c_start, compute_end=c_end,
        store_start=s_end - ds, store_end=s_end,
        load_bytes=np.array([t.load_bytes for t in dtemps], np.int64)[sig] if len(sig) else np.zeros(0, np.int64),
        store_bytes=np.array([t.store_bytes for t in dtemps], np.int64)[sig] if len(sig) else np.zeros(0, np.int64),
        dtype=np.array(sig_dtype + [""], dtype=object)[sig] if len(sig) else np.zeros(0, object),
        name=name_cats[name_codes[rows]] if len(rows) else np.zeros(0, object),
        throttle_ns=throttle, instr={}, dma={})
    sched.instr = _instr_events(sched, sig, itemps, engines)
    sched.dma = _dma_events(sched, sig, dtemps)
    return sched


def _flow_shop(ready: np.ndarray, dl: np.ndarray, dc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(load end, compute end) per op; loads run at most PREFETCH_DEPTH ops ahead of compute, found by
    iterating the coupled in-order scans to (near) fixed point."""
    l_ready = ready
    for _ in range(4):
        l_end = inorder_scan(l_ready, dl)
        c_end = inorder_scan(l_end, dc)
        bound = np.full(len(ready), np.iinfo(np.int64).min)
        if len(ready) > PREFETCH_DEPTH:
            bound[PREFETCH_DEPTH:] = (c_end - dc)[:-PREFETCH_DEPTH]
        new = np.maximum(ready, bound)
        if np.array_equal(new, l_ready):
            break
        l_ready = new
    return l_end, c_end


def _flat(temps: list, attr: str, dtype: type) -> np.ndarray:
    parts = [np.asarray(getattr(t, attr), dtype=dtype) for t in temps]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)


def _instr_events(s: Schedule, sig: np.ndarray, temps: list[InstrTemplate], engines: EngineModel) -> dict:
    counts = np.array([len(t.engine) for t in temps], dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    op, idx = _expand(counts, offsets, sig) if len(sig) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    role = _flat(temps, "throttle_role", np.int64)[idx]
    extra = s.throttle_ns[op] if len(op) else np.zeros(0, np.int64)
    ev = {
        "op": op,
        "start_ts": s.compute_start[op] + _flat(temps, "rel_start", np.int64)[idx] + np.where(role == 2, extra, 0),
        "duration_ns": _flat(temps, "duration", np.int64)[idx] + np.where(role == 1, extra, 0),
        "engine": _flat(temps, "engine", object)[idx],
        "opcode": _flat(temps, "opcode", object)[idx],
        "raw_flops": _flat(temps, "flops", np.int64)[idx],
        "sbuf_read_bytes": _flat(temps, "sbuf_read", np.int64)[idx],
        "sbuf_write_bytes": _flat(temps, "sbuf_write", np.int64)[idx],
        "psum_read_bytes": _flat(temps, "psum_read", np.int64)[idx],
        "psum_write_bytes": _flat(temps, "psum_write", np.int64)[idx],
        "hbm_read_bytes": np.zeros(len(op), np.int64),
        "hbm_write_bytes": np.zeros(len(op), np.int64),
        "args": np.where((role == 1) & (extra > 0),
                         np.char.add(np.char.add('{"dIdt_throttle_ns": ', extra.astype(str)), "}"), "").astype(object),
    }
    # one Sync instruction per op: the DMA trigger of its load phase (carries the op's HBM traffic)
    nops = len(sig)
    sync = {
        "op": np.arange(nops), "start_ts": s.load_start, "duration_ns": np.full(nops, engines.sync_ns, np.int64),
        "engine": np.full(nops, "Sync", object), "opcode": np.full(nops, "DmaTrigger", object),
        "raw_flops": np.zeros(nops, np.int64), "sbuf_read_bytes": np.zeros(nops, np.int64),
        "sbuf_write_bytes": np.zeros(nops, np.int64), "psum_read_bytes": np.zeros(nops, np.int64),
        "psum_write_bytes": np.zeros(nops, np.int64), "hbm_read_bytes": s.load_bytes,
        "hbm_write_bytes": s.store_bytes, "args": np.full(nops, "", object),
    }
    ev = {k: np.concatenate([ev[k], sync[k]]) for k in ev}
    order = np.lexsort((ev["op"], ev["start_ts"]))
    return {k: v[order] for k, v in ev.items()}


def _dma_events(s: Schedule, sig: np.ndarray, temps: list[DmaTemplate]) -> dict:
    counts = np.array([len(t.queue) for t in temps], dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    op, idx = _expand(counts, offsets, sig) if len(sig) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    load = _flat(temps, "load", bool)[idx]
    phase = np.where(load, s.load_start[op], s.store_start[op])
    ev = {
        "op": op,
        "issue_ts": phase,
        "start_ts": phase + _flat(temps, "rel_start", np.int64)[idx],
        "duration_ns": _flat(temps, "duration", np.int64)[idx],
        "transfer_bytes": _flat(temps, "nbytes", np.int64)[idx],
        "queue": _flat(temps, "queue", object)[idx],
        "variable": _flat(temps, "variable", object)[idx],
        "source": np.where(load, "HBM", "SBUF").astype(object),
        "dest": np.where(load, "SBUF", "HBM").astype(object),
    }
    order = np.lexsort((ev["op"], ev["start_ts"]))
    return {k: v[order] for k, v in ev.items()}
