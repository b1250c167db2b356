"""Engine cost model of one NeuronCore: how long one (coalesced) instruction takes on each engine.

- Tensor engine, MultiplyMoving (``MATMUL`` on the ``TensorMatrix`` row): one instruction multiplies a
  stationary [128 x 128] tile by a moving [128 x n] tile (n <= 512) in ``max(n, matmul_min_cycles)``
  cycles at BF16 rate (S22: initiation interval ~max(N, 64)); other dtypes scale by peak(BF16) /
  peak(dtype) (FP32 4x slower, FP8 2x faster on trn2/trn3). Partial tiles cost as full ones.
- LoadStationary (``Tensor`` row): ``load_stationary_speedup`` x faster than a full MultiplyMoving of
  128 columns; it runs in the background of the previous MultiplyMoving.
- Vector: ``free x inputs / mode + vector_fixed_overhead_cycles`` cycles per instruction (S22: ~N cycles
  per input, ~100 cycles static overhead); on trn2/trn3 BF16/FP16 data uses the performance modes
  (2x two-input, 4x one-input; MODEL mapping of S22's 2x/4x modes).
- Scalar (ACTIVATE, LUT functions with fused scale/bias): ``free + overhead`` cycles.
- GpSimd: ``free x gpsimd_cycles_per_element_per_lane + overhead`` cycles.
- Sync: ``sync_instruction_cycles`` per DMA trigger.
- dI/dt throttling (trn2/trn3): after the Tensor engine idled ``tensor_throttle_idle_ns`` it restarts at
  ``tensor_throttle_start_fraction`` of its rate and ramps linearly to full rate over
  ``tensor_throttle_ramp_ns`` (S4, S7); ``throttle_extra_ns`` is the time that adds.
"""
from __future__ import annotations

import math

from neuron_profiler.runtime.simulated.params import CoreParams

__all__ = ["matmul_ns", "load_stationary_ns", "vector_ns", "scalar_ns", "gpsimd_ns", "sync_ns",
           "throttle_extra_ns", "vector_mode", "LOW_PRECISION"]

#: dtypes the Vector engine's performance modes apply to
LOW_PRECISION = ("bfloat16", "float16")


def matmul_ns(instructions: float, moving_cols: float, dtype: str, p: CoreParams) -> float:
    """Time of ``instructions`` MultiplyMoving instructions of ``moving_cols`` moving columns each."""
    cycles = max(float(moving_cols), p.matmul_min_cycles) * p.peak("bfloat16") / p.peak(dtype)
    return instructions * p.cycles_ns("Tensor", cycles)


def load_stationary_ns(instructions: float, p: CoreParams) -> float:
    """Time of ``instructions`` LoadStationary instructions of a [128 x 128] stationary tile."""
    cycles = max(p.tile_rows, p.matmul_min_cycles) / p.load_stationary_speedup
    return instructions * p.cycles_ns("Tensor", cycles)


def vector_mode(dtype: str, inputs: int, p: CoreParams) -> float:
    """Vector performance-mode speedup for ``inputs`` operands of ``dtype`` (1.0 when none applies)."""
    if dtype not in LOW_PRECISION:
        return 1.0
    return p.vector_mode["tensor_tensor" if inputs >= 2 else "tensor_scalar"]


def vector_ns(instructions: float, free: float, inputs: int, dtype: str, p: CoreParams) -> float:
    """Time of ``instructions`` Vector instructions over ``free`` elements per partition each."""
    cycles = free * max(inputs, 1) / vector_mode(dtype, inputs, p) + p.vector_overhead_cycles
    return instructions * p.cycles_ns("Vector", cycles)


def scalar_ns(instructions: float, free: float, p: CoreParams) -> float:
    """Time of ``instructions`` Scalar (ACTIVATE) instructions over ``free`` elements per partition each."""
    return instructions * p.cycles_ns("Scalar", free + p.vector_overhead_cycles)


def gpsimd_ns(instructions: float, free: float, p: CoreParams) -> float:
    """Time of ``instructions`` GpSimd instructions over ``free`` elements per lane each."""
    return instructions * p.cycles_ns("GpSimd", free * p.gpsimd_cycles_per_elem + p.vector_overhead_cycles)


def sync_ns(p: CoreParams) -> float:
    """Time of one Sync-engine instruction (a DMA trigger or a semaphore update)."""
    return p.cycles_ns("Sync", p.sync_instruction_cycles)


def throttle_extra_ns(work_ns: float, p: CoreParams) -> float:
    """Extra time of ``work_ns`` (full-rate ns) of Tensor work started under dI/dt throttling: the rate ramps
    linearly from f0 to 1 over R ns, so R (1 + f0) / 2 ns of work fit in the ramp."""
    if not p.throttling or work_ns <= 0:
        return 0.0
    f0, r = p.throttle_f0, p.throttle_ramp_ns
    in_ramp = r * (1 + f0) / 2
    if work_ns >= in_ramp:
        return r - in_ramp
    # inside the ramp: f0 t + (1 - f0) t^2 / (2R) = w  ->  t
    t = (-f0 + math.sqrt(f0 * f0 + 2 * (1 - f0) * work_ns / r)) * r / (1 - f0)
    return max(t - work_ns, 0.0)
