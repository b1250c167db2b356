"""What a capture records and where it goes: ``ProfileMode``, the runtime names, NeuronCore selections and the
checks of the plain option values that ``NeuronConfig`` and ``neuron-profile capture`` share.

Torch-free and a leaf (it imports nothing of this project), so the runtimes, the CLI launcher and the config
can all depend on it without depending on each other.
"""
from __future__ import annotations

import enum
import json
import os
import re
import tempfile
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["ProfileMode", "RUNTIMES", "parse_modes", "parse_nc_ranges", "check_choice", "check_output_dir",
           "check_run_id", "default_run_id", "custom_profiler_json"]

#: ``runtime`` values: "auto" = hardware when a usable Neuron device is present, else simulated.
RUNTIMES = ("auto", "simulated", "hardware")


class ProfileMode(enum.Enum):
    """What to capture (TorchNeuron names)."""

    DEVICE = "device"            # NeuronCore instructions, DMA, collectives
    RUNTIME = "runtime"          # Neuron runtime system trace (host ops and their correlation)
    CPU_UTIL = "cpu_util"        # host CPU utilisation counter track
    HOST_MEMORY = "host_memory"  # host memory counter track

    @classmethod
    def parse(cls, value: ProfileMode | str) -> ProfileMode:
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


def parse_modes(modes: Sequence[ProfileMode | str] | None) -> tuple[ProfileMode, ...]:
    """The distinct modes of ``modes`` in order; ``None`` = the TorchNeuron default ``(DEVICE, RUNTIME)``."""
    if isinstance(modes, (str, ProfileMode)):
        raise ValueError("modes: expected a list of ProfileMode, e.g. [ProfileMode.DEVICE]; found a single value")
    if modes is None:
        return (ProfileMode.DEVICE, ProfileMode.RUNTIME)
    return tuple(dict.fromkeys(ProfileMode.parse(m) for m in modes))


_RANGE_RE = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")


def parse_nc_ranges(spec: str | int | Iterable[int] | None) -> tuple[int, ...] | None:
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
            items = [int(x) for x in spec]
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


def check_choice(option: str, value: Any, valid: Sequence[str]) -> str:
    """``value`` when it is one of ``valid``, else ``ValueError`` naming the valid values."""
    if value not in valid:
        raise ValueError(f"unknown {option} {value!r}; valid {option}s: {', '.join(valid)}")
    return str(value)


def check_output_dir(path: str | os.PathLike[str]) -> Path:
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


def check_run_id(run_id: str, option: str = "run_id") -> str:
    """``run_id`` when it can name a folder (letters, digits, ``_``, ``.``, ``-``), else ``ValueError``."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", str(run_id)) or str(run_id) in (".", ".."):
        raise ValueError(f"{option}: expected letters, digits, '_', '.' or '-' (it names a folder), found {run_id!r}")
    return str(run_id)


def default_run_id() -> str:
    """A run id shared by all ranks of one launch (torchrun sets TORCHELASTIC_RUN_ID; spawn users may set
    NEURON_PROFILE_RUN_ID), else a UTC timestamp."""
    for key in ("NEURON_PROFILE_RUN_ID", "TORCHELASTIC_RUN_ID"):
        v = os.environ.get(key)
        if v and v != "none":
            return re.sub(r"[^A-Za-z0-9_.-]", "_", v)
    return time.strftime("run_%Y%m%dT%H%M%SZ", time.gmtime())


def custom_profiler_json(value: dict[str, Any] | str | None) -> str:
    """The Kineto custom config as a JSON object string ("" for none). Kineto crashes on a custom config
    string holding ``=``, so only a JSON object is let through."""
    if value is None or value == "":
        return ""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = None
        value = parsed if isinstance(parsed, dict) else value
    if isinstance(value, dict):
        text = json.dumps(value, sort_keys=True)
        if "=" in text:
            raise ValueError(f"custom_profiler_config: {text} holds '=', which crashes Kineto; remove it")
        return text
    raise ValueError(f"custom_profiler_config: expected a JSON object (dict or JSON string), found {value!r}; "
                     f"'key=value' strings crash Kineto")
