"""Every constant the NeuronCore model uses, read once from the hardware table for one target.

``CoreParams.for_target("trn2", active_cores=8)`` gathers the per-core figures (clocks, lanes, peaks, SBUF,
PSUM, DMA engines and bandwidth, HBM share), the model assumptions (``model`` section) and the host dispatch
model (``host_model`` section, with the user's overrides). ``assumptions()`` lists them with their sources
for the trace header, so a simulated number can always say what produced it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from neuron_profiler.hardware import (
    Target,
    host_model_params,
    model_param,
    neuron_flag,
    neuron_spec,
    raw_table,
    validate_host_model,
)

__all__ = ["CoreParams", "ENGINES"]

#: engine tracks of one NeuronCore, in display order (Neuron Explorer names)
ENGINES = ("Tensor", "TensorMatrix", "Vector", "Scalar", "GpSimd", "Sync")


@dataclass(frozen=True)
class CoreParams:
    """Constants of one simulated NeuronCore (times in ns, sizes in bytes, rates per second)."""

    target: Target
    clock_hz: dict[str, float]
    lanes: dict[str, int]
    peak_flops: dict[str, float]          # Tensor engine, per dtype
    sbuf_bytes: float
    psum_bytes: float
    psum_banks: int
    partitions: int
    dma_engines: int
    dma_bytes_per_s: float                # all DMA engines of the core, at full efficiency
    hbm_share_bytes_per_s: float          # the core's share of its chip's HBM bandwidth
    hbm_chip_bytes_per_s: float
    active_cores_on_chip: int
    cc_cores: int
    tile_rows: int
    tile_moving: int
    matmul_min_cycles: float
    load_stationary_speedup: float
    fp32_matmul_slowdown: float
    vector_overhead_cycles: float
    vector_free_max: int
    vector_psum_free_max: int
    vector_mode: dict[str, float]         # BF16/FP16 performance-mode speedups (tensor_tensor, tensor_scalar)
    gpsimd_cycles_per_elem: float
    sync_instruction_cycles: float
    dma_latency_ns: float
    dma_knee_bytes: float
    dma_exponent: float
    sbuf_usable_fraction: float
    semaphore_wait_min_ns: float
    max_tile_groups: int
    throttling: bool
    throttle_f0: float
    throttle_ramp_ns: float
    throttle_idle_ns: float
    host: dict[str, float] = field(default_factory=dict)
    host_overrides: dict[str, float] = field(default_factory=dict)
    auto_cast: str = "none"               # the compiler's --auto-cast: "matmult" = FP32 matmuls at the BF16 rate

    @classmethod
    def for_target(cls, target: Target, *, active_cores: int = 1, host_overrides: dict | None = None,
                   auto_cast: str = "none") -> CoreParams:
        """Constants of one core of ``target`` when ``active_cores`` cores of its chip run at once."""
        spec = neuron_spec(target)
        t = raw_table()["neuron"][target]
        cores = max(1, min(int(active_cores), int(spec.num_cores)))
        over = validate_host_model(host_overrides)
        host = {k: v[0] for k, v in host_model_params().items()}
        host.update(over)
        mode = t.get("vector_performance_mode", {})
        return cls(
            target=target,
            clock_hz={e.name: e.clock_hz for e in spec.engines},
            lanes={e.name: int(e.lanes) or 128 for e in spec.engines},
            peak_flops=dict(spec.peak_flops_per_s),
            sbuf_bytes=spec.sbuf_bytes_per_core, psum_bytes=spec.psum_bytes_per_core,
            psum_banks=int(model_param("psum_banks")), partitions=int(model_param("sbuf_partitions")),
            dma_engines=int(spec.dma_engines_per_core), dma_bytes_per_s=spec.dma_bandwidth_per_core_bytes_per_s,
            hbm_share_bytes_per_s=spec.hbm_bandwidth_bytes_per_s / cores,
            hbm_chip_bytes_per_s=spec.hbm_bandwidth_bytes_per_s, active_cores_on_chip=cores,
            cc_cores=int(spec.cc_cores),
            tile_rows=int(model_param("tensor_tile_rows")), tile_moving=int(model_param("tensor_tile_moving_cols")),
            matmul_min_cycles=model_param("matmul_min_cycles"),
            load_stationary_speedup=model_param("load_stationary_speedup"),
            fp32_matmul_slowdown=model_param("fp32_matmul_slowdown"),
            vector_overhead_cycles=model_param("vector_fixed_overhead_cycles"),
            vector_free_max=int(model_param("vector_free_max")),
            vector_psum_free_max=int(model_param("vector_psum_free_max")),
            vector_mode={"tensor_tensor": float(mode.get("tensor_tensor", 1)),
                         "tensor_scalar": float(mode.get("tensor_scalar", 1))},
            gpsimd_cycles_per_elem=model_param("gpsimd_cycles_per_element_per_lane"),
            sync_instruction_cycles=model_param("sync_instruction_cycles"),
            dma_latency_ns=model_param("dma_fixed_latency_ns"),
            dma_knee_bytes=model_param("dma_descriptor_knee_bytes"),
            dma_exponent=model_param("dma_efficiency_exponent"),
            sbuf_usable_fraction=model_param("sbuf_usable_fraction"),
            semaphore_wait_min_ns=model_param("semaphore_wait_min_ns"),
            max_tile_groups=int(model_param("kernel_max_tile_groups")),
            throttling=neuron_flag(target, "tensor_didt_throttling"),
            throttle_f0=model_param("tensor_throttle_start_fraction"),
            throttle_ramp_ns=model_param("tensor_throttle_ramp_ns"),
            throttle_idle_ns=model_param("tensor_throttle_idle_ns"),
            host=host, host_overrides=over, auto_cast=auto_cast)

    @property
    def hbm_bytes_per_s(self) -> float:
        """What the core's DMA can draw from HBM: its DMA engines, capped by its share of the chip's HBM."""
        return min(self.dma_bytes_per_s, self.hbm_share_bytes_per_s)

    def peak(self, dtype: str) -> float:
        """Tensor engine FLOP/s of one core for ``dtype`` (FP32/FP64 at ``1 / fp32_matmul_slowdown`` of BF16)."""
        if dtype in self.peak_flops:
            return self.peak_flops[dtype]
        bf16 = self.peak_flops["bfloat16"]
        if dtype in ("float32", "float64", "complex64", "complex128"):
            return bf16 / self.fp32_matmul_slowdown
        return bf16

    def matmul_dtype(self, dtype: str) -> str:
        """The dtype the Tensor engine multiplies operands of ``dtype`` in: BF16 for FP32 under
        ``--auto-cast matmult`` (neuronx-cc's default, "automatically cast FP32 matrix multiplication operations
        to BF16"), else ``dtype``."""
        return "bfloat16" if self.auto_cast == "matmult" and dtype == "float32" else dtype

    def cycles_ns(self, engine: str, cycles: float) -> float:
        """Nanoseconds of ``cycles`` on ``engine``."""
        return cycles / self.clock_hz[engine] * 1e9

    def assumptions(self) -> dict[str, str]:
        """Every model constant this core used, name -> "value (source)", for ``Header.simulation``."""
        out: dict[str, str] = {}
        for name, entry in raw_table()["model"].items():
            out[f"model.{name}"] = f"{entry['value']} ({entry['source']})"
        for name, (value, unit, source) in host_model_params().items():
            if name in self.host_overrides:
                out[f"host.{name}"] = f"{self.host_overrides[name]:g} {unit} (NeuronConfig host_model override)"
            else:
                out[f"host.{name}"] = f"{value:g} {unit} ({source})"
        out["core.active_cores_on_chip"] = (f"{self.active_cores_on_chip} (cores of the chip running this job: "
                                            "they share its HBM bandwidth)")
        out["core.hbm_bytes_per_s"] = (f"{self.hbm_bytes_per_s:.4g} (min of the core's DMA engines, "
                                       f"{self.dma_bytes_per_s:.4g}, and its share of chip HBM, "
                                       f"{self.hbm_share_bytes_per_s:.4g})")
        return out
