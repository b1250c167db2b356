"""Writing one simulated NeuronCore into a trace: tracks, instructions, DMA, collectives, counters, flows.

Kernel templates (times relative to each kernel's start) are expanded for every kernel instance of the
projection with vectorised numpy (no per-event Python). Flows: one "launch" link from each host op to the
first instruction of its kernel (every instruction also names its host op in ``framework_op``) and one
"dependency" link per semaphore wait, from the event it waited for.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from neuron_profiler.hardware import adjusted_flops_multiplier
from neuron_profiler.runtime.simulated import counters as ctr
from neuron_profiler.runtime.simulated.collectives import bus_factor
from neuron_profiler.runtime.simulated.dma import QUEUE_TYPES
from neuron_profiler.runtime.simulated.memory import add_allocations
from neuron_profiler.runtime.simulated.params import ENGINES, CoreParams
from neuron_profiler.runtime.simulated.pipeline import KernelTemplate
from neuron_profiler.runtime.simulated.program import Program
from neuron_profiler.runtime.simulated.timeline import Projection

if TYPE_CHECKING:  # pragma: no cover
    from neuron_profiler.trace.builder import TraceBuilder

__all__ = ["CoreEvents", "expand", "emit_core"]

_INSTR = ("engine", "opcode", "start", "dur", "flops", "transpose", "hbm_read", "hbm_write", "sbuf_read",
          "sbuf_write", "psum_read", "psum_write", "args", "node")
_DMA = ("d_queue", "d_start", "d_dur", "d_bytes", "d_source", "d_dest", "d_variable", "d_descriptor", "d_node")


@dataclass
class CoreEvents:
    """All device events of one core (flat arrays; ``k`` = kernel instance of each event)."""

    ins: dict[str, np.ndarray]
    dma: dict[str, np.ndarray]
    flows: dict[str, np.ndarray]     # dependency links: src_kind (0 instr / 1 dma), src, dst (event indices)
    sbuf: np.ndarray                 # (m, 3) start, end, bytes
    psum: np.ndarray
    sbuf_k: np.ndarray               # kernel instance of each SBUF segment
    psum_k: np.ndarray
    sbuf_tag: np.ndarray             # (tensor name, kind, spill) of each segment (object array of tuples)
    psum_tag: np.ndarray
    first_instr: np.ndarray          # per kernel instance: index of its earliest instruction (-1 none)
    throttle: np.ndarray             # (m, 2) first MultiplyMoving start, extra ns, of throttled kernels


def _flat(temps: Sequence[KernelTemplate | None], attr: str, dtype) -> np.ndarray:
    parts = [np.asarray(getattr(t, attr)) for t in temps if t is not None]
    return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype=dtype)


def _expand_index(counts: np.ndarray, offsets: np.ndarray, sig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = counts[sig]
    k = np.repeat(np.arange(len(sig)), c)
    first = np.cumsum(c) - c
    within = np.arange(int(c.sum())) - np.repeat(first, c)
    return k, offsets[sig][k] + within


def expand(proj: Projection, temps: list[KernelTemplate | None]) -> CoreEvents:
    """Every event of every kernel instance at its absolute time (throttling applied)."""
    real = [t for t in temps if t is not None]
    n_i = np.array([t.n_instr if t is not None else 0 for t in temps], dtype=np.int64)
    n_d = np.array([t.n_dma if t is not None else 0 for t in temps], dtype=np.int64)
    off_i, off_d = np.cumsum(n_i) - n_i, np.cumsum(n_d) - n_d
    sig, k_start, extra = proj.k_sig, proj.k_start, proj.k_extra
    first_mm_rel = np.array([(t.start[t.first_mm] if t is not None and t.first_mm >= 0 else -1) for t in temps],
                            dtype=np.int64)
    ins: dict[str, np.ndarray] = {}
    dma: dict[str, np.ndarray] = {}
    k, fi = _expand_index(n_i, off_i, sig) if len(sig) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for a in _INSTR:
        kind = object if a in ("engine", "opcode", "args") else (bool if a == "transpose" else np.int64)
        ins[a] = _flat(real, a, kind)[fi] if real else np.zeros(0)
    if len(k):
        ins["start"], ins["dur"] = _throttled(k_start[k], ins["start"], ins["dur"], first_mm_rel[sig[k]], extra[k])
    ins["k"] = k
    kd, fd = _expand_index(n_d, off_d, sig) if len(sig) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    for a in _DMA:
        dma[a] = _flat(real, a, object if a in ("d_queue", "d_source", "d_dest", "d_variable") else np.int64)[fd] \
            if real else np.zeros(0)
    if len(kd):
        dma["d_start"], dma["d_dur"] = _throttled(k_start[kd], dma["d_start"], dma["d_dur"], first_mm_rel[sig[kd]],
                                                  extra[kd])
    dma["k"] = kd
    # dependency links, re-indexed to the flat event arrays
    n_f = np.array([len(t.f_dst) if t is not None else 0 for t in temps], dtype=np.int64)
    off_f = np.cumsum(n_f) - n_f
    kf, ff = _expand_index(n_f, off_f, sig) if len(sig) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    first_i = np.cumsum(n_i[sig]) - n_i[sig] if len(sig) else np.zeros(0, np.int64)
    first_d = np.cumsum(n_d[sig]) - n_d[sig] if len(sig) else np.zeros(0, np.int64)
    src_kind = _flat(real, "f_src_kind", np.int64)[ff] if real else np.zeros(0, np.int64)
    src = _flat(real, "f_src", np.int64)[ff] if real else np.zeros(0, np.int64)
    dst = _flat(real, "f_dst", np.int64)[ff] if real else np.zeros(0, np.int64)
    flows = {"src_kind": src_kind, "src": src + np.where(src_kind == 1, first_d[kf], first_i[kf]) if len(kf) else src,
             "dst": dst + first_i[kf] if len(kf) else dst}
    sbuf, sbuf_k, sbuf_tag = _segments(temps, sig, k_start, "sbuf")
    psum, psum_k, psum_tag = _segments(temps, sig, k_start, "psum")
    has = n_i[sig] > 0 if len(sig) else np.zeros(0, bool)
    entry = np.array([int(np.argmin(t.start)) if t is not None and t.n_instr else 0 for t in temps], dtype=np.int64)
    first_instr = np.where(has, first_i + entry[sig], -1) if len(sig) else np.zeros(0, np.int64)
    thr = extra > 0
    throttle = np.stack([k_start[thr] + first_mm_rel[sig[thr]], extra[thr]], axis=1) if thr.any() else np.zeros((0, 2))
    return CoreEvents(ins, dma, flows, sbuf, psum, sbuf_k, psum_k, sbuf_tag, psum_tag, first_instr, throttle)


def _throttled(k_start: np.ndarray, rel: np.ndarray, dur: np.ndarray, first_mm: np.ndarray,
               extra: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Absolute (start, duration) of template events when the kernel's first MultiplyMoving (at ``first_mm``,
    -1 none) ran ``extra`` ns longer: events after it shift, events spanning its start stretch."""
    has = first_mm >= 0
    after = has & (rel > first_mm)
    spans = has & (rel <= first_mm) & (rel + dur > first_mm)
    return k_start + rel + np.where(after, extra, 0), dur + np.where(spans, extra, 0)


