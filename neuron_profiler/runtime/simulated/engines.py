"""NeuronCore engine model: an op's work as engine instructions, and in-order scheduling on timelines.

Time model (first order, every constant from the hardware table):
- Tensor engine: MultiplyMoving (``MATMUL`` on ``TensorMatrix``) takes FLOPs / peak(dtype) plus
  ``matmul_min_cycles`` per instruction; LoadStationary (on ``Tensor``) is ``load_stationary_speedup`` x
  faster and is hidden behind the previous MultiplyMoving except for the first one.
- Vector / Scalar / GpSimd: elements read / (lanes x clock) + ``vector_fixed_overhead_cycles`` per
  instruction (VectorE "~N cycles per input" rule).
- dI/dt throttling (Trn2/Trn3): after the Tensor engine idled ``tensor_throttle_idle_ns``, it restarts at
  ``tensor_throttle_start_fraction`` of peak and ramps linearly to peak over ``tensor_throttle_ramp_ns``
  (``throttle_extra_ns``); the schedule adds that time to the op's first MATMUL.
Work is tiled as 128 x 128 x 512 GEMM tiles (elementwise: 64K free elements per partition) and
coalesced into at most ``MAX_INSTR_PER_STEP`` instructions per step so traces stay small; FLOPs are exact.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from neuron_profiler.hardware import model_param, neuron_flag, neuron_spec
from neuron_profiler.opmodel import OpWork

__all__ = ["EngineModel", "InstrTemplate", "ENGINES", "inorder_scan", "MAX_INSTR_PER_STEP"]

#: engine tracks of one NeuronCore, in display order
ENGINES = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")
MAX_INSTR_PER_STEP = 8
_FREE_MAX = 65536  # elements per partition in one Vector/Scalar instruction


@dataclass
class InstrTemplate:
    """Instructions of one op signature, times relative to the op's compute slot start (ns)."""

    engine: list[str]
    opcode: list[str]
    rel_start: list[int]
    duration: list[int]
    flops: list[int]
    sbuf_read: list[int]
    sbuf_write: list[int]
    psum_read: list[int]
    psum_write: list[int]
    slot_ns: int  # length of the compute slot
    tensor_ns: int = 0  # MultiplyMoving time at full rate
    # 1 = the first MATMUL (absorbs throttling time), 2 = starts after it (shifted by it), 0 = other
    throttle_role: list[int] | None = None

    @classmethod
    def empty(cls) -> "InstrTemplate":
        return cls([], [], [], [], [], [], [], [], [], 0, 0, [])


def _split(total: int, n: int) -> list[int]:
    q, r = divmod(int(total), n)
    return [q + (1 if i < r else 0) for i in range(n)]


