"""A scheduled kernel as its event template (:mod:`.pipeline` schedules, this records): the stages' instruction
pieces, DMA triggers and transfers, semaphore waits and their flows, SBUF/PSUM occupancy and the Tensor engine's
MultiplyMoving ramp, as the arrays of a ``KernelTemplate``.
"""
from __future__ import annotations

import json
import math

import numpy as np

from neuron_profiler.runtime.simulated.memory import group_tags, resident_name
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.plan import DMA, KernelPlan, KernelTemplate, Stage, _Node

#: a stage paced by its inputs (span > busy time x this) is drawn as separate pieces with waits between
_PACED = 1.05
_MAX_PIECES = 4
_INSTR_COLS = ("flops", "hbm_read", "hbm_write", "sbuf_read", "sbuf_write", "psum_read", "psum_write")


def _pieces(start: float, end: float, busy: float, tiles: int) -> list[tuple[float, float, float]]:
    """(start, end, share) pieces of a stage: one piece when it ran back to back, else up to four pieces of
    its busy time spread over its span (its tiles arrived one by one from a slower input)."""
    span = end - start
    if busy <= 0 or span <= busy * _PACED or tiles < 2:
        return [(start, end, 1.0)]
    k = min(_MAX_PIECES, tiles)
    slot, chunk = span / k, busy / k
    # the first piece starts with the stage; later ones end with their slot (their input arrived)
    return [(start, start + chunk, 1.0 / k)] + [(start + (j + 1) * slot - chunk, start + (j + 1) * slot, 1.0 / k)
                                                for j in range(1, k)]


def _template(plan: KernelPlan, nodes: list[_Node], waits: list[tuple[str, float, float, int]],
              sync_pieces: dict[int, list[tuple[float, float, float]]], p: CoreParams) -> KernelTemplate:
    """The scheduled kernel as arrays: its instructions (stage pieces, DMA triggers, semaphore waits), DMA
    transfers, wait flows, buffer occupancy and Tensor-engine ramp."""
    ins, dma, first_row, paced_waits = _stage_records(plan, nodes, sync_pieces, p)
    f_kind, f_src, f_dst = _wait_records(ins, nodes, waits + paced_waits, first_row)
    sbuf, psum, sbuf_tag, psum_tag = _occupancy(plan, nodes)
    first_mm, ramp, busy = _matmul_ramp(ins, p)
    duration = max([n.end for n in nodes] + [r["end"] for r in ins], default=0.0)

    def i64(key: str, recs: list[dict]) -> np.ndarray:
        return np.ceil(np.array([r.get(key, 0.0) for r in recs], dtype=np.float64) - 1e-6).astype(np.int64)

    def obj(key: str, recs: list[dict]) -> np.ndarray:
        return np.array([r.get(key, "") for r in recs], dtype=object)

    s_arr, e_arr = i64("start", ins), i64("end", ins)
    ds, de = i64("start", dma), i64("end", dma)
    return KernelTemplate(
        duration=int(np.ceil(duration)), engine=obj("engine", ins), opcode=obj("opcode", ins),
        start=s_arr, dur=np.maximum(e_arr - s_arr, 1), flops=i64("flops", ins),
        transpose=np.array([bool(r.get("transpose", False)) for r in ins], dtype=bool),
        hbm_read=i64("hbm_read", ins), hbm_write=i64("hbm_write", ins), sbuf_read=i64("sbuf_read", ins),
        sbuf_write=i64("sbuf_write", ins), psum_read=i64("psum_read", ins), psum_write=i64("psum_write", ins),
        args=obj("args", ins),
        d_queue=obj("queue", dma), d_start=ds, d_dur=np.maximum(de - ds, 1), d_bytes=i64("bytes", dma),
        d_source=obj("source", dma), d_dest=obj("dest", dma), d_variable=obj("variable", dma),
        d_descriptor=i64("descriptor", dma),
        f_src_kind=np.array(f_kind, dtype=np.int64), f_src=np.array(f_src, dtype=np.int64),
        f_dst=np.array(f_dst, dtype=np.int64), sbuf_seg=sbuf, psum_seg=psum,
        node=np.array([r.get("node", -1) for r in ins], dtype=np.int64),
        d_node=np.array([r.get("node", -1) for r in dma], dtype=np.int64), first_mm=first_mm,
        ramp_work_ns=ramp, tensor_busy_ns=busy, sbuf_tag=sbuf_tag, psum_tag=psum_tag)


