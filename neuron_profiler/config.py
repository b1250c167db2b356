"""``NeuronConfig`` and ``ProfileMode``: the TorchNeuron profiling options, passed to the stock
``torch.profiler.profile(experimental_config=...)``.

Everything is validated in the constructor, before any profiled code runs: unknown modes or targets,
malformed core ranges and unwritable output directories raise at once.
"""
from __future__ import annotations

import enum
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Iterable, Sequence

import torch

from neuron_profiler.capture import backend as _backend
from neuron_profiler.capture import hooks as _hooks

__all__ = ["ProfileMode", "NeuronConfig", "parse_nc_ranges", "VALID_TARGETS", "VALID_RUNTIMES"]

#: Targets the simulated runtime models (names of ``neuron_profiler.hardware.TARGETS``).
VALID_TARGETS = ("trn1", "inf2", "trn2", "trn3")
#: ``runtime`` values: "auto" = hardware when a Neuron device is present, else simulated.
VALID_RUNTIMES = ("auto", "simulated", "hardware")


class ProfileMode(enum.Enum):
    """What to capture (TorchNeuron names)."""

    DEVICE = "device"            # NeuronCore instructions, DMA, collectives
    RUNTIME = "runtime"          # Neuron runtime system trace (host ops and their correlation)
    CPU_UTIL = "cpu_util"        # host CPU utilisation counter track
    HOST_MEMORY = "host_memory"  # host memory counter track

    @classmethod
    def parse(cls, value: "ProfileMode | str") -> "ProfileMode":
        """Accept a member, its value or its name (any case); ``ValueError`` names the valid ones."""
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            key = value.strip()
            for m in cls:
                if key.lower() in (m.value, m.name.lower()):
                    return m
        valid = ", ".join(m.name for m in cls)
        raise ValueError(f"unknown profile mode {value!r}; valid modes: {valid}")


_RANGE_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_nc_ranges(spec: "str | int | Iterable[int] | None") -> "tuple[int, ...] | None":
    """Parse a NeuronCore selection like ``"0,1,2-5"`` into sorted unique indices.

    ``None``, ``""`` and ``"all"`` mean every core (returns ``None``). Raises ``ValueError`` describing
    the accepted syntax on anything else (negative numbers, reversed ranges, stray characters).
    """
    if spec is None:
        return None
    if isinstance(spec, bool):
        raise ValueError(f"capture_enabled_for_nc: expected a string like '0,1,2-5', found {spec!r}")
    if isinstance(spec, int):
        spec = str(spec)
    if not isinstance(spec, str):
        try:
            items = [int(x) for x in spec]  # type: ignore[union-attr]
        except (TypeError, ValueError):
            raise ValueError(f"capture_enabled_for_nc: expected a string like '0,1,2-5' or a list of "
                             f"core indices, found {spec!r}") from None
        if any(i < 0 for i in items):
            raise ValueError(f"capture_enabled_for_nc: core indices must be >= 0, found {items}")
        return tuple(sorted(set(items)))
    text = spec.strip()
    if text == "" or text.lower() == "all":
        return None
    out: set[int] = set()
    for part in text.split(","):
        m = _RANGE_RE.match(part)
        if not m:
            raise ValueError(f"capture_enabled_for_nc: malformed item {part!r} in {spec!r}; valid syntax: "
                             f"comma-separated core indices or ranges, e.g. '0', '0,2,4', '0-3', '0,1,2-5', or 'all'")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"capture_enabled_for_nc: reversed range {part.strip()!r} in {spec!r}; "
                             f"write ranges low-high, e.g. '2-5'")
        out.update(range(lo, hi + 1))
    return tuple(sorted(out))


