"""``NeuronConfig``: the TorchNeuron profiling options, passed to the stock
``torch.profiler.profile(experimental_config=...)``.

A plain validated value: the constructor checks every option (unknown modes or targets, malformed core
ranges, unwritable output directories and bad host-model overrides raise at once, before any profiled code
runs) and does nothing else. Wiring capture into torch (the "neuron" PrivateUse1 name, the profiler hooks,
the capture session, the device runtime) is ``NeuronProfiler``'s job.
"""
from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

import torch

from neuron_profiler.hardware import TARGETS, Target, validate_host_model
from neuron_profiler.modes import (
    RUNTIMES,
    ProfileMode,
    check_choice,
    check_output_dir,
    check_run_id,
    custom_profiler_json,
    default_run_id,
    parse_modes,
    parse_nc_ranges,
)

__all__ = ["ProfileMode", "NeuronConfig", "parse_nc_ranges", "VALID_TARGETS", "VALID_RUNTIMES"]

#: Targets the simulated runtime models (``neuron_profiler.hardware.TARGETS``).
VALID_TARGETS = TARGETS
#: ``runtime`` values: "auto" = hardware when a usable Neuron device is present, else simulated.
VALID_RUNTIMES = RUNTIMES
#: the simulated compiler's --auto-cast choices (neuronx-cc: none, matmult (its default), all)
AUTO_CAST = ("none", "matmult")

#: TorchNeuron options this profiler does not implement, with the reason (a clear error beats a silent no-op).
UNSUPPORTED_OPTIONS = {
    "precache_node_info": "it makes torch_neuronx populate per-NEFF metadata during warm-up, an internal of "
                          "torch_neuronx this profiler cannot reach; warm up a few iterations before the profiled "
                          "window instead (schedule(wait=..., warmup=...)) and remove the option",
}