def _whole(nbytes: float) -> int:
    """Whole bytes of a transfer (fractional shares of a tensor round up, as the emitted columns do)."""
    return int(math.ceil(nbytes - 1e-6)) if nbytes > 0 else 0


def _int_split(total: int, shares: list[float]) -> list[int]:
    """``total`` whole bytes split over pieces of these shares (summing to 1), summing exactly to ``total``."""
    cum, out, prev = 0.0, [], 0
    for sh in shares:
        cum += sh
        nxt = total if cum >= 1.0 - 1e-9 else min(total, int(math.ceil(total * cum - 1e-6)))
        out.append(nxt - prev)
        prev = nxt
    return out


def _hbm_total(moved: Stage, hbm: float) -> int:
    """The whole HBM bytes a DMA stage's trigger carries: the sum of its transfers' whole bytes when the stage
    moves exactly that traffic (so the trigger and its DMA rows agree to the byte), else ``hbm`` rounded up."""
    parts = moved.dma_parts()
    if hbm > 0 and abs(hbm - sum(b for _, b, _, _ in parts)) <= 1e-6 * max(hbm, 1.0):
        return sum(_whole(b) for _, b, _, _ in parts)
    return _whole(hbm)


def _stage_records(plan: KernelPlan, nodes: list[_Node], sync_pieces: dict[int, list[tuple[float, float, float]]],
                   p: CoreParams) -> tuple[
        list[dict], list[dict], dict[int, tuple[int, int]], list[tuple[str, float, float, int]]]:
    """(instruction records, DMA records, node -> (0 instruction / 1 DMA, its first record), the waits
    between the pieces of paced stages) of every scheduled node."""
    ins: list[dict] = []
    dma: list[dict] = []
    first_row: dict[int, tuple[int, int]] = {}
    paced_waits: list[tuple[str, float, float, int]] = []
    for nid, n in enumerate(nodes):
        st = n.stage
        tiles = plan.groups[n.g].tiles
        if n.res == DMA:
            first_row[nid] = (1, len(dma))
            pieces = _pieces(n.start, n.end, st.ns, tiles)
            split = [_int_split(_whole(nbytes), [pc[2] for pc in pieces]) for _, nbytes, _, _ in st.dma_parts()]
            for j, piece in enumerate(pieces):
                for (q, _, desc, var), sizes in zip(st.dma_parts(), split):
                    dma.append({"queue": q, "start": piece[0], "end": piece[1], "bytes": sizes[j],
                                "source": st.source, "dest": st.dest, "variable": var, "descriptor": desc,
                                "node": st.node})
            continue
        first_row[nid] = (0, len(ins))
        if n.is_trigger:  # the trigger carries its transfer's HBM traffic (as Explorer attributes DMA to it)
            moved = nodes[n.trigger].stage
            pieces = sync_pieces.get(nid) or [(n.start, n.end, 1.0)]
            reads = _int_split(_hbm_total(moved, moved.hbm_read), [pc[2] for pc in pieces])
            writes = _int_split(_hbm_total(moved, moved.hbm_write), [pc[2] for pc in pieces])
            for (a, b, share), rd, wr in zip(pieces, reads, writes):
                ins.append({"engine": "Sync", "opcode": "DmaTrigger", "start": a, "end": b,
                            "args": _args(Stage("Sync", "DmaTrigger", 0.0, instructions=tiles), "", share),
                            "hbm_read": rd, "hbm_write": wr, "node": moved.node})
            continue
        pieces = _pieces(n.start, n.end, st.ns, tiles)
        for j, (a, b, share) in enumerate(pieces):
            if j and a - pieces[j - 1][1] >= p.semaphore_wait_min_ns:
                paced_waits.append((n.res, pieces[j - 1][1], a, -1 - nid))
            rec = {"engine": n.res, "opcode": st.opcode, "start": a, "end": b, "transpose": st.transpose,
                   "args": _args(st, plan.note if not ins else "", share), "node": st.node}
            for c in _INSTR_COLS:
                rec[c] = getattr(st, c) * share
            ins.append(rec)
    return ins, dma, first_row, paced_waits


