"""From an op's work (``neuron_profiler.opmodel.OpWork``) to the tiled kernel a NeuronCore runs for it.

Each builder returns a ``KernelPlan``: tile groups whose stages are the engine instructions and DMA
transfers of the kernel (see ``pipeline``), with the tiling a compiler for the target would choose:
- matmul / conv: 128 x 128 stationary tiles (LoadStationary on ``Tensor``), moving tiles of up to 512
  columns (MultiplyMoving ``MATMUL`` on ``TensorMatrix``) accumulating over K in a PSUM bank, results
  evacuated PSUM -> SBUF alternately by Vector and Scalar, stored by DMA; the operand slab that fits stays
  resident in SBUF (``tiles.matmul_blocking``) and re-reads of the other are reload DMA. Under
  ``--auto-cast matmult`` (``CoreParams.auto_cast``) an FP32 matmul loads its FP32 operands, casts them to BF16
  in SBUF (one engine pass over the loaded elements, on the engine the group's evacuation does not use) and
  multiplies at the BF16 rate; no BF16 copy goes through HBM.
- attention: flash style per 128-query tile: QK^T in PSUM, max (Vector) and exp with running sum (Scalar),
  P transposed on the Tensor engine (``TRANSPOSE``), PV accumulated in PSUM, normalised on evacuation.
- softmax, norms, activations, elementwise, reductions, copies, fills: [128 x F] tiles streamed through
  SBUF (double buffered) with the engine work per tile; GpSimd ops (gather, scatter, sort) are built in
  ``gathers`` from their table's real shape; the DMA stages in ``transfers``.
Every cost comes from ``engines`` and ``dma``; every constant from ``CoreParams``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from neuron_profiler.opmodel import OpWork
from neuron_profiler.runtime.simulated import engines as E
from neuron_profiler.runtime.simulated.dma import descriptor_for, transfer_ns
from neuron_profiler.runtime.simulated.gathers import gpsimd_plan
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.pipeline import DMA, Group, KernelPlan, Stage
from neuron_profiler.runtime.simulated.tiles import matmul_blocking, split, tile_groups
from neuron_profiler.runtime.simulated.transfers import ELEMENTWISE_FREE_MAX, _elem, _loads, _store

__all__ = ["kernel_plan", "Fusion", "ELEMENTWISE_FREE_MAX", "MATMUL_BLOCK_FREE"]

#: free elements per partition of a matmul operand block load (MODEL: NKI optimized-matmul block width)
MATMUL_BLOCK_FREE = 2048


@dataclass(frozen=True)
class Fusion:
    """How a kernel sits inside a compiled graph: which tensor inputs are already in SBUF (left there by the
    op before it), whether its output goes back to HBM, and elementwise work fused into its evacuation."""

    in_sbuf: frozenset[int] = frozenset()   # positions in ``OpWork.inputs``
    store: bool = True
    epilogue_flops: float = 0.0
    epilogue_scalar: bool = False           # the fused epilogue needs the Scalar engine (an activation)


EAGER = Fusion()


def base_name(name: str) -> str:
    """``aten::add_.Tensor`` -> ``add``."""
    base = name.split("::", 1)[-1].split(".", 1)[0]
    return base[:-1] if base.endswith("_") and not base.endswith("__") else base


def kernel_plan(w: OpWork, name: str, p: CoreParams, fusion: Fusion = EAGER) -> KernelPlan | None:
    """The kernel of one op signature on one core, or None when it does no device work."""
    if w.cls == "none" or (not w.out_elems and not w.flops):
        return None
    base = base_name(name)
    if w.cls in ("matmul", "conv"):
        return _matmul(w, base, p, fusion)
    if w.cls == "attention":
        return _attention(w, base, p, fusion)
    if w.cls == "gpsimd":
        return gpsimd_plan(w, base, p)
    return _streamed(w, base, p, fusion)


# ------------------------------------------------------------------------------------------ matmul
def _rows_desc(rows: int, cols: int, elem: int, p: CoreParams) -> int:
    """Contiguous bytes per partition of a row-major [rows, cols] matrix spread over the partitions in runs of
    ``rows // partitions`` whole rows (at most ``ELEMENTWISE_FREE_MAX`` elements)."""
    return descriptor_for(min(cols * max(1, rows // p.partitions), ELEMENTWISE_FREE_MAX), elem)


def _matmul(w: OpWork, base: str, p: CoreParams, fusion: Fusion = EAGER) -> KernelPlan:
    batch, m, k, n = (max(int(x), 1) for x in w.gemm)
    ins = w.inputs
    a_elem = ins[0].nbytes // max(ins[0].numel, 1) if ins else 4
    b_elem = ins[1].nbytes // max(ins[1].numel, 1) if len(ins) > 1 else a_elem
    budget = p.sbuf_bytes * p.sbuf_usable_fraction * 0.5
    blk = matmul_blocking(batch, m, k, n, a_elem, b_elem, budget, p.tile_moving, p.tile_rows)
    a_bytes = float(ins[0].nbytes) if ins else blk.a_bytes  # conv: the real input, im2col happens in SBUF
    b_bytes = float(sum(t.nbytes for t in ins[1:])) or blk.b_bytes
    reload = blk.reload_bytes * (a_bytes / blk.a_bytes if blk.resident == "B" and blk.a_bytes else 1.0)
    if 0 in fusion.in_sbuf:  # A left in SBUF by the op before: neither loaded nor re-read
        a_bytes, reload = 0.0, (reload if blk.resident == "A" else 0.0)
    if fusion.in_sbuf & set(range(1, len(ins))):
        b_bytes = float(sum(t.nbytes for i, t in enumerate(ins) if i >= 1 and i not in fusion.in_sbuf))
        reload = reload if blk.resident == "B" else 0.0
    mt, kt, nt = math.ceil(m / p.tile_rows), math.ceil(k / p.tile_rows), math.ceil(n / p.tile_moving)
    out_tiles = batch * mt * nt
    cols = n / nt
    mm_per_tile = kt * (2 if w.cls == "conv" and w.backward else 1)
    out_elem = _elem(w)
    sizes = tile_groups(out_tiles, p.max_tile_groups)
    share = split(1.0, sizes)
    # each partition reads a run of whole rows of one matrix (tile j takes row j of every partition's run), so
    # matrices of more than 128 rows load in descriptors of several rows
    a_desc = max(descriptor_for(min(m, MATMUL_BLOCK_FREE), a_elem), _rows_desc(m, k, a_elem, p))
    b_desc = max(descriptor_for(min(n, max(blk.block_n, MATMUL_BLOCK_FREE)), b_elem), _rows_desc(k, n, b_elem, p))
    o_desc = max(descriptor_for(min(n, MATMUL_BLOCK_FREE), out_elem), _rows_desc(m, n, out_elem, p))
    var = base
    groups = []
    cdt = p.matmul_dtype(w.dtype)
    cast_elems = (a_bytes + b_bytes + reload) / 4.0 if cdt != w.dtype else 0.0
    for gi, (tiles, f) in enumerate(zip(sizes, share)):
        evac = "Scalar" if fusion.epilogue_scalar or gi % 2 else "Vector"
        psum_tile = p.tile_rows * cols * 4
        mm_ns = E.matmul_ns(tiles * mm_per_tile, cols, cdt, p)
        evac_ns = (E.vector_ns(tiles, cols, 1, "float32", p) if evac == "Vector" else E.scalar_ns(tiles, cols, p))
        parts = [("qSyncIO0", a_bytes * f, a_desc, f"{var}.in0"), ("qSyncIO1", b_bytes * f, b_desc, f"{var}.in1")]
        if reload > 0:
            parts.append(("qSyncSpillReload0", reload * f, a_desc if blk.resident == "B" else b_desc, f"{var}.reload"))
        st = [_loads(parts, p)]
        if cast_elems:
            st.append(_cast_stage(cast_elems * f, "Vector" if evac == "Scalar" else "Scalar", p))
        st.append(Stage("Tensor", "LoadStationary", E.load_stationary_ns(tiles * kt, p),
                        sbuf_read=(a_bytes + reload) * f, instructions=tiles * kt))
        st.append(Stage("TensorMatrix", "MATMUL", mm_ns, flops=w.flops * f, sbuf_read=b_bytes * f,
                        psum_write=tiles * psum_tile * mm_per_tile, psum_read=tiles * psum_tile * (mm_per_tile - 1),
                        psum_acquire=True, instructions=tiles * mm_per_tile))
        st.append(Stage(evac, "TensorCopy" if evac == "Vector" else "ACTIVATE", evac_ns, psum_read=tiles * psum_tile,
                        sbuf_write=w.out_bytes * f, psum_release=True, instructions=tiles,
                        flops=fusion.epilogue_flops * f, sbuf_release=not fusion.store))
        if fusion.store:
            st.append(_store(w.out_bytes * f, o_desc, f"{var}.out", p))
        groups.append(Group(st, tiles, sbuf_bytes=(p.tile_rows * k * a_elem + k * cols * b_elem
                                                   + p.tile_rows * cols * out_elem), psum_bytes=psum_tile))
    cast = " (auto-cast to bfloat16 on chip)" if cast_elems else ""
    slab = "B" if blk.resident == "B" else "A" if blk.resident == "A" else "no"
    note = (f"{batch}x[{m}x{k}]@[{k}x{n}] {w.dtype}: {out_tiles} output tiles of 128x{int(cols)}{cast}, "
            f"{kt} K-steps; {slab} slab resident{f', {blk.passes} passes' if blk.passes > 1 else ''}")
    return KernelPlan(groups, resident_sbuf_bytes=blk.slab_bytes, note=note)


def _cast_stage(elems: float, engine: str, p: CoreParams) -> Stage:
    """One engine pass casting ``elems`` FP32 operand elements in SBUF to BF16 (``--auto-cast matmult``), in
    instructions of at most ``vector_free_max`` elements per partition."""
    per_part = elems / p.partitions
    n = max(1, math.ceil(per_part / p.vector_free_max))
    free = per_part / n
    ns = E.vector_ns(n, free, 1, "float32", p) if engine == "Vector" else E.scalar_ns(n, free, p)
    return Stage(engine, "TensorCopy" if engine == "Vector" else "ACTIVATE", ns, sbuf_read=elems * 4,
                 sbuf_write=elems * 2, instructions=n)


# ------------------------------------------------------------------------------------------ attention
def _heads(t) -> int:
    """Heads of a [batch, heads, tokens, head_dim] attention input (1 for fewer dimensions)."""
    return int(t.shape[-3]) if t is not None and len(t.shape) >= 4 else 1


def _attention(w: OpWork, base: str, p: CoreParams, fusion: Fusion = EAGER) -> KernelPlan:
    bh, lq, d, s = (max(int(x), 1) for x in w.gemm)
    elem = _elem(w)
    qt = bh * math.ceil(lq / p.tile_rows)
    sizes = tile_groups(qt, p.max_tile_groups)
    share = split(1.0, sizes)
    bwd = 2.5 if w.backward else 1.0
    kv_bytes = float(sum(t.nbytes for i, t in enumerate(w.inputs[1:3], 1) if i not in fusion.in_sbuf)) \
        if len(w.inputs) >= 3 else 2.0 * bh * s * d * elem
    q_bytes = float(w.inputs[0].nbytes) if w.inputs and 0 not in fusion.in_sbuf else 0.0
    kv_resident = 2 * s * d * elem <= p.sbuf_bytes * p.sbuf_usable_fraction * 0.5
    kv_traffic = kv_bytes if kv_resident else kv_bytes * math.ceil(lq / p.tile_rows)
    kc, sc = math.ceil(d / p.tile_rows), math.ceil(s / p.tile_moving)
    s_tiles = math.ceil(s / p.tile_rows)
    dcols = min(d, p.tile_moving)
    # Q, K, V and O in the layout the projections write them, [batch, tokens, heads x head_dim] (the
    # [batch, heads, tokens, head_dim] tensors are views of it): a load of 128 tokens carries all their heads,
    # heads x head_dim contiguous elements per partition; per-head [128, d] slices of Q and K are transposed
    # on the Tensor engine into the Q^T stationary and K^T moving tiles
    heads_q, heads_kv = _heads(w.inputs[0] if w.inputs else None), _heads(w.inputs[1] if len(w.inputs) > 1 else None)
    q_desc = descriptor_for(min(ELEMENTWISE_FREE_MAX, heads_q * d), elem)
    kv_desc = descriptor_for(min(ELEMENTWISE_FREE_MAX, heads_kv * d), elem)
    bh_kv = max(1, bh * heads_kv // max(heads_q, 1))
    q_tr = qt * kc
    k_tr = bh_kv * s_tiles * kc * (1 if kv_resident else math.ceil(lq / p.tile_rows))
    groups = []
    cdt = p.matmul_dtype(w.dtype)
    cast_elems = (q_bytes + kv_traffic) / 4.0 if cdt != w.dtype else 0.0
    for tiles, f in zip(sizes, share):
        psum = p.tile_rows * min(s, 4 * p.tile_moving) * 4
        st = [_loads([("qSyncIO0", q_bytes * f, q_desc, f"{base}.q"),
                      ("qSyncIO1", kv_traffic * f, kv_desc, f"{base}.kv")], p)]
        if cast_elems:
            st.append(_cast_stage(cast_elems * f, "Vector", p))
        n_tr = (q_tr + k_tr) * f
        st.append(Stage("TensorMatrix", "TRANSPOSE", E.matmul_ns(n_tr, min(d, p.tile_rows), cdt, p),
                        flops=n_tr * 2.0 * p.tile_rows ** 2 * min(d, p.tile_rows), transpose=True,
                        instructions=max(1, round(n_tr))))
        st.append(Stage("Tensor", "LoadStationary", E.load_stationary_ns(tiles * kc, p), instructions=tiles * kc))
        st.append(Stage("TensorMatrix", "MATMUL", bwd * E.matmul_ns(tiles * kc * sc, min(s, p.tile_moving), cdt, p),
                        flops=w.flops * f / 2, psum_write=tiles * psum, psum_acquire=True,
                        instructions=tiles * kc * sc))
        # instructions reading PSUM see <= 4K elements: short rows of several tiles (heads) go in one instruction
        reads = max(1, math.ceil(tiles * s / p.vector_psum_free_max))
        st.append(Stage("Vector", "TensorReduce", bwd * E.vector_ns(reads, s * tiles / reads, 1, "float32", p),
                        psum_read=tiles * psum, instructions=reads))
        st.append(Stage("Scalar", "ACTIVATE", bwd * E.scalar_ns(reads, s * tiles / reads, p), psum_read=tiles * psum,
                        sbuf_write=tiles * p.tile_rows * s * elem, instructions=reads))
        t_flops = 2.0 * p.tile_rows * p.tile_rows * p.tile_rows
        st.append(Stage("TensorMatrix", "TRANSPOSE", E.matmul_ns(tiles * s_tiles, p.tile_rows, cdt, p),
                        flops=tiles * s_tiles * t_flops, transpose=True, instructions=tiles * s_tiles))
        st.append(Stage("TensorMatrix", "MATMUL", bwd * E.matmul_ns(tiles * s_tiles * math.ceil(d / p.tile_moving),
                                                                    dcols, cdt, p),
                        flops=w.flops * f / 2, psum_write=tiles * p.tile_rows * dcols * 4,
                        instructions=tiles * s_tiles))
        nrm = max(1, math.ceil(tiles * d / p.vector_psum_free_max))
        st.append(Stage("Vector", "TensorScalarPtr", E.vector_ns(nrm, tiles * d / nrm, 1, "float32", p),
                        psum_release=True, psum_read=tiles * p.tile_rows * dcols * 4, sbuf_write=w.out_bytes * f,
                        instructions=nrm,
                        sbuf_release=not fusion.store))
        if fusion.store:
            st.append(_store(w.out_bytes * f, q_desc, f"{base}.out", p))
        groups.append(Group(st, tiles, sbuf_bytes=p.tile_rows * (d + s) * elem, psum_bytes=psum))
    note = (f"{bh} heads x {lq} queries x {s} keys, head dim {d}: flash tiles of 128 queries; Q/K/V/O "
            f"token-major ({heads_q} heads per 128-token load)")
    return KernelPlan(groups, resident_sbuf_bytes=kv_bytes / bh if kv_resident else 0.0, note=note)


# ------------------------------------------------------------------------------------------ streamed
_SOFTMAX = ("TensorReduce", "ACTIVATE", "TensorScalarPtr")


def _streamed(w: OpWork, base: str, p: CoreParams, fusion: Fusion = EAGER) -> KernelPlan:
    """Ops that stream [128 x F] tiles through SBUF: elementwise, activations, softmax, norms, reductions,
    copies and fills."""
    elem = _elem(w)
    total = max(int(w.elems or w.out_elems), 1)
    full = [t for i, t in enumerate(w.inputs) if t.numel >= total and i not in fusion.in_sbuf]
    small = [t for i, t in enumerate(w.inputs) if t.numel < total and i not in fusion.in_sbuf]
    cast_copy = w.cls == "copy" and len({t.dtype for t in w.inputs}) > 1
    if w.cls == "copy" and not cast_copy and fusion == EAGER and base not in ("cat", "stack", "_cat", "where",
                                                                               "masked_fill"):
        return _dma_copy(w, base, p)
    n_in = 0 if w.cls == "fill" else max(len([t for t in w.inputs if t.numel >= total]), 1)
    rows = total
    if w.cls in ("softmax", "norm", "reduce") and w.inputs and w.inputs[0].shape:
        last = max(int(w.inputs[0].shape[-1]), 1)
        rows = max(total // last, 1)
        free_row = last
    else:
        free_row = 0
    if free_row:  # whole rows per partition (several when short, so descriptors stay long)
        per_part = max(1, min(ELEMENTWISE_FREE_MAX // free_row, math.ceil(rows / p.partitions)))
        free = free_row * per_part
        n_tiles = math.ceil(rows / (p.partitions * per_part))
    else:
        per_part = math.ceil(total / p.partitions)
        cap = p.sbuf_bytes * p.sbuf_usable_fraction / (2 * p.partitions * elem * (n_in + 1))
        free = int(max(1, min(per_part, ELEMENTWISE_FREE_MAX, p.vector_free_max, cap)))
        n_tiles = math.ceil(per_part / free)
    sizes = tile_groups(n_tiles, p.max_tile_groups)
    share = split(1.0, sizes)
    in_bytes = float(sum(t.nbytes for t in full)) if w.cls != "fill" else 0.0
    small_bytes = float(sum(t.nbytes for t in small))
    desc = descriptor_for(free, elem)
    groups = []
    for gi, (tiles, f) in enumerate(zip(sizes, share)):
        st: list[Stage] = []
        parts = []
        if in_bytes > 0:
            parts.append(("qScalarDynamicHW" if w.cls == "scalar" else "qSyncIO0", in_bytes * f, desc, f"{base}.in"))
        if small_bytes > 0 and gi == 0:
            parts.append(("qSyncIO1", small_bytes, descriptor_for(max(t.numel for t in small) / p.partitions, elem),
                          f"{base}.param"))
        if parts:
            st.append(_loads(parts, p))
        deps = (0,) if st else None
        st.extend(_compute(w, base, tiles, free, n_in, elem, f, cast_copy, p, deps))
        if fusion.store:
            st.append(_store(w.out_bytes * f, descriptor_for(_out_free(w.out_elems, total, free, free_row, rows),
                                                             elem), f"{base}.out", p))
        else:
            st[-1].sbuf_release = True
        if not any(s.sbuf_acquire for s in st):
            st[0].sbuf_acquire = True
        groups.append(Group(st, tiles, sbuf_bytes=p.partitions * free * elem * (n_in + 1)))
    note = f"{n_tiles} tiles of 128x{free} {w.dtype}"
    return KernelPlan(groups, note=note)


def _out_free(out_elems: int, total: int, free: int, free_row: int, rows: int) -> float:
    """Elements per partition of a streamed op's output tile (its store descriptor): the input tile's when
    the output is as large; a row op's (softmax, norm, reduce) output elements per row; else the input
    tile's scaled by output / input elements (a 2x2 pooling writes a quarter of each tile, not one element
    per descriptor)."""
    if out_elems >= total:
        return free
    if free_row:
        return max(out_elems / max(rows, 1), 1)
    return max(free * out_elems / total, 1)


def _compute(w: OpWork, base: str, tiles: int, free: int, n_in: int, elem: int, f: float, cast_copy: bool,
             p: CoreParams, deps: tuple[int, ...] | None) -> list[Stage]:
    """The engine stages of one group of a streamed op."""
    dt = w.dtype
    fl = float(w.flops) * f
    out_b = w.out_bytes * f
    rd = out_b * max(n_in, 1)

    def vec(opcode: str, inputs: int, **kw) -> Stage:
        mode = E.vector_mode(dt, inputs, p)
        return Stage("Vector", opcode, E.vector_ns(tiles, free, inputs, dt, p), sbuf_read=rd, sbuf_write=out_b,
                     mode=f"{int(mode)}x" if mode > 1 else "", instructions=tiles, **kw)

    def act(**kw) -> Stage:
        return Stage("Scalar", "ACTIVATE", E.scalar_ns(tiles, free, p), sbuf_read=rd, sbuf_write=out_b,
                     instructions=tiles, **kw)

    c = w.cls
    if c == "softmax":
        return [Stage("Vector", "TensorReduce", E.vector_ns(tiles, free, 1, "float32", p), sbuf_read=rd,
                      instructions=tiles, deps=deps), act(flops=fl), vec("TensorScalarPtr", 1)]
    if c == "norm":
        return [Stage("Vector", "BNStats", E.vector_ns(tiles, free, 1, "float32", p), sbuf_read=rd, flops=fl / 2,
                      instructions=tiles, deps=deps),
                Stage("Vector", "BNAggr", E.vector_ns(tiles, 6, 1, "float32", p), instructions=tiles),
                act(flops=fl / 2)]
    if c == "scalar":
        return [act(flops=fl, deps=deps)]
    if c == "reduce":
        return [Stage("Vector", "TensorReduce", E.vector_ns(tiles, free, 1, dt, p), sbuf_read=rd, flops=fl,
                      sbuf_write=out_b, instructions=tiles, deps=deps)]
    if c == "fill":
        return [Stage("Vector" if base in ("fill", "zero", "zeros_like", "ones_like", "full_like") else "GpSimd",
                      "Memset" if base in ("fill", "zero", "zeros_like", "ones_like", "full_like") else "Iota",
                      E.vector_ns(tiles, free, 1, dt, p), sbuf_write=out_b, instructions=tiles, deps=deps)]
    if c == "copy":
        return [vec("TensorCopy", 1, deps=deps)]
    return [vec("TensorTensor" if n_in >= 2 else "TensorScalarPtr", min(max(n_in, 1), 2), flops=fl, deps=deps)]


def _dma_copy(w: OpWork, base: str, p: CoreParams) -> KernelPlan:
    """Same-dtype copies run as HBM -> HBM DMA (no engine work)."""
    elem = _elem(w)
    per_part = math.ceil(max(w.out_elems, 1) / p.partitions)
    desc = descriptor_for(min(per_part, 16 * ELEMENTWISE_FREE_MAX), elem)
    n = w.out_bytes
    st = Stage(DMA, "copy", transfer_ns(n, desc, p), nbytes=n, queue="qSyncIO2", descriptor=desc,
               variable=f"{base}.out", source="HBM", dest="HBM", hbm_read=n, hbm_write=n)
    return KernelPlan([Group([st], 1)], note=f"HBM to HBM copy of {n} bytes")