class NeuronConfig(torch._C._profiler._ExperimentalConfig):
    """Neuron options for ``torch.profiler.profile(experimental_config=NeuronConfig(...))``.

    Args:
        modes: ``ProfileMode`` members (or their names); default ``[DEVICE, RUNTIME]``.
        profile_output_dir: where ``NeuronProfiler.export_trace`` writes ``<run_id>/rankRRRRR_windowWWW.nprof``.
        max_events_per_nc: cap on device events per NeuronCore; drops are recorded in the trace footer.
        capture_enabled_for_nc: cores to record, e.g. ``"0,1,2-5"``; ``None`` = all.
        target: simulated hardware, one of ``VALID_TARGETS``.
        runtime: ``"auto"``, ``"simulated"`` or ``"hardware"``.
        run_id: groups the traces of one (multi-rank) run; default from ``NEURON_PROFILE_RUN_ID``,
            ``TORCHELASTIC_RUN_ID`` or a timestamp.
        num_cores: NeuronCores per simulated device (``None`` = the target's default).
        cpu_sample_interval_s: sampling period of the CPU_UTIL / HOST_MEMORY counters.
        neff_cache_dir: the NEFF cache of the hardware runtime (default ``$TORCH_NEURONX_NEFF_CACHE_DIR``);
            its NEFFs are copied next to each window's device profile so Neuron Explorer can decode it. The
            simulated runtime compiles nothing and only records the value.
        host_model: overrides of the simulated host dispatch model's constants
            (``neuron_profiler.hardware.host_model_params()``; see docs/simulation.md).
        auto_cast: the simulated compiler's ``--auto-cast``: ``"none"`` (matmuls at their operands' dtype) or
            ``"matmult"`` (neuronx-cc's default: FP32 matmuls read their FP32 operands, cast them to BF16 on chip
            and run at the BF16 rate; everything else keeps its dtype). The hardware runtime ignores it.
        custom_profiler_config: extra options forwarded to Kineto; must be a JSON object (dict or JSON string).

    TorchNeuron's ``precache_node_info`` is not implemented and raises ``TypeError`` saying why.
    """

    def __init__(self, modes: Sequence[ProfileMode | str] | None = None,
                 profile_output_dir: str | os.PathLike[str] = "./profile_output",
                 max_events_per_nc: int | None = None, capture_enabled_for_nc: str | Sequence[int] | None = None,
                 target: Target | str = Target.TRN2, runtime: str = "auto", run_id: str | None = None,
                 num_cores: int | None = None, cpu_sample_interval_s: float = 0.05,
                 neff_cache_dir: str | os.PathLike[str] | None = None, host_model: dict[str, float] | None = None,
                 custom_profiler_config: dict[str, Any] | str | None = None, auto_cast: str = "none",
                 **unsupported: Any) -> None:
        _reject_unsupported(unsupported)
        mode_list = parse_modes(modes)
        parsed_target = Target.parse(target)
        check_choice("runtime", runtime, RUNTIMES)
        check_choice("auto_cast", auto_cast, AUTO_CAST)
        if run_id is not None:
            check_run_id(run_id)
        _check_positive_int("max_events_per_nc", max_events_per_nc)
        _check_positive_int("num_cores", num_cores)
        if isinstance(cpu_sample_interval_s, bool) or not isinstance(cpu_sample_interval_s, (int, float)) \
                or not cpu_sample_interval_s > 0:
            raise ValueError(f"cpu_sample_interval_s: expected a number > 0, found {cpu_sample_interval_s!r}")
        if neff_cache_dir is not None and not isinstance(neff_cache_dir, (str, os.PathLike)):
            raise ValueError(f"neff_cache_dir: expected a directory path, found {neff_cache_dir!r}")
        overrides = validate_host_model(host_model)
        cores = parse_nc_ranges(capture_enabled_for_nc)
        custom = custom_profiler_json(custom_profiler_config)
        out_dir = check_output_dir(profile_output_dir)
        super().__init__(custom_profiler_config=custom)
        self.modes = mode_list
        self.profile_output_dir = out_dir
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = cores
        self.capture_enabled_for_nc_spec = capture_enabled_for_nc if isinstance(capture_enabled_for_nc, str) else (
            None if cores is None else ",".join(map(str, cores)))
        self.target = parsed_target
        self.runtime = runtime
        self.run_id = run_id or default_run_id()
        self.num_cores = num_cores
        self.cpu_sample_interval_s = float(cpu_sample_interval_s)
        self.neff_cache_dir = str(neff_cache_dir) if neff_cache_dir is not None else (
            os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or None)
        self.host_model = overrides or None
        self.auto_cast = auto_cast
        self.custom_profiler_config_json = custom

    def has(self, mode: ProfileMode) -> bool:
        """True when ``mode`` is enabled."""
        return mode in self.modes

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-serialisable dict (stored in the trace header's ``capture_config_json``)."""
        return {"modes": [m.name for m in self.modes], "profile_output_dir": str(self.profile_output_dir),
                "max_events_per_nc": self.max_events_per_nc, "capture_enabled_for_nc": self.capture_enabled_for_nc_spec,
                "target": self.target.value, "runtime": self.runtime, "run_id": self.run_id,
                "num_cores": self.num_cores,
                "cpu_sample_interval_s": self.cpu_sample_interval_s, "neff_cache_dir": self.neff_cache_dir,
                "host_model": dict(self.host_model) if self.host_model else None, "auto_cast": self.auto_cast,
                "custom_profiler_config": (json.loads(self.custom_profiler_config_json)
                                           if self.custom_profiler_config_json else None)}

    def __repr__(self) -> str:
        return f"NeuronConfig({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"


def _check_positive_int(option: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValueError(f"{option}: expected a positive int or None, found {value!r}")


def _reject_unsupported(options: dict[str, Any]) -> None:
    for name in options:
        why = UNSUPPORTED_OPTIONS.get(name)
        if why is not None:
            raise TypeError(f"NeuronConfig: TorchNeuron's {name} is not supported by neuron_profiler: {why}")
    if options:
        raise TypeError(f"NeuronConfig: unexpected option(s) {', '.join(sorted(options))}")