def _wait_records(ins: list[dict], nodes: list[_Node], waits: list[tuple[str, float, float, int]],
                  first_row: dict[int, tuple[int, int]]) -> tuple[list[int], list[int], list[int]]:
    """Append a SemaphoreWait instruction per wait (engine, from, to, waited-for node; ``-1 - node`` for a
    paced stage waiting on its own input); returns the flows (source kind, source record, wait record) from
    each waited-for node's first record to its wait."""
    f_kind, f_src, f_dst = [], [], []
    for eng, a, b, last in waits:
        if last >= 0:
            kind, row = first_row[last]
            f_kind.append(kind)
            f_src.append(row)
            f_dst.append(len(ins))
        owner = nodes[last if last >= 0 else -1 - last].stage.node
        ins.append({"engine": eng, "opcode": "SemaphoreWait", "start": a, "end": b, "args": "", "node": owner})
    return f_kind, f_src, f_dst


def _matmul_ramp(ins: list[dict], p: CoreParams) -> tuple[int, float, float]:
    """(the first MATMUL record, -1 without one; its MATMUL time within the throttle ramp after the first
    one starts; its total MATMUL time)."""
    mm = [k for k, r in enumerate(ins) if r["opcode"] == "MATMUL"]
    if not mm:
        return -1, 0.0, 0.0
    first_mm = min(mm, key=lambda k: ins[k]["start"])
    ramp = busy = 0.0
    t0 = ins[first_mm]["start"]
    for k in mm:
        r = ins[k]
        busy += r["end"] - r["start"]
        ramp += max(0.0, min(r["end"], t0 + p.throttle_ramp_ns) - max(r["start"], t0))
    return first_mm, ramp, busy


def _args(st: Stage, note: str, share: float) -> str:
    parts = []
    if note:
        parts.append('"tiling": ' + json.dumps(note))
    if st.mode:
        parts.append(f'"performance_mode": "{st.mode}"')
    n = int(round(st.instructions * share))
    if n > 1:
        parts.append(f'"instructions": {n}')
    return "{" + ", ".join(parts) + "}" if parts else ""


def _occupancy(plan: KernelPlan, nodes: list[_Node]) -> tuple[np.ndarray, np.ndarray, tuple, tuple]:
    """SBUF and PSUM occupancy segments (start, end, bytes): per group from its first acquiring stage to its
    releasing stage, ``min(tiles, slots)`` tiles' buffers; plus the kernel's resident SBUF data; and what each
    segment holds (``memory.group_tags``)."""
    per_group: dict[int, dict[str, list[float]]] = {}
    for n in nodes:
        if n.is_trigger:
            continue
        d = per_group.setdefault(n.g, {})
        s = n.stage
        for buf, acq, rel in (("sbuf", s.sbuf_acquire, s.sbuf_release), ("psum", s.psum_acquire, s.psum_release)):
            if acq:
                d.setdefault(buf + "_start", []).append(n.start)
            if rel:
                d.setdefault(buf + "_end", []).append(n.end)
    out: dict[str, list[tuple[float, float, float]]] = {"sbuf": [], "psum": []}
    tags: dict[str, list[tuple[str, str, bool]]] = {"sbuf": [], "psum": []}
    for gi, d in per_group.items():
        g = plan.groups[gi]
        sb_tag, ps_tag = group_tags(g)
        for buf, per_tile, slots, tag in (("sbuf", g.sbuf_bytes, plan.sbuf_slots, sb_tag),
                                          ("psum", g.psum_bytes, plan.psum_slots, ps_tag)):
            if d.get(buf + "_start") and d.get(buf + "_end") and per_tile > 0:
                out[buf].append((min(d[buf + "_start"]), max(d[buf + "_end"]), per_tile * min(g.tiles, slots)))
                tags[buf].append(tag)
    end = max((n.end for n in nodes), default=0.0)
    if plan.resident_sbuf_bytes > 0 and end > 0:
        out["sbuf"].append((0.0, end, plan.resident_sbuf_bytes))
        tags["sbuf"].append((resident_name(plan), "resident", False))
    return (np.array(out["sbuf"], dtype=np.float64).reshape(-1, 3),
            np.array(out["psum"], dtype=np.float64).reshape(-1, 3), tuple(tags["sbuf"]), tuple(tags["psum"]))