def _segments(temps: list[KernelTemplate | None], sig: np.ndarray, k_start: np.ndarray,
              buf: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(segments (m, 3) at absolute times, kernel instance of each, what each holds) of memory ``buf``."""
    segs = [getattr(t, buf + "_seg") if t is not None else np.zeros((0, 3)) for t in temps]
    n = np.array([len(s) for s in segs], dtype=np.int64)
    if not len(sig) or not n.sum():
        return np.zeros((0, 3)), np.zeros(0, np.int64), np.zeros(0, dtype=object)
    off = np.cumsum(n) - n
    flat = np.concatenate(segs)
    tags = np.empty(int(n.sum()), dtype=object)
    tags[:] = [tag for t, s in zip(temps, segs) for tag in _tags_of(t, buf, len(s))]
    k, fi = _expand_index(n, off, sig)
    out = flat[fi].copy()
    out[:, 0] += k_start[k]
    out[:, 1] += k_start[k]
    return out, k, tags[fi]


def _tags_of(t: KernelTemplate | None, buf: str, n: int) -> list[tuple[str, str, bool]]:
    tags = list(getattr(t, buf + "_tag", ()) or ())
    return tags + [("unknown", "", False)] * (n - len(tags))


def _keep(ev: CoreEvents, c_start: np.ndarray, cap: int | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    ni, nd, nc = len(ev.ins["k"]), len(ev.dma["k"]), len(c_start)
    total = ni + nd + nc
    if cap is None or total <= cap:
        return np.ones(ni, bool), np.ones(nd, bool), np.ones(nc, bool), 0
    starts = np.concatenate([ev.ins["start"], ev.dma["d_start"], c_start]) if total else np.zeros(0)
    keep = np.zeros(total, bool)
    keep[np.argsort(starts, kind="stable")[:cap]] = True
    return keep[:ni], keep[ni:ni + nd], keep[ni + nd:], total - cap


def emit_core(b: TraceBuilder, prog: Program, proj: Projection, ev: CoreEvents, sigs: list, p: CoreParams,
              host_rows: np.ndarray, dev: int, dev_track: int, nc: int, rank: int, cap: int | None) -> int:
    """Add one core's tracks, events, allocations, flows and counters to ``b``; returns the core's track."""
    pid = b.header.process_id
    core = b.add_track("core", f"nc{nc}", dev_track, device=dev, nc_idx=nc, rank=rank, pid=pid)
    eng = {e: b.add_track("engine", e, core, device=dev, nc_idx=nc, rank=rank, pid=pid) for e in ENGINES}
    keep_i, keep_d, keep_c, dropped = _keep(ev, proj.c_start, cap)
    if dropped:
        b.dropped_events[f"nc{nc}"] = b.dropped_events.get(f"nc{nc}", 0) + int(dropped)
    k_host_row = host_rows[proj.k_host] if len(proj.k_host) else np.zeros(0, np.int64)
    owner = _Owners(prog, proj, sigs, host_rows)
    ins_row = np.full(len(keep_i), -1, dtype=np.int64)
    if keep_i.any():
        i = {a: v[keep_i] for a, v in ev.ins.items()}
        k = i["k"]
        codes = pd.Categorical(i["engine"], categories=list(ENGINES)).codes
        tracks = np.array([eng[e] for e in ENGINES], np.int64)[codes]
        fo, nm = owner.of(k, i["node"])
        first = b.add_rows("instructions", {
            "track": tracks, "start_ts": i["start"], "duration_ns": i["dur"], "engine": i["engine"],
            "opcode": i["opcode"], "name": nm, "framework_op": fo,
            "raw_flops": i["flops"], "hbm_read_bytes": i["hbm_read"], "hbm_write_bytes": i["hbm_write"],
            "sbuf_read_bytes": i["sbuf_read"], "sbuf_write_bytes": i["sbuf_write"], "psum_read_bytes": i["psum_read"],
            "psum_write_bytes": i["psum_write"], "dtype": owner.dtype(k, i["node"]),
            "tensor_instruction_type": np.where(i["transpose"], "TRANSPOSE", "").astype(object), "args": i["args"]})
        ins_row[keep_i] = first + np.arange(int(keep_i.sum()))
    dma_row = np.full(len(keep_d), -1, dtype=np.int64)
    if keep_d.any():
        d = {a: v[keep_d] for a, v in ev.dma.items()}
        used = [q for q in QUEUE_TYPES if q in set(d["d_queue"])] + sorted(set(d["d_queue"]) - set(QUEUE_TYPES))
        qtrack = {q: b.add_track("dma_queue", q, core, device=dev, nc_idx=nc, rank=rank, pid=pid) for q in used}
        ring = {q: j for j, q in enumerate(QUEUE_TYPES)}
        first = b.add_rows("dma", {
            "track": np.array([qtrack[q] for q in d["d_queue"]], np.int64), "start_ts": d["d_start"],
            "duration_ns": d["d_dur"], "transfer_bytes": d["d_bytes"], "source": d["d_source"], "dest": d["d_dest"],
            "queue_type": np.array([QUEUE_TYPES.get(q, "unknown") for q in d["d_queue"]], dtype=object),
            "variable": d["d_variable"], "framework_op": owner.of(d["k"], d["d_node"])[0],
            "descriptor_bytes": d["d_descriptor"],
            "dma_engine": np.array([ring.get(q, -1) for q in d["d_queue"]], np.int64)})
        dma_row[keep_d] = first + np.arange(int(keep_d.sum()))
    _flows(b, ev, ins_row, dma_row, k_host_row)
    _collectives(b, prog, proj, keep_c, core, dev, nc, rank, pid)
    placed = {buf: add_allocations(b, core, buf, seg, tags, owner.of(k, np.full(len(k), -1, np.int64))[0],
                                   p.partitions, cap)
              for buf, seg, k, tags, cap in (("SBUF", ev.sbuf, ev.sbuf_k, ev.sbuf_tag, p.sbuf_bytes),
                                             ("PSUM", ev.psum, ev.psum_k, ev.psum_tag, p.psum_bytes))}
    _counters(b, ev, p, core, dev, nc, rank, pid, owner, placed)
    return core


class _Owners:
    """The host op and name each event stands for: the kernel's op, or for a compiled graph the host op
    (the eagerly run aten op inside the graph call) and name of the graph node it came from."""

    def __init__(self, prog: Program, proj: Projection, sigs: list, host_rows: np.ndarray) -> None:
        self.k_row = host_rows[proj.k_host] if len(proj.k_host) else np.zeros(0, np.int64)
        self.k_sig = proj.k_sig
        node_names = [list(getattr(w, "names", [])) for _, w in sigs]
        self.sig_name = np.array([nm for nm, _ in sigs] + [""], dtype=object)
        lens = np.array([len(x) for x in node_names] + [0], dtype=np.int64)
        self.name_len = lens
        self.name_off = np.cumsum(lens) - lens
        self.names = np.array([x for ns in node_names for x in ns] + [""], dtype=object)
        # a graph node's dtype (the op it stands for), "" for nodes without one; read like the names
        node_dtypes = [[getattr(x, "dtype", "") or "" for x in getattr(w, "works", [])] for _, w in sigs]
        self.sig_dtype = np.array([getattr(w, "dtype", "") or "" for _, w in sigs] + [""], dtype=object)
        self.dtype_len = np.array([len(x) for x in node_dtypes] + [0], dtype=np.int64)
        self.dtype_off = np.cumsum(self.dtype_len) - self.dtype_len
        self.node_dtypes = np.array([x for ds in node_dtypes for x in ds] + [""], dtype=object)
        maps = [prog.graph_nodes.get(int(h)) for h in proj.k_host]
        self.map_len = np.array([len(m) if m is not None else 0 for m in maps], dtype=np.int64)
        self.map_off = np.cumsum(self.map_len) - self.map_len
        parts = [np.where(m >= 0, host_rows[np.maximum(m, 0)], -1) for m in maps if m is not None]
        self.map = np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def of(self, k: np.ndarray, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(framework_op rows, names) of events of kernel instances ``k`` from template nodes ``node``."""
        fo = self.k_row[k]
        sig = self.k_sig[k]
        name = self.sig_name[sig]
        named = (node >= 0) & (self.name_len[sig] > node)
        if named.any():
            name = name.copy()
            name[named] = self.names[self.name_off[sig[named]] + node[named]]
        has = (node >= 0) & (self.map_len[k] > node)
        if has.any():
            mapped = self.map[self.map_off[k[has]] + node[has]]
            fo = fo.copy()
            fo[has] = np.where(mapped >= 0, mapped, fo[has])
        return fo, name


    def dtype(self, k: np.ndarray, node: np.ndarray) -> np.ndarray:
        """The dtype of events of kernel instances ``k`` from template nodes ``node``: the kernel's op's, or for a
        compiled graph the dtype of the node the event came from (a graph has no single dtype)."""
        sig = self.k_sig[k]
        out = self.sig_dtype[sig]
        named = (node >= 0) & (self.dtype_len[sig] > node)
        if named.any():
            out = out.copy()
            out[named] = self.node_dtypes[self.dtype_off[sig[named]] + node[named]]
        return out


def _flows(b: TraceBuilder, ev: CoreEvents, ins_row: np.ndarray, dma_row: np.ndarray, k_host_row: np.ndarray) -> None:
    fi = ev.first_instr
    ok = fi >= 0
    if ok.any():
        rows = ins_row[fi[ok]]
        good = rows >= 0
        b.add_flows("host_ops", k_host_row[ok][good], "instructions", rows[good], "launch")
    f = ev.flows
    if len(f["dst"]):
        dst = ins_row[f["dst"]]
        for kind, table, rows_of in ((0, "instructions", ins_row), (1, "dma", dma_row)):
            m = (f["src_kind"] == kind) & (dst >= 0)
            src = rows_of[f["src"][m]]
            good = src >= 0
            if good.any():
                b.add_flows(table, src[good], "instructions", dst[m][good], "dependency")


def _collectives(b: TraceBuilder, prog: Program, proj: Projection, keep: np.ndarray, core: int, dev: int,
                 nc: int, rank: int, pid: int) -> None:
    if not len(proj.c_index) or not keep.any():
        return
    c = prog.collectives.iloc[proj.c_index[keep]]
    dur = proj.c_dur[keep]
    algbw = c["message_bytes"].to_numpy(np.float64) / (dur * 1e-9)
    cores = proj.c_core[keep]
    tracks = {c: b.add_track("cc_core", f"CC-core {c}", core, device=dev, nc_idx=nc, rank=rank, pid=pid)
              for c in sorted(set(cores.tolist()))}
    cc = np.array([tracks[c] for c in cores], dtype=np.int64)
    first = b.add_rows("collectives", {
        "track": cc, "start_ts": proj.c_start[keep], "duration_ns": dur, "operation": c["operation"].to_numpy(object),
        "algorithm": proj.c_algorithm[keep], "process_group": c["process_group"].to_numpy(object),
        "replica_group": c["replica_group"].to_numpy(object), "group_size": c["group_size"].to_numpy(np.int64),
        "sequence_number": c["sequence_number"].to_numpy(np.int64), "input_size": c["input_size"].to_numpy(np.int64),
        "output_size": c["output_size"].to_numpy(np.int64), "num_elements": c["num_elements"].to_numpy(np.int64),
        "dtype": c["dtype"].to_numpy(object), "algorithm_bandwidth": algbw,
        "bus_bandwidth": algbw * bus_factor(c["operation"].to_numpy(object), c["group_size"].to_numpy()),
        "framework_op": c["host_row"].to_numpy(np.int64)})
    b.add_flows("host_ops", c["host_row"].to_numpy(np.int64), "collectives", first + np.arange(len(c)), "launch")


def _counters(b: TraceBuilder, ev: CoreEvents, p: CoreParams, core: int, dev: int, nc: int, rank: int, pid: int,
              owner: _Owners, placed: dict[str, np.ndarray]) -> None:
    i, d = ev.ins, ev.dma
    if not len(i["k"]) and not len(d["k"]):
        return
    t0 = int(min(i["start"].min() if len(i["k"]) else np.inf, d["d_start"].min() if len(d["k"]) else np.inf))
    t1 = int(max((i["start"] + i["dur"]).max() if len(i["k"]) else 0, (d["d_start"] + d["d_dur"]).max()
                 if len(d["k"]) else 0))
    edges = ctr.sample_grid(t0, t1, ctr.MAX_SAMPLES - 1)
    series: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    d_end = d["d_start"] + d["d_dur"]
    series["DMA Throughput"] = (edges, np.append(ctr.rate_average(edges, d["d_start"], d_end, d["d_bytes"]), 0.0))
    series["Pending DMA Count"] = ctr.step_series(d["d_start"] - int(p.dma_latency_ns), d_end)
    for name, seg, cap in (("State Buffer Usage", placed["SBUF"], p.sbuf_bytes),
                           ("PSUM Usage", placed["PSUM"], p.psum_bytes)):
        ts, v = ctr.step_series(seg[:, 0].astype(np.int64), seg[:, 1].astype(np.int64), seg[:, 2])
        series[name] = (ts, np.clip(100.0 * v / cap, 0.0, 100.0))
    mm = i["opcode"] == "MATMUL"
    # each matmul's own dtype (a compiled graph's matmuls differ, the graph has none of its own), as the Tensor
    # engine multiplies in it: FP32 under --auto-cast matmult runs at the BF16 rate, so it weighs as BF16
    codes, uniq = pd.factorize(owner.dtype(i["k"][mm], i["node"][mm]))
    mult = np.array([adjusted_flops_multiplier(p.target, p.matmul_dtype(x)) for x in uniq], np.float64)
    adj = i["flops"][mm] * mult[codes] if mm.any() else np.zeros(0)
    mfu = 100.0 * ctr.rate_average(edges, i["start"][mm], i["start"][mm] + i["dur"][mm], adj) / p.peak("bfloat16")
    series["Estimated Instant MFU"] = (edges, np.append(mfu, 0.0))
    th = ev.throttle
    if len(th):
        r = p.throttle_ramp_ns
        level = 100.0 * (1.0 - p.throttle_f0)
        ts = np.stack([th[:, 0], th[:, 0] + r / 2, th[:, 0] + r], axis=1).reshape(-1).astype(np.int64)
        val = np.tile([level, level / 2, 0.0], len(th))
        series["Throttling"] = (ts, val)
    else:
        series["Throttling"] = (np.array([t0, t1], np.int64), np.zeros(2))
    for name, unit in ctr.COUNTERS.items():
        ts, val = series[name]
        if not len(ts):
            continue
        t = b.add_track("counter", name, core, device=dev, nc_idx=nc, rank=rank, unit=unit, pid=pid)
        b.add_rows("counters", {"track": t, "ts": ts, "value": val})
