"""Real Neuron devices: start/stop the Neuron runtime's inspect capture and convert what Neuron Explorer writes.

``HardwareRuntime`` is a thin adapter. It needs ``torch_neuronx`` and a Neuron device (``/dev/neuron*``);
without them it raises ``RuntimeUnavailableError``. Capture is started with the runtime inspect API
(``nrt_inspect_begin_with_options`` / ``nrt_inspect_stop`` in ``libnrt``) when the library exposes it, else
with the ``NEURON_RT_INSPECT_*`` environment (which must be set before the runtime initialises).

``convert_explorer_parquet`` maps Neuron Explorer's Parquet profile (schema 7.4.0: ``Instruction``,
``DmaPacketAggregated`` or ``DmaPacket``, ``CcOp``, ``Metadata``) onto this project's tables.
"""
from __future__ import annotations

import ctypes
import glob
import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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


def read_explorer_table(profile_dir: "str | os.PathLike[str]", table: str) -> "pd.DataFrame | None":
    """One Explorer table: ``<table>.parquet`` or its split parts ``<table>_0.parquet``...; None when absent."""
    import pandas as pd
    import pyarrow.parquet as pq
    root = Path(profile_dir)
    files = sorted(root.rglob(f"{table}.parquet"))
    parts = sorted((p for p in root.rglob(f"{table}_*.parquet") if p.stem[len(table) + 1:].isdigit()),
                   key=lambda p: int(p.stem[len(table) + 1:]))
    files += parts
    if not files:
        return None
    return pd.concat([pq.read_table(f).to_pandas() for f in files], ignore_index=True)


def _col(df: "pd.DataFrame", name: str, default: Any, n: int) -> np.ndarray:
    """Column ``name`` as str / float64 / int64 (by the type of ``default``); ``default`` where absent or null."""
    import pandas as pd
    if name not in df.columns:
        return np.full(n, default, dtype=object if isinstance(default, str) else type(default))
    s = df[name]
    if isinstance(default, str):
        return np.array([default if x is None or (isinstance(x, float) and np.isnan(x)) else str(x) for x in s], dtype=object)
    if isinstance(default, float):
        return pd.to_numeric(s, errors="coerce").fillna(default).to_numpy(np.float64)
    if s.dtype.kind in "iub":  # exact: int64 ns timestamps do not survive a float64 round trip
        return s.to_numpy(np.int64)
    return pd.to_numeric(s, errors="coerce").fillna(default).to_numpy().astype(np.int64)


def _durations(df: "pd.DataFrame") -> np.ndarray:
    n = len(df)
    if "duration_ns" in df.columns:
        return _col(df, "duration_ns", 0, n).astype(np.int64)
    if "end_ts" in df.columns:
        return (_col(df, "end_ts", 0, n) - _col(df, "start_ts", 0, n)).astype(np.int64)
    return np.zeros(n, dtype=np.int64)


def _device_from_metadata(meta: "pd.DataFrame | None") -> Any:
    from schemas import pb
    if meta is None or meta.empty:
        return pb.Device(index=0, kind="neuron", name="Neuron device", simulated=False), 0, False
    row = meta.iloc[0]

    def g(k: str, default: Any = 0) -> Any:
        v = row.get(k, default)
        return default if v is None or (isinstance(v, float) and np.isnan(v)) else v
    instance = str(g("instance_type", ""))
    kind = instance.split(".")[0] if instance else "neuron"
    spec = pb.HardwareSpec(source="Neuron Explorer profile Metadata table", num_cores=int(g("num_physical_cores", 0)),
                           tensor_engine_num_rows=int(g("tensor_engine_num_rows", 0)),
                           tensor_engine_num_cols=int(g("tensor_engine_num_cols", 0)),
                           dma_engines_per_core=int(g("num_dma_engines_per_neuroncore", 0)))
    for eng, key, lanes in (("Tensor", "tensor_engine_clock_freq", None), ("Vector", "vector_engine_clock_freq", "vector_engine_num_channels"),
                            ("Scalar", "scalar_engine_clock_freq", "scalar_engine_num_channels"),
                            ("GpSimd", "gpsimd_engine_clock_freq", "gpsimd_engine_num_channels")):
        if key in row.index:
            spec.engines.append(pb.EngineSpec(name=eng, clock_hz=float(g(key, 0)), lanes=int(g(lanes, 0)) if lanes else 0))
    simulated = bool(g("is_simulation", False))
    dev = pb.Device(index=int(g("neuron_device_idx", 0)), kind=kind, name=instance or "Neuron device", simulated=simulated, spec=spec)
    for k in meta.columns:
        dev.properties[str(k)] = str(row[k])
    return dev, int(g("neuroncore_idx", 0)), simulated


