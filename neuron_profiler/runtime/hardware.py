"""Real Neuron devices: start/stop the Neuron runtime's inspect capture and convert what Neuron Explorer writes.

``HardwareRuntime`` is a thin adapter. It needs ``torch_neuronx`` and a Neuron device (``/dev/neuron*``);
without them it raises ``RuntimeUnavailableError``. Capture is started with the runtime inspect API
(``nrt_inspect_begin_with_options`` / ``nrt_inspect_stop`` in ``libnrt``) when the library exposes it, else
with the ``NEURON_RT_INSPECT_*`` environment (which must be set before the runtime initialises).

``convert_explorer_parquet`` (re-exported from ``neuron_profiler.importers.neuron_explorer``) maps Neuron
Explorer's Parquet profile (schema 7.4.0) onto this project's tables.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any


from neuron_profiler.runtime.base import DeviceRuntime, RuntimeUnavailableError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from neuron_profiler.trace.builder import TraceBuilder

__all__ = ["HardwareRuntime", "convert_explorer_parquet", "read_explorer_table", "inspect_env"]


def inspect_env(config: Any, output_dir: "str | os.PathLike[str]") -> dict[str, str]:
    """The ``NEURON_RT_INSPECT_*`` settings equivalent to a ``NeuronConfig``."""
    from neuron_profiler.config import ProfileMode
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


class HardwareRuntime(DeviceRuntime):
    """Device events measured by the Neuron runtime (requires torch_neuronx and a Neuron device)."""

    simulated = False

    @staticmethod
    def available() -> bool:
        """True when torch_neuronx is installed and a Neuron device node exists."""
        return importlib.util.find_spec("torch_neuronx") is not None and bool(glob.glob("/dev/neuron[0-9]*"))

    @classmethod
    def check_available(cls) -> None:
        """Raise ``RuntimeUnavailableError`` explaining what is missing."""
        missing = []
        if importlib.util.find_spec("torch_neuronx") is None:
            missing.append("the torch_neuronx package is not installed")
        if not glob.glob("/dev/neuron[0-9]*"):
            missing.append("no Neuron device (/dev/neuron*) is present")
        if missing:
            raise RuntimeUnavailableError(
                "hardware Neuron runtime unavailable: " + "; ".join(missing)
                + ". Run on a Trainium/Inferentia instance with the Neuron SDK, or use runtime='simulated'.")

    def __init__(self, config: Any) -> None:
        self.check_available()
        self.config = config
        self.output_dir = Path(config.profile_output_dir) / config.run_id / f"neuron_rt_pid{os.getpid()}"
        self._lib: Any = None
        self._cfg_handle: Any = None

    def start(self) -> None:
        """Begin the runtime capture (inspect API when available, else environment variables)."""
        self.output_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._lib = ctypes.CDLL("libnrt.so.1")
        except OSError:
            self._lib = None
        if self._lib is not None and hasattr(self._lib, "nrt_inspect_begin_with_options"):
            cfg = ctypes.c_void_p()
            self._lib.nrt_inspect_config_allocate(ctypes.byref(cfg))
            self._lib.nrt_inspect_config_set_defaults(cfg)
            self._lib.nrt_inspect_config_set_output_dir(cfg, str(self.output_dir).encode())
            if self.config.max_events_per_nc is not None:
                self._lib.nrt_inspect_config_set_sys_trace_max_events_per_nc(cfg, ctypes.c_uint64(self.config.max_events_per_nc))
            self._lib.nrt_inspect_begin_with_options(cfg)
            self._cfg_handle = cfg
        else:
            os.environ.update(inspect_env(self.config, self.output_dir))

    def stop(self) -> None:
        """End the runtime capture (the runtime writes its NTFF / system trace files)."""
        if self._lib is not None and self._cfg_handle is not None:
            self._lib.nrt_inspect_stop()
            self._lib.nrt_inspect_config_free(self._cfg_handle)
            self._cfg_handle = None

    def emit(self, builder: "TraceBuilder", host_ops: "pd.DataFrame") -> None:
        """Convert the Parquet profile Neuron Explorer produced from this capture into ``builder``."""
        if not list(self.output_dir.rglob("Instruction*.parquet")):
            raise RuntimeUnavailableError(
                f"no Neuron Explorer Parquet profile under {self.output_dir}; process the captured NTFF files with "
                f"Neuron Explorer (parquet output) first, then call convert_explorer_parquet on that directory")
        convert_explorer_parquet(self.output_dir, builder)


# The Neuron Explorer importer lives in neuron_profiler.importers.neuron_explorer; these names stay here
# for the callers of this module (HardwareRuntime.emit above, older scripts).
from neuron_profiler.importers.neuron_explorer import convert_explorer_parquet, read_explorer_table  # noqa: E402
