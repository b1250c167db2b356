"""Gather-class kernels (embedding, embedding_bag, fbgemm table-batched lookups, gather, scatter, sort): what
they move comes from the table's real shape (``gather_geometry``); GpSimd computes addresses and indirect DMA
(``qGpSimdDynamic``) moves rows, or, for a table that fits in SBUF, GpSimd gathers in place
(``_local_gather``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from neuron_profiler.opmodel import OpWork
from neuron_profiler.runtime.simulated import engines as E
from neuron_profiler.runtime.simulated.dma import descriptor_for, transfer_ns
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import DMA, Group, KernelPlan, Stage
from neuron_profiler.runtime.simulated.tiles import split, tile_groups
from neuron_profiler.runtime.simulated.transfers import ELEMENTWISE_FREE_MAX, _elem, _load, _loads, _store

__all__ = ["Gather", "gather_geometry", "gpsimd_plan", "TBE_DEFAULT_ROW"]

#: row width (elements) of a batched embedding table whose rows are not recorded (MODEL: a common DLRM dimension)
TBE_DEFAULT_ROW = 128
_INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")


@dataclass(frozen=True)
class Gather:
    """What a gather / scatter moves: ``lookups`` rows of ``row`` elements of ``elem`` bytes from its table,
    into ``out_rows`` output rows (fewer than the lookups when bags are pooled); ``idx_bytes`` of indices."""

    lookups: int
    row: int
    elem: int
    out_rows: int
    idx_bytes: float
    note: str = ""
    table_bytes: float = 0.0   # the whole table (a table small enough is loaded into SBUF once)


def _is_int(t) -> bool:
    return t.dtype in _INT_DTYPES or t.dtype.startswith(("int", "uint", "long"))


def _tbe_gather(w: OpWork) -> Gather | None:
    """fbgemm's table-batched embedding lookup (``split_embedding_codegen_lookup_*``): all tables flattened into
    one 1-D weights tensor, ``indices`` and ``offsets`` (one bag per table and sample, plus one). The row width
    is the weights' size over the row count of a row-wise optimizer state (one value per row, dividing the
    weights exactly) when the op has one, else ``TBE_DEFAULT_ROW``."""
    ins = w.inputs
    if len(ins) < 4:
        return None
    weights = max(ins[:4], key=lambda t: t.numel)
    ints = [(i, t) for i, t in enumerate(ins) if _is_int(t) and len(t.shape) == 1]
    if not ints or weights.numel == 0:
        return None
    pos, idx = max(ints, key=lambda it: it[1].numel)
    after = [t for i, t in ints if i > pos]
    bags = max(after[0].numel - 1, 1) if after else max(idx.numel, 1)
    # the row-wise state holds one value per row of every table: a whole number of rows (per-index weights,
    # one value per index, are not it)
    rows = [t.numel for t in ins[pos + 1:] if not _is_int(t) and len(t.shape) == 1 and t.numel
            and t.numel != idx.numel and weights.numel % t.numel == 0 and weights.numel // t.numel <= 4096]
    row = int(round(weights.numel / max(rows))) if rows else TBE_DEFAULT_ROW
    how = "rows of a row-wise optimizer state" if rows else f"not recorded: {TBE_DEFAULT_ROW} assumed (MODEL)"
    elem = max(1, weights.nbytes // max(weights.numel, 1))
    return Gather(idx.numel, row, elem, bags, float(idx.nbytes + (after[0].nbytes if after else 0)),
                  f"table-batched lookup: {idx.numel} indices into {bags} bags, row width {row} ({how})")


def gather_geometry(w: OpWork, base: str) -> Gather:
    """The rows a gather-class op moves, from its table's real shape: ``embedding(weight[V, D], indices)`` and
    ``embedding_bag`` read ``indices x D`` elements (bags pooled into one output row each), fbgemm's batched
    lookups likewise (``_tbe_gather``), other gathers / scatters rows of their first tensor's last dimension."""
    ins = w.inputs
    if "embedding_codegen_lookup" in base or base.startswith("split_embedding"):
        g = _tbe_gather(w)
        if g is not None:
            return g
    table = ins[0] if ins else None
    idx = ins[1] if len(ins) > 1 else None
    elementwise = base in ("gather", "scatter", "scatter_add", "scatter_reduce", "take", "take_along_dim", "put")
    row = int(table.shape[-1]) if table is not None and len(table.shape) >= 2 and not elementwise else 1
    elem = max(1, table.nbytes // max(table.numel, 1)) if table is not None else _elem(w)
    n_idx = idx.numel if idx is not None else max(w.out_elems // max(row, 1), 1)
    out_rows = n_idx
    if "embedding_bag" in base and idx is not None:  # pooled: one output row per bag
        out_rows = max(ins[2].numel - (1 if ins[2].numel > 1 else 0), 1) if len(ins) > 2 and len(idx.shape) == 1 \
            else (int(idx.shape[0]) if idx.shape else 1)
    return Gather(n_idx, row, elem, out_rows, float(idx.nbytes) if idx is not None else 64.0,
                  table_bytes=float(table.nbytes) if table is not None else 0.0)


def gpsimd_plan(w: OpWork, base: str, p: CoreParams) -> KernelPlan:
    """Gathers (embedding, index_select), scatters, sorts: GpSimd computes addresses, indirect DMA moves rows.
    A scatter loads its values with its indices and read-modify-writes its destination rows (an indirect gather
    from HBM, a Vector add, an indirect scatter back), so every HBM byte it reads is a DMA transfer from HBM."""
    out_elem = _elem(w)
    scatter = any(k in base for k in ("scatter", "index_put", "index_add", "index_copy", "backward", "put"))
    sort = any(k in base for k in ("sort", "topk", "kthvalue", "median", "unique", "argsort"))
    if sort:
        g = Gather(max(w.elems, 1), 1, out_elem, max(w.elems, 1), 64.0)
        moved, out_bytes = float(w.out_bytes), float(w.out_bytes)
    else:
        g = gather_geometry(w, base)
        moved = float(g.lookups) * g.row * g.elem
        out_bytes = float(g.out_rows) * g.row * out_elem if not scatter else moved
    free = math.ceil(max(g.lookups, 1) / p.partitions)
    g_cycles = free * (max(1.0, math.log2(max(free, 2))) if sort else 1.0)
    if not sort and 0 < g.table_bytes <= p.sbuf_bytes * p.sbuf_usable_fraction / p.partitions / 2:
        return _local_gather(w, base, g, scatter, out_bytes, p)
    desc = descriptor_for(g.row, g.elem)
    idx_desc = descriptor_for(math.ceil(g.lookups / p.partitions), 4)
    if scatter:  # the values scattered stream in with the indices
        st = [_loads([("qSyncIO0", g.idx_bytes, idx_desc, f"{base}.indices"),
                      ("qSyncIO1", moved, desc, f"{base}.in0")], p)]
    else:
        st = [_load(g.idx_bytes, idx_desc, f"{base}.indices", p)]
    st.append(Stage("GpSimd", "Sort" if sort else "Scatter" if scatter else "Gather", E.gpsimd_ns(1, g_cycles, p),
                    sbuf_read=g.idx_bytes, instructions=1))
    if scatter:  # read-modify-write of the destination rows: indirect gather, Vector add, indirect scatter
        st.append(Stage(DMA, "gather", transfer_ns(moved, desc, p), nbytes=moved, queue="qGpSimdDynamic",
                        descriptor=desc, variable=f"{base}.out", source="HBM", dest="SBUF", hbm_read=moved))
        st.append(Stage("Vector", "TensorTensor", E.vector_ns(1, free * g.row, 2, "float32", p),
                        flops=float(g.lookups) * g.row, instructions=1))
        st.append(Stage(DMA, "scatter", transfer_ns(moved, desc, p), nbytes=moved, queue="qGpSimdDynamic",
                        descriptor=desc, variable=f"{base}.out", source="SBUF", dest="HBM", hbm_write=moved,
                        sbuf_release=True))
    else:
        st.append(Stage(DMA, "gather", transfer_ns(moved, desc, p), nbytes=moved, queue="qGpSimdDynamic",
                        descriptor=desc, variable=f"{base}.in0", source="HBM", dest="SBUF", hbm_read=moved))
        if g.out_rows < g.lookups:  # pooled bags: the rows of a bag are summed on the Vector engine
            st.append(Stage("Vector", "TensorTensor", E.vector_ns(1, free * g.row, 2, "float32", p),
                            flops=float(g.lookups) * g.row, instructions=1))
        st.append(_store(out_bytes, descriptor_for(g.row, out_elem), f"{base}.out", p))
    note = g.note or f"{g.lookups} indices, rows of {g.row} x {g.elem} B"
    return KernelPlan([Group(st, 1, sbuf_bytes=min(moved, p.sbuf_bytes * p.sbuf_usable_fraction))], note=note)


def _local_gather(w: OpWork, base: str, g: Gather, scatter: bool, out_bytes: float, p: CoreParams) -> KernelPlan:
    """A gather / scatter whose table fits in every partition's share of SBUF: the table is loaded once, the
    indices (and a scatter's values) stream in and the results stream out in long descriptors, and GpSimd
    addresses the table in SBUF (no indirect DMA)."""
    idx_elem = max(1, int(round(g.idx_bytes / max(g.lookups, 1))))
    per_part = math.ceil(max(g.lookups, 1) / p.partitions)
    free = max(1, min(per_part, ELEMENTWISE_FREE_MAX))
    sizes = tile_groups(math.ceil(per_part / free), p.max_tile_groups)
    share = split(1.0, sizes)
    values = out_bytes if scatter else 0.0        # a scatter also reads the values it adds
    stream_out = 0.0 if scatter else out_bytes    # ... and writes its (small) table back once, at the end
    desc = descriptor_for(free, idx_elem)
    groups = []
    for gi, (tiles, f) in enumerate(zip(sizes, share)):
        parts = [("qSyncIO0", (g.idx_bytes + values) * f, desc, f"{base}.indices")]
        if gi == 0:
            parts.append(("qSyncIO1", g.table_bytes, descriptor_for(g.table_bytes, 1), f"{base}.table"))
        st = [_loads(parts, p),
              Stage("GpSimd", "Scatter" if scatter else "Gather", E.gpsimd_ns(tiles, free * g.row, p),
                    sbuf_read=(g.idx_bytes + values) * f, sbuf_write=out_bytes * f, instructions=tiles,
                    sbuf_release=scatter and gi < len(sizes) - 1)]
        if stream_out > 0:
            st.append(_store(stream_out * f, descriptor_for(free * g.row, _elem(w)), f"{base}.out", p))
        elif gi == len(sizes) - 1:
            st.append(_store(g.table_bytes, descriptor_for(g.table_bytes, 1), f"{base}.out", p))
        groups.append(Group(st, tiles, sbuf_bytes=p.partitions * free * (idx_elem + g.row * _elem(w))))
    return KernelPlan(groups, resident_sbuf_bytes=g.table_bytes * p.partitions,
                      note=f"{g.lookups} indices into a {int(g.table_bytes)} B table held in SBUF")
