"""Real Neuron devices: start/stop the Neuron runtime's inspect capture and convert what it writes.

``HardwareRuntime`` is a thin adapter. Device events on real hardware need four things, all checked before
anything is profiled (``HardwareRuntime.missing()``; the error says what is missing and how to get it):

- ``torch_neuronx`` and a Neuron device (``/dev/neuron*``);
- ``libnrt.so.1`` with the runtime inspect API (``nrt_inspect_begin_with_options`` / ``nrt_inspect_stop``),
  which starts and stops the capture at the window boundaries;
- AWS's ``neuron-explorer`` (package ``aws-neuronx-tools``, ``/opt/aws/neuron/bin``, or ``$NEURON_EXPLORER``)
  to process the runtime's NTFF device profile into Parquet (``neuron-explorer view -d DIR --data-path OUT
  --ingest-only``, the command of the Neuron Explorer docs; not run here, there is no Neuron device). This
  project's own ``neuron-explorer`` (the Dash app) is a different program and is never used for this.

Each window gets its own capture directory ``<profile_output_dir>/<run_id>/neuron_rt_pid<pid>/window<NNN>``; at
stop the NEFFs of ``neff_cache_dir`` are copied there (Neuron Explorer decodes the NTFF with them).

``convert_explorer_parquet`` (re-exported from ``neuron_profiler.importers.neuron_explorer``) maps Neuron
Explorer's Parquet profile (schema 7.4.0) onto this project's tables.
"""
from __future__ import annotations

import collections
import ctypes
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_profiler.modes import ProfileMode
from neuron_profiler.runtime.base import DeviceRuntime, RuntimeUnavailableError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from neuron_profiler.trace.builder import TraceBuilder

__all__ = ["HardwareRuntime", "convert_explorer_parquet", "read_explorer_table", "inspect_env", "explorer_command"]

#: Where Neuron device nodes appear.
DEVICE_GLOB = "/dev/neuron[0-9]*"
#: The Neuron runtime library and the inspect entry points capture needs.
LIBNRT = "libnrt.so.1"
INSPECT_API = ("nrt_inspect_config_allocate", "nrt_inspect_config_set_defaults", "nrt_inspect_config_set_output_dir",
               "nrt_inspect_begin_with_options", "nrt_inspect_stop", "nrt_inspect_config_free")
#: AWS Neuron tools install directory (aws-neuronx-tools).
NEURON_TOOLS_BIN = "/opt/aws/neuron/bin"


def inspect_env(config: Any, output_dir: str | os.PathLike[str]) -> dict[str, str]:
    """The ``NEURON_RT_INSPECT_*`` settings equivalent to a ``NeuronConfig`` (for launching a program whose
    runtime must be configured before it starts)."""
    env = {"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_OUTPUT_DIR": str(output_dir),
           "NEURON_RT_INSPECT_SYSTEM_PROFILE": "1" if config.has(ProfileMode.RUNTIME) else "0",
           "NEURON_RT_INSPECT_DEVICE_PROFILE": "session" if config.has(ProfileMode.DEVICE) else "0",
           "NEURON_RT_INSPECT_CPU_UTIL": "1" if config.has(ProfileMode.CPU_UTIL) else "0",
           "NEURON_RT_INSPECT_HOST_MEMORY": "1" if config.has(ProfileMode.HOST_MEMORY) else "0"}
    if config.max_events_per_nc is not None:
        env["NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"] = str(config.max_events_per_nc)
    if config.capture_enabled_for_nc is not None:
        env["NEURON_RT_INSPECT_EVENT_FILTER_NC"] = ",".join(map(str, config.capture_enabled_for_nc))
    return env


def _module_present(name: str) -> bool:
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def load_libnrt() -> Any:
    """The Neuron runtime library (ctypes), or None when it cannot be loaded."""
    try:
        return ctypes.CDLL(LIBNRT)
    except OSError:
        return None