def convert_explorer_parquet(profile_dir: "str | os.PathLike[str]", builder: "TraceBuilder | None" = None) -> "TraceBuilder":
    """Add a Neuron Explorer Parquet profile's device events to ``builder`` (a new one when None); returns it.

    Tables read: ``Metadata`` (device, core index, engine clocks), ``Instruction`` -> instructions on one track
    per (core, engine), ``DmaPacketAggregated`` (else ``DmaPacket``) -> dma on one track per (core, queue),
    ``CcOp`` -> collectives on one CC track per stream. Times stay int64 ns; sizes bytes.
    Raises ``TraceFormatError`` when ``profile_dir`` holds no ``Instruction`` table.
    """
    from neuron_profiler.trace import TraceBuilder, TraceFormatError, make_header
    meta = read_explorer_table(profile_dir, "Metadata")
    instr = read_explorer_table(profile_dir, "Instruction")
    if instr is None:
        raise TraceFormatError(f"expected a Neuron Explorer Parquet profile (Instruction.parquet) under {profile_dir}; found none")
    dev, nc_base, simulated = _device_from_metadata(meta)
    if builder is None:
        hdr = make_header("neuron_profiler.runtime.hardware", source_format="neuron-explorer-parquet",
                          simulated=simulated, source_path=str(profile_dir),
                          metadata={"profile_schema_version": str(meta.iloc[0].get("profile_schema_version", ""))
                                    if meta is not None and len(meta) else ""})
        builder = TraceBuilder(hdr)
    dev_idx = len(builder.header.devices)
    builder.header.devices.append(dev)
    t_dev = builder.add_track("device", dev.name, device=dev_idx)
    core_tracks: dict[int, int] = {}

    def core_track(p: int) -> int:
        if p not in core_tracks:
            core_tracks[p] = builder.add_track("core", f"NC {nc_base + p}", parent=t_dev, device=dev_idx, nc_idx=nc_base + p)
        return core_tracks[p]

    def tracks_for(df: "pd.DataFrame", key: str, kind: str) -> np.ndarray:
        n = len(df)
        pcore = _col(df, "pcore_idx", 0, n).astype(np.int64)
        names = _col(df, key, "", n)
        cache: dict[tuple[int, str], int] = {}
        out = np.empty(n, dtype=np.int64)
        for i, (p, nm) in enumerate(zip(pcore, names)):
            k = (int(p), nm or "unknown")
            if k not in cache:
                cache[k] = builder.add_track(kind, k[1], parent=core_track(k[0]), device=dev_idx, nc_idx=nc_base + k[0])
            out[i] = cache[k]
        return out

    n = len(instr)
    if n:
        builder.add_rows("instructions", {
            "track": tracks_for(instr, "engine", "engine"), "start_ts": _col(instr, "start_ts", 0, n).astype(np.int64),
            "duration_ns": _durations(instr), "engine": _col(instr, "engine", "", n), "opcode": _col(instr, "opcode", "", n),
            "name": _col(instr, "hlo_name", "", n), "raw_flops": _col(instr, "raw_flops", 0, n).astype(np.int64),
            **{c: _col(instr, c, 0, n).astype(np.int64) for c in ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes",
                                                                 "sbuf_write_bytes", "psum_read_bytes", "psum_write_bytes")},
            "tensor_instruction_type": _col(instr, "tensor_instruction_type", "", n),
            "args": [json.dumps({"operands": o}) if o else "" for o in _col(instr, "operands", "", n)]})
    dma = read_explorer_table(profile_dir, "DmaPacketAggregated")
    if dma is None:
        dma = read_explorer_table(profile_dir, "DmaPacket")
    if dma is not None and len(dma):
        m = len(dma)
        builder.add_rows("dma", {
            "track": tracks_for(dma, "queue_name", "dma_queue"), "start_ts": _col(dma, "start_ts", 0, m).astype(np.int64),
            "duration_ns": _durations(dma), "transfer_bytes": _col(dma, "transfer_bytes", 0, m).astype(np.int64),
            "source": _col(dma, "source", "", m), "dest": _col(dma, "dest", "", m),
            "queue_type": _col(dma, "queue_type", "unknown", m), "variable": _col(dma, "variable", "", m)})
    cc = read_explorer_table(profile_dir, "CcOp")
    if cc is not None and len(cc):
        k = len(cc)
        cc = cc.assign(_stream=["CC stream " + s for s in _col(cc, "stream_id", "0", k)])
        builder.add_rows("collectives", {
            "track": tracks_for(cc, "_stream", "cc_core"), "start_ts": _col(cc, "start_ts", 0, k).astype(np.int64),
            "duration_ns": _durations(cc), "operation": _col(cc, "operation", "", k), "algorithm": _col(cc, "algorithm", "", k),
            "process_group": _col(cc, "replica_group_id", "", k), "replica_group": _col(cc, "replica_group", "", k),
            "num_elements": _col(cc, "num_elements", 0, k).astype(np.int64), "dtype": _col(cc, "dtype", "", k),
            "input_size": _col(cc, "input_size", 0, k).astype(np.int64), "output_size": _col(cc, "output_size", 0, k).astype(np.int64),
            "algorithm_bandwidth": _col(cc, "algorithm_bandwidth", 0.0, k), "bus_bandwidth": _col(cc, "bus_bandwidth", 0.0, k)})
    return builder
