"""The one place for each metric formula.

Every function is vectorised (scalars or numpy arrays / pandas Series in, same shape out) and states its
formula. Units: time in ns, sizes in bytes, rates in FLOP/s or bytes/s, percentages 0-100.
Undefined results (unknown peak, zero time) are NaN, never an exception.

Neuron definitions follow Neuron Explorer's Summary table (profile schema 7.4.0); see
``/work/shared/reference/neuron-explorer-data-model.md`` §7.2.
"""
from __future__ import annotations

import numpy as np

from neuron_profiler.collectives import bus_factor, normalize_collective

NS_PER_S = 1e9

def _efficient_dma_bytes() -> int:
    from neuron_profiler.hardware import model_param
    return int(model_param("dma_efficient_size_bytes"))


#: Neuron Explorer's "efficient DMA size": ``average_dma_size`` should be >= 32768 bytes (glossary); the value
#: lives in the hardware table (``model.dma_efficient_size_bytes``) with its source.
EFFICIENT_DMA_BYTES = _efficient_dma_bytes()


def _div(num, den):
    """num / den with NaN where den is 0, NaN or unknown."""
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where((den > 0) & np.isfinite(den), num / np.where(den > 0, den, 1.0), np.nan)
    return out.item() if out.ndim == 0 else out


def rate_per_s(amount, duration_ns):
    """amount / (duration_ns / 1e9): FLOP/s for FLOPs, bytes/s for bytes."""
    return _div(np.asarray(amount, dtype=float) * NS_PER_S, duration_ns)


def utilization_pct(amount, duration_ns, peak_per_s):
    """100 · amount / (peak_per_s · duration_ns / 1e9). The shared shape of MFU, HFU and MBU."""
    return _div(100.0 * np.asarray(amount, dtype=float) * NS_PER_S,
                np.asarray(peak_per_s, dtype=float) * np.asarray(duration_ns, dtype=float))


def mfu_pct(model_flops, total_time_ns, peak_flops_per_s):
    """``mfu_estimated_percent`` = 2·MAC_count / (tensor_engine_max_ops_per_sec · total_time) · 100.

    ``model_flops`` = 2·MACs of the model's matrix work: on Neuron the ``raw_flops`` of Tensor-engine
    instructions that are not ``TRANSPOSE``; on GPUs the FLOPs derived from the launching op's input
    shapes (or Kineto's ``flops``). ``peak_flops_per_s`` = the matrix-engine peak summed over the active
    cores (Explorer: ``rows · cols · 2 · tensor_engine_clock_freq`` per NeuronCore).
    """
    return utilization_pct(model_flops, total_time_ns, peak_flops_per_s)


def hfu_pct(hardware_flops, total_time_ns, peak_flops_per_s):
    """``hfu_estimated_percent`` = hardware_flops / (max_ops_per_sec · total_time) · 100.

    ``hardware_flops`` counts everything the matrix engine executed, including transposes
    (Explorer: Σ over matmuls of 2 · active_rows · active_cols · elements).
    """
    return utilization_pct(hardware_flops, total_time_ns, peak_flops_per_s)


def mbu_pct(hbm_bytes, total_time_ns, hbm_bandwidth_per_s):
    """``mbu_estimated_percent`` = (hbm_read_bytes + hbm_write_bytes) / total_time / hbm_max_bandwidth · 100.

    On Neuron ``hbm_max_bandwidth`` is ONE HBM stack per NeuronCore (header field
    ``hbm_bandwidth_per_core_bytes_per_s``), summed over the active cores; on GPUs the device's HBM bandwidth.
    """
    return utilization_pct(hbm_bytes, total_time_ns, hbm_bandwidth_per_s)


def arithmetic_intensity(flops, hbm_bytes):
    """FLOPs per HBM byte (Explorer ``mm_arithmetic_intensity`` = (hardware_flops − transpose_flops) /
    (hbm_write_bytes + hbm_read_bytes)). NaN when no bytes were moved."""
    return _div(flops, hbm_bytes)


def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    """Ridge point (FLOP/byte) = peak_flops_per_s / bandwidth; Explorer's ``peak_flops_bandwidth_ratio``.
    An op with a lower arithmetic intensity is memory bound."""
    return _div(peak_flops_per_s, bandwidth_bytes_per_s)


def roof_flops_per_s(intensity, peak_flops_per_s, bandwidth_bytes_per_s):
    """Attainable FLOP/s at a given intensity: min(intensity · bandwidth, peak) (XProf roofline)."""
    ai = np.asarray(intensity, dtype=float)
    out = np.minimum(ai * np.asarray(bandwidth_bytes_per_s, dtype=float),
                     np.asarray(peak_flops_per_s, dtype=float))
    return out.item() if np.ndim(out) == 0 else out