class EngineModel:
    """Engine timings of one Neuron target (per NeuronCore)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.spec = neuron_spec(target)
        clocks = {e.name: e.clock_hz for e in self.spec.engines}
        lanes = {e.name: e.lanes for e in self.spec.engines}
        self.clock = clocks
        self.lanes = lanes
        self.peak = dict(self.spec.peak_flops_per_s)
        self.mm_min_cycles = model_param("matmul_min_cycles")
        self.ls_speedup = model_param("load_stationary_speedup")
        self.fp32_slowdown = model_param("fp32_matmul_slowdown")
        self.vec_overhead = model_param("vector_fixed_overhead_cycles")
        self.sync_ns = max(1, round(model_param("sync_instruction_cycles") / clocks["Sync"] * 1e9))
        self.tile_rows = int(model_param("tensor_tile_rows"))
        self.tile_moving = int(model_param("tensor_tile_moving_cols"))
        self.throttling = neuron_flag(target, "tensor_didt_throttling")
        self.throttle_f0 = model_param("tensor_throttle_start_fraction")
        self.throttle_ramp_ns = model_param("tensor_throttle_ramp_ns")
        self.throttle_idle_ns = model_param("tensor_throttle_idle_ns")

    def throttle_extra_ns(self, work_ns: np.ndarray) -> np.ndarray:
        """Extra time of ``work_ns`` (full-rate ns) of Tensor work started under dI/dt throttling: the rate
        ramps linearly from f0 to 1 over R ns, so R (1 + f0) / 2 ns of work fit in the ramp."""
        w = np.asarray(work_ns, dtype=np.float64)
        if not self.throttling:
            return np.zeros(len(w), dtype=np.int64)
        f0, r = self.throttle_f0, self.throttle_ramp_ns
        in_ramp = r * (1 + f0) / 2
        # inside the ramp: f0 t + (1 - f0) t^2 / (2R) = w  ->  t
        t = (-f0 + np.sqrt(f0 * f0 + 2 * (1 - f0) * np.minimum(w, in_ramp) / r)) * r / (1 - f0)
        extra = np.where(w >= in_ramp, r - in_ramp, t - w)
        return np.ceil(np.maximum(extra, 0)).astype(np.int64)

    def peak_flops(self, dtype: str) -> float:
        """Tensor engine peak FLOP/s of one core for a dtype (fp32/fp64 = bf16 / fp32_matmul_slowdown)."""
        if dtype in self.peak:
            return self.peak[dtype]
        bf16 = self.peak["bfloat16"]
        if dtype in ("float32", "float64", "complex64", "complex128"):
            return bf16 / self.fp32_slowdown
        return bf16

    # ---------------------------------------------------------------- steps
    def _matmul(self, out: InstrTemplate, t0: int, flops: int, gemm: tuple[int, int, int, int],
                dtype: str, in_bytes: tuple[int, int], out_elems: int) -> int:
        batch, m, k, n = gemm
        tiles = batch * math.ceil(m / self.tile_rows) * math.ceil(k / self.tile_rows) * math.ceil(n / self.tile_moving)
        if tiles <= 0:
            tiles = max(1, math.ceil(flops / (2 * self.tile_rows * self.tile_rows * self.tile_moving)))
        ni = int(min(MAX_INSTR_PER_STEP, tiles))
        clock = self.clock["Tensor"]
        total_ns = flops / self.peak_flops(dtype) * 1e9
        mm = max(1, math.ceil(total_ns / ni + self.mm_min_cycles / clock * 1e9))
        ls = max(1, math.ceil(mm / self.ls_speedup))
        fl = _split(flops, ni)
        mov, sta = _split(in_bytes[0], ni), _split(in_bytes[1], ni)
        pw = _split(out_elems * 4, ni)  # fp32 accumulation in PSUM
        for j in range(ni):
            # LoadStationary j runs in the background of MultiplyMoving j-1
            self._add(out, "Tensor", "LoadStationary", t0 + j * mm, ls, 0, sta[j], 0, 0, 0)
            self._add(out, "TensorMatrix", "MATMUL", t0 + ls + j * mm, mm, fl[j], mov[j], 0, 0, pw[j])
        return t0 + ls + ni * mm

    def _elementwise(self, out: InstrTemplate, t0: int, engine: str, opcode: str, elems_read: int,
                     elems_out: int, elem_size: int, flops: int = 0) -> int:
        lanes = self.lanes[engine] or 128
        free = math.ceil(max(elems_out, 1) / lanes)
        ni = int(min(MAX_INSTR_PER_STEP, max(1, math.ceil(free / _FREE_MAX))))
        cycles = max(elems_read, 1) / lanes / ni + self.vec_overhead
        dur = max(1, math.ceil(cycles / self.clock[engine] * 1e9))
        rd, wr, fl = _split(elems_read * elem_size, ni), _split(elems_out * elem_size, ni), _split(flops, ni)
        for j in range(ni):
            self._add(out, engine, opcode, t0 + j * dur, dur, fl[j], rd[j], wr[j], 0, 0)
        return t0 + ni * dur

    @staticmethod
    def _add(out: InstrTemplate, engine: str, opcode: str, start: int, dur: int, flops: int,
             sbuf_r: int, sbuf_w: int, psum_r: int, psum_w: int) -> None:
        out.engine.append(engine)
        out.opcode.append(opcode)
        out.rel_start.append(int(start))
        out.duration.append(int(dur))
        out.flops.append(int(flops))
        out.sbuf_read.append(int(sbuf_r))
        out.sbuf_write.append(int(sbuf_w))
        out.psum_read.append(int(psum_r))
        out.psum_write.append(int(psum_w))

    def template(self, w: OpWork, base_name: str) -> InstrTemplate:
        """Instructions of one op signature (no Sync/DMA; see ``dma``)."""
        out = InstrTemplate.empty()
        if w.cls == "none":
            return out
        size = max(1, w.out_bytes // max(w.out_elems, 1)) if w.out_elems else 4
        t = 0
        ins = w.inputs
        if w.cls in ("matmul", "conv"):
            mov = ins[0].nbytes if ins else 0
            sta = sum(x.nbytes for x in ins[1:])
            t = self._matmul(out, t, w.flops, w.gemm, w.dtype, (mov, sta), w.out_elems)
        elif w.cls == "attention":
            bh, lq, d, s = w.gemm
            e = max(w.elems, 1)
            f1 = w.flops // 2
            q_b = ins[0].nbytes if ins else 0
            k_b = ins[1].nbytes if len(ins) > 1 else 0
            t = self._matmul(out, t, f1, (bh, lq, d, s), w.dtype, (q_b, k_b), e)
            t = self._elementwise(out, t, "Vector", "TensorReduce", e, e, size)
            t = self._elementwise(out, t, "Scalar", "ACTIVATE", e, e, size, e)
            t = self._elementwise(out, t, "Vector", "TensorScalarPtr", e, e, size)
            v_b = ins[2].nbytes if len(ins) > 2 else k_b
            t = self._matmul(out, t, w.flops - f1, (bh, lq, s, d), w.dtype, (e * size, v_b), w.out_elems)
        else:
            e_read = sum(x.numel for x in ins)
            e = w.elems
            if w.cls == "softmax" and not w.backward:
                t = self._elementwise(out, t, "Vector", "TensorReduce", e, e, size)
                t = self._elementwise(out, t, "Scalar", "ACTIVATE", e, e, size, e)
                t = self._elementwise(out, t, "Vector", "TensorScalarPtr", e, w.out_elems, size, e)
            elif w.cls == "norm":
                t = self._elementwise(out, t, "Vector", "BNStats", e, e, size, 2 * e)
                t = self._elementwise(out, t, "Vector", "TensorScalarPtr", e_read, w.out_elems, size, 2 * e)
            elif w.cls == "scalar":
                t = self._elementwise(out, t, "Scalar", "ACTIVATE", e_read, w.out_elems, size, w.out_elems)
            elif w.cls == "gpsimd":
                t = self._elementwise(out, t, "GpSimd", _gpsimd_opcode(base_name), e_read, w.out_elems, size)
            elif w.cls == "reduce":
                t = self._elementwise(out, t, "Vector", "TensorReduce", e_read, w.out_elems, size, e_read)
            elif w.cls == "copy":
                t = self._elementwise(out, t, "Vector", "TensorCopy", e_read, w.out_elems, size)
            elif w.cls == "fill":
                t = self._elementwise(out, t, "Vector", "Memset", w.out_elems, w.out_elems, size)
            else:
                opcode = "TensorTensor" if len(ins) > 1 else "TensorScalarPtr"
                t = self._elementwise(out, t, "Vector", opcode, e_read, w.out_elems, size, w.out_elems)
        out.slot_ns = int(t)
        mm = [i for i, e in enumerate(out.engine) if e == "TensorMatrix"]
        out.tensor_ns = int(sum(out.duration[i] for i in mm))
        out.throttle_role = [0] * len(out.engine)
        if mm:
            first = mm[0]
            out.throttle_role = [1 if i == first else (2 if s > out.rel_start[first] else 0)
                                 for i, s in enumerate(out.rel_start)]
        return out


def _gpsimd_opcode(base: str) -> str:
    if "scatter" in base or "index_put" in base or "index_add" in base or "index_copy" in base:
        return "Scatter"
    if "sort" in base or "topk" in base or "kthvalue" in base or "median" in base:
        return "Sort"
    if "nonzero" in base or "masked_select" in base or "unique" in base:
        return "Compact"
    if "cumsum" in base or "cumprod" in base:
        return "Scan"
    return "Gather"


def inorder_scan(ready: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """End times of jobs run in order on one resource: ``end[i] = max(ready[i], end[i-1]) + dur[i]``.

    Vectorised max-plus scan: with S = cumsum(dur), end[i] - S[i] = max_{j<=i}(ready[j] - S[j-1])."""
    ready = np.asarray(ready, dtype=np.int64)
    dur = np.asarray(dur, dtype=np.int64)
    if not len(ready):
        return ready.copy()
    s = np.cumsum(dur)
    s_prev = s - dur
    return np.maximum.accumulate(ready - s_prev) + s
