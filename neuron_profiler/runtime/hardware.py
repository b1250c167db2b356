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

``convert_explorer_parquet`` maps Neuron Explorer's Parquet profile (schema 7.4.0: ``Instruction``,
``DmaPacketAggregated`` or ``DmaPacket``, ``CcOp``, ``Metadata``) onto this project's tables.
"""
from __future__ import annotations

import collections
import ctypes
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

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


def inspect_env(config: Any, output_dir: "str | os.PathLike[str]") -> dict[str, str]:
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


def find_aws_explorer() -> "str | None":
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
        self._capture_dir: "Path | None" = None
        self._stopped: "collections.deque[Path]" = collections.deque()

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
        if self.config.max_events_per_nc is not None and hasattr(self._lib, "nrt_inspect_config_set_sys_trace_max_events_per_nc"):
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

    def emit(self, builder: "TraceBuilder", host_ops: "pd.DataFrame") -> None:
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
            raise RuntimeUnavailableError(f"AWS's neuron-explorer is gone; the raw device profile stays in {capture_dir}")
        cmd = explorer_command(explorer, capture_dir, parquet_dir)
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0 or not list(parquet_dir.rglob("Instruction*.parquet")):
            last = (r.stderr.strip().splitlines() or r.stdout.strip().splitlines() or [""])[-1]
            raise RuntimeUnavailableError(
                f"{' '.join(cmd)} exited {r.returncode} without an Instruction table ({last}); the raw device "
                f"profile stays in {capture_dir}")


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
