"""The hardware table: every clock, peak and bandwidth of the project, each with its public source.

Data lives in ``hardware_table.json`` (package data); this package only reads it.
"""
from neuron_profiler.hardware.dtypes import CANONICAL_DTYPES, dtype_size_bytes, normalize_dtype
from neuron_profiler.hardware.table import (
    TARGETS,
    adjusted_flops_multiplier,
    device_kind_for_gpu,
    engine_clock_hz,
    gpu_entry_by_properties,
    gpu_spec,
    gpu_variant_name,
    host_model_params,
    model_param,
    neuron_device,
    neuron_flag,
    neuron_spec,
    raw_table,
    target_display_name,
    validate_host_model,
)
from neuron_profiler.hardware.target import Target, UnknownTargetError

__all__ = [
    "Target", "UnknownTargetError",
    "TARGETS", "CANONICAL_DTYPES", "neuron_spec", "neuron_device", "gpu_spec", "gpu_variant_name",
    "device_kind_for_gpu", "adjusted_flops_multiplier", "normalize_dtype", "dtype_size_bytes",
    "engine_clock_hz", "model_param", "neuron_flag", "target_display_name", "raw_table", "host_model_params",
    "validate_host_model", "gpu_entry_by_properties",
]