def find_aws_explorer() -> str | None:
    """Path of AWS's ``neuron-explorer``: ``$NEURON_EXPLORER``, else ``/opt/aws/neuron/bin/neuron-explorer``."""
    for cand in (os.environ.get("NEURON_EXPLORER"), os.path.join(NEURON_TOOLS_BIN, "neuron-explorer")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def explorer_command(explorer: str, capture_dir: Path, parquet_dir: Path) -> list[str]:
    """The Neuron Explorer command that processes one capture directory into Parquet tables."""
    return [explorer, "view", "-d", str(capture_dir), "--data-path", str(parquet_dir), "--ingest-only"]


class HardwareRuntime(DeviceRuntime):
    """Device events measured by the Neuron runtime (see the module docstring for what it needs)."""

    simulated = False

    @staticmethod
    def device_present() -> bool:
        """True when torch_neuronx is installed and a Neuron device node exists."""
        return _module_present("torch_neuronx") and bool(glob.glob(DEVICE_GLOB))

    @staticmethod
    def missing() -> list[str]:
        """What this machine lacks for hardware device events, each with how to get it (empty = ready)."""
        out = []
        if not _module_present("torch_neuronx"):
            out.append("the torch_neuronx package (install the Neuron SDK's torch-neuronx from the Neuron pip "
                       "repository)")
        if not glob.glob(DEVICE_GLOB):
            out.append("a Neuron device (/dev/neuron*: run on a Trainium or Inferentia instance)")
        lib = load_libnrt()
        absent = [f for f in INSPECT_API if lib is not None and not hasattr(lib, f)]
        if lib is None or absent:
            out.append(f"{LIBNRT} with the runtime inspect API ({', '.join(absent or INSPECT_API[3:5])}: install or "
                       f"update the Neuron runtime, package aws-neuronx-runtime-lib)")
        if find_aws_explorer() is None:
            out.append(f"AWS's neuron-explorer, which turns the runtime's NTFF device profile into Parquet (install "
                       f"aws-neuronx-tools into {NEURON_TOOLS_BIN}, or set NEURON_EXPLORER to its path)")
        return out

    @classmethod
    def check_available(cls) -> None:
        """Raise ``RuntimeUnavailableError`` naming what is missing and how to get it."""
        missing = cls.missing()
        if missing:
            raise RuntimeUnavailableError(
                "hardware Neuron runtime unavailable, missing: " + "; ".join(missing)
                + ". Fix these, or use runtime='simulated' for modelled device events.")

    def __init__(self, config: Any) -> None:
        self.check_available()
        self.config = config
        self.root = Path(config.profile_output_dir) / config.run_id / f"neuron_rt_pid{os.getpid()}"
        self._count = 0
        self._lib: Any = None
        self._cfg_handle: Any = None
        self._capture_dir: Path | None = None
        self._stopped: collections.deque[Path] = collections.deque()

    def _call(self, name: str, *args: Any) -> None:
        status = getattr(self._lib, name)(*args)
        if status != 0:
            raise RuntimeError(f"{LIBNRT} {name} returned status {status}")

    def start(self) -> None:
        """Begin the runtime's inspect capture into this window's directory."""
        self._capture_dir = self.root / f"window{self._count:03d}"
        self._count += 1
        self._capture_dir.mkdir(parents=True, exist_ok=True)
        self._lib = load_libnrt()
        if self._lib is None:
            raise RuntimeUnavailableError(f"{LIBNRT} could not be loaded; no device capture in this window")
        cfg = ctypes.c_void_p()
        self._call("nrt_inspect_config_allocate", ctypes.byref(cfg))
        self._cfg_handle = cfg
        self._call("nrt_inspect_config_set_defaults", cfg)
        self._call("nrt_inspect_config_set_output_dir", cfg, str(self._capture_dir).encode())
        if self.config.max_events_per_nc is not None and hasattr(
                self._lib, "nrt_inspect_config_set_sys_trace_max_events_per_nc"):
            self._call("nrt_inspect_config_set_sys_trace_max_events_per_nc", cfg,
                       ctypes.c_uint64(self.config.max_events_per_nc))
        self._call("nrt_inspect_begin_with_options", cfg)

    def stop(self) -> None:
        """End the capture (the runtime writes its NTFF / system trace files) and copy the cached NEFFs next
        to them."""
        d, self._capture_dir = self._capture_dir, None
        if d is None:
            return
        self._stopped.append(d)
        if self._cfg_handle is not None:
            try:
                self._call("nrt_inspect_stop")
            finally:
                self._lib.nrt_inspect_config_free(self._cfg_handle)
                self._cfg_handle = None
        cache = self.config.neff_cache_dir
        if cache and os.path.isdir(cache):
            for neff in Path(cache).rglob("*.neff"):
                shutil.copy2(neff, d / neff.name)

    def emit(self, builder: TraceBuilder, host_ops: pd.DataFrame) -> None:
        """Process the window's capture with Neuron Explorer and convert its Parquet tables into ``builder``."""
        if not self._stopped:
            raise RuntimeUnavailableError("no hardware capture ran for this window (its start failed)")
        d = self._stopped.popleft()
        if not list(d.rglob("*.ntff")):
            raise RuntimeUnavailableError(
                f"the Neuron runtime wrote no device profile (*.ntff) under {d}: did the window run work on the "
                f"Neuron device, and does a NEURON_RT_INSPECT_OUTPUT_DIR setting send it elsewhere?")
        parquet = d / "parquet"
        if not list(parquet.rglob("Instruction*.parquet")):
            self._process(d, parquet)
        convert_explorer_parquet(parquet, builder)

    @staticmethod
    def _process(capture_dir: Path, parquet_dir: Path) -> None:
        explorer = find_aws_explorer()
        if explorer is None:
            raise RuntimeUnavailableError(
                f"AWS's neuron-explorer is gone; the raw device profile stays in {capture_dir}")
        cmd = explorer_command(explorer, capture_dir, parquet_dir)
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0 or not list(parquet_dir.rglob("Instruction*.parquet")):
            last = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or [""])[-1]
            raise RuntimeUnavailableError(
                f"{' '.join(cmd)} exited {r.returncode} without an Instruction table ({last}); the raw device "
                f"profile stays in {capture_dir}")


# The Neuron Explorer importer lives in neuron_profiler.importers.neuron_explorer; these names stay here
# for the callers of this module (HardwareRuntime.emit above, older scripts).
from neuron_profiler.importers.neuron_explorer import convert_explorer_parquet, read_explorer_table  # noqa: E402