def time_at_roof_ns(flops, hbm_bytes, peak_flops_per_s, bandwidth_bytes_per_s):
    """The shortest time the work could take: max(flops / peak, bytes / bandwidth), in ns."""
    t_c = _div(np.asarray(flops, dtype=float) * NS_PER_S, peak_flops_per_s)
    t_m = _div(np.asarray(hbm_bytes, dtype=float) * NS_PER_S, bandwidth_bytes_per_s)
    t_c = np.where(np.asarray(flops, dtype=float) > 0, t_c, 0.0)
    t_m = np.where(np.asarray(hbm_bytes, dtype=float) > 0, t_m, 0.0)
    out = np.fmax(t_c, t_m)
    return out.item() if np.ndim(out) == 0 else out


#: NCCL-style bus-bandwidth factors (nccl-tests PERFORMANCE.md): busbw = algbw · factor(n).
def normalize_collective_name(name: str) -> str:
    """Canonical collective name (the project's one convention, ``neuron_profiler.collectives``)."""
    return normalize_collective(name)


def algbw_bytes_per_s(size_bytes, duration_ns):
    """Algorithm bandwidth = message size / time (nccl-tests ``algbw``); size = the larger of input and
    output bytes of the rank."""
    return rate_per_s(size_bytes, duration_ns)


def busbw_factor(operation, group_size):
    """Bus-bandwidth factor per collective (nccl-tests): all_reduce 2(n−1)/n; all_gather, reduce_scatter,
    all_to_all (n−1)/n; broadcast, reduce, send, recv, send_recv, gather, scatter 1; barrier 0; unknown NaN.
    Names in any spelling are normalised first. Vectorised over arrays of names and sizes."""
    ops = np.atleast_1d(np.asarray(operation, dtype=object))
    canon = np.array([normalize_collective(o) for o in ops], dtype=object) if ops.size else ops
    out = bus_factor(canon, group_size)
    return float(np.asarray(out).reshape(-1)[0]) if np.ndim(operation) == 0 and np.ndim(group_size) == 0 else out


def busbw_bytes_per_s(algbw, operation, group_size):
    """Bus bandwidth = algbw · busbw_factor(operation, group_size)."""
    return np.asarray(algbw, dtype=float) * busbw_factor(operation, group_size)


def canonical_dtype(dtype) -> str:
    """Canonical dtype name ('bfloat16', 'float32', 'float16', 'fp8', ...) via the hardware package's
    ``normalize_dtype``; '' when unknown."""
    from neuron_profiler.hardware import normalize_dtype

    return normalize_dtype(dtype)


def adjusted_flops_multiplier(dtype: str, device_kind: str) -> float:
    """BF16-equivalent multiplier of ``raw_flops`` (Explorer ``adjusted_flops``) for a dtype on a Neuron
    device kind, from the hardware table; 1.0 for GPUs and unknown pairs."""
    from neuron_profiler.hardware import TARGETS
    from neuron_profiler.hardware import adjusted_flops_multiplier as _mult

    kind = str(device_kind).lower()
    return _mult(kind, dtype) if kind in TARGETS else 1.0


def lookup_peak(peaks: dict, dtype: str | None = None) -> float:
    """The matrix peak (FLOP/s) for ``dtype`` from a ``peak_flops_per_s`` map whose keys may be spelled
    'bf16', 'bfloat16', 'BF16', ...; ``dtype=None`` means BF16 (Explorer's MFU denominator), falling back
    to FP16/TF32 and then the largest listed peak. NaN when the map is empty or the dtype is missing."""
    if not peaks:
        return float("nan")
    canon = {(canonical_dtype(k) or str(k).lower()): float(v) for k, v in peaks.items() if v and float(v) > 0}
    if not canon:
        return float("nan")
    if dtype is None:
        for k in ("bfloat16", "float16", "tf32"):
            if k in canon:
                return canon[k]
        return max(canon.values())
    d = canonical_dtype(dtype)
    if d in canon:
        return canon[d]
    if d in ("float16", "bfloat16"):
        for k in ("bfloat16", "float16"):
            if k in canon:
                return canon[k]
    return float("nan")


def dtype_bytes(dtype) -> float:
    """Bytes per element of a dtype name (any spelling ``normalize_dtype`` accepts); NaN when unknown."""
    from neuron_profiler.hardware import dtype_size_bytes

    b = dtype_size_bytes(str(dtype)) if dtype else 0
    return float(b) if b else float("nan")