def check_output_dir(path: "str | os.PathLike[str]") -> Path:
    """Create ``path`` if needed and prove it is writable; raise ``ValueError`` with the reason if not."""
    p = Path(path).expanduser()
    try:
        p.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".nprof_write_check_", dir=p)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"profile_output_dir {str(p)!r} is not writable: {exc.strerror or exc}; "
                         f"pass a directory you can write to") from None
    return p


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
        neff_cache_dir, precache_node_info: accepted for TorchNeuron compatibility (used by the hardware runtime).
        custom_profiler_config: extra options forwarded to Kineto; must be a JSON object (dict or JSON string).
    """

    def __init__(self, modes: "Sequence[ProfileMode | str] | None" = None, profile_output_dir: "str | os.PathLike[str]" = "./profile_output",
                 max_events_per_nc: "int | None" = None, capture_enabled_for_nc: "str | Sequence[int] | None" = None,
                 target: str = "trn2", runtime: str = "auto", run_id: "str | None" = None, num_cores: "int | None" = None,
                 cpu_sample_interval_s: float = 0.05, neff_cache_dir: "str | None" = None, precache_node_info: bool = True,
                 custom_profiler_config: "dict[str, Any] | str | None" = None) -> None:
        if isinstance(modes, (str, ProfileMode)):
            raise ValueError("modes: expected a list of ProfileMode, e.g. [ProfileMode.DEVICE]; found a single value")
        mode_list = [ProfileMode.DEVICE, ProfileMode.RUNTIME] if modes is None else [ProfileMode.parse(m) for m in modes]
        if run_id is not None and not re.fullmatch(r"[A-Za-z0-9_.-]+", str(run_id)):
            raise ValueError(f"run_id: expected letters, digits, '_', '.' or '-' (it names a folder), found {run_id!r}")
        if target not in VALID_TARGETS:
            raise ValueError(f"unknown target {target!r}; valid targets: {', '.join(VALID_TARGETS)}")
        if runtime not in VALID_RUNTIMES:
            raise ValueError(f"unknown runtime {runtime!r}; valid runtimes: {', '.join(VALID_RUNTIMES)}")
        if max_events_per_nc is not None and (isinstance(max_events_per_nc, bool) or not isinstance(max_events_per_nc, int)
                                              or max_events_per_nc <= 0):
            raise ValueError(f"max_events_per_nc: expected a positive int or None, found {max_events_per_nc!r}")
        if num_cores is not None and (not isinstance(num_cores, int) or num_cores <= 0):
            raise ValueError(f"num_cores: expected a positive int or None, found {num_cores!r}")
        if not (cpu_sample_interval_s > 0):
            raise ValueError(f"cpu_sample_interval_s: expected > 0, found {cpu_sample_interval_s!r}")
        cores = parse_nc_ranges(capture_enabled_for_nc)
        custom = _custom_json(custom_profiler_config)
        out_dir = check_output_dir(profile_output_dir)
        super().__init__(custom_profiler_config=custom)
        self.modes = tuple(dict.fromkeys(mode_list))
        self.profile_output_dir = out_dir
        self.max_events_per_nc = max_events_per_nc
        self.capture_enabled_for_nc = cores
        self.capture_enabled_for_nc_spec = capture_enabled_for_nc if isinstance(capture_enabled_for_nc, str) else (
            None if cores is None else ",".join(map(str, cores)))
        self.target = target
        self.runtime = runtime
        self.run_id = run_id or default_run_id()
        self.num_cores = num_cores
        self.cpu_sample_interval_s = float(cpu_sample_interval_s)
        self.neff_cache_dir = neff_cache_dir or os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
        self.precache_node_info = bool(precache_node_info)
        self.custom_profiler_config_json = custom
        if runtime == "hardware":
            from neuron_profiler.runtime.hardware import HardwareRuntime
            HardwareRuntime.check_available()
        _backend.register_neuron_backend()
        _hooks.install()
        from neuron_profiler.capture.session import CaptureSession
        self._neuron_session = CaptureSession(self)

    def has(self, mode: ProfileMode) -> bool:
        """True when ``mode`` is enabled."""
        return mode in self.modes

    def to_dict(self) -> dict[str, Any]:
        """The options as a JSON-serialisable dict (stored in the trace header's ``capture_config_json``)."""
        return {"modes": [m.name for m in self.modes], "profile_output_dir": str(self.profile_output_dir),
                "max_events_per_nc": self.max_events_per_nc, "capture_enabled_for_nc": self.capture_enabled_for_nc_spec,
                "target": self.target, "runtime": self.runtime, "run_id": self.run_id, "num_cores": self.num_cores,
                "cpu_sample_interval_s": self.cpu_sample_interval_s, "neff_cache_dir": self.neff_cache_dir,
                "precache_node_info": self.precache_node_info,
                "custom_profiler_config": json.loads(self.custom_profiler_config_json) if self.custom_profiler_config_json else None}

    def __repr__(self) -> str:
        return f"NeuronConfig({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"


def _custom_json(value: "dict[str, Any] | str | None") -> str:
    """Kineto crashes on a custom config string holding ``=``; only a JSON object is let through."""
    if value is None or value == "":
        return ""
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict):
            return json.dumps(parsed, sort_keys=True)
    raise ValueError(f"custom_profiler_config: expected a JSON object (dict or JSON string), found {value!r}; "
                     f"'key=value' strings crash Kineto")


def default_run_id() -> str:
    """A run id shared by all ranks of one launch (torchrun sets TORCHELASTIC_RUN_ID; spawn users may set
    NEURON_PROFILE_RUN_ID), else a UTC timestamp."""
    for key in ("NEURON_PROFILE_RUN_ID", "TORCHELASTIC_RUN_ID"):
        v = os.environ.get(key)
        if v and v != "none":
            return re.sub(r"[^A-Za-z0-9_.-]", "_", v)
    import time
    return time.strftime("run_%Y%m%dT%H%M%SZ", time.gmtime())
