"""The hardware figures of a track's device, looked up one way everywhere.

Tracks store their device as a *position* in ``header.devices`` (the trace format: ``tracks.device`` is
"index into Header.devices"); ``Device.index`` is the vendor's id (a Kineto device id such as 3 on an A100)
and is never a lookup key. :func:`device_peaks` turns a position into :class:`DevicePeaks`, the named
ceilings every analysis uses:

* ``matrix_peak(dtype)``: dense matrix FLOP/s per core for a dtype (BF16 when None, the MFU denominator);
  float32 matrix work on a GPU that lists a TF32 peak is judged against TF32 (cuDNN convolutions and matmuls
  with ``allow_tf32`` run there, so FP32 FLOP/s up to the TF32 peak are physical).
* ``vector_peak(engine)``: the engine's (or the GPU's CUDA-core) FLOP/s.
* ``hbm_per_core``: **HBM bandwidth** per core: one HBM stack per NeuronCore on Neuron, the device's HBM on a
  GPU (the MBU denominator, times the active cores).
* ``dma_per_core``: a NeuronCore's DMA bandwidth (NaN on GPUs).
* ``memory_roof``: the roofline's **memory roof** per core = min(HBM, DMA) when both are known, else the
  known one (on Neuron the engines read SBUF while DMA moves HBM data, so a core cannot beat its DMA).
Unknown figures are NaN.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .. import metrics as M

__all__ = ["DevicePeaks", "device_peaks", "peaks_at", "position_of_device"]


def _nz(v: float) -> float:
    return float(v) if v and float(v) > 0 else math.nan


@dataclass(frozen=True)
class DevicePeaks:
    """Ceilings of one device (per core; see the module doc). Unknown values are NaN."""

    position: int
    index: int
    kind: str
    name: str
    num_cores: int
    is_neuron: bool
    matrix: dict = field(default_factory=dict)   # raw ``peak_flops_per_s`` map (keys as the header spells them)
    vector: dict = field(default_factory=dict)   # engine -> FLOP/s
    hbm_per_core: float = math.nan
    hbm_device: float = math.nan
    dma_per_core: float = math.nan

    def matrix_peak(self, dtype: str | None = None) -> float:
        """Dense matrix FLOP/s per core for ``dtype`` (None: BF16, falling back to FP16 / TF32 / the largest)."""
        p = M.lookup_peak(self.matrix, dtype)
        if dtype is not None and not self.is_neuron and M.canonical_dtype(dtype) == "float32":
            tf32 = M.lookup_peak(self.matrix, "tf32")
            if np.isfinite(tf32):
                p = max(p, tf32) if np.isfinite(p) else tf32
        return p

    def vector_peak(self, engine: str) -> float:
        """FLOP/s of a vector engine (the named one, else the largest listed), else the BF16 matrix peak."""
        if engine in self.vector:
            return self.vector[engine]
        if self.vector:
            return max(self.vector.values())
        return self.matrix_peak()

    def compute_peak(self, is_matmul: bool, dtype: str, engine: str) -> float:
        """The compute ceiling of work: matrix peak of its dtype for matmul-family work or a matrix engine
        (the BF16 peak when the dtype has none), else the engine's vector peak."""
        from .tables import MATRIX_ENGINES

        if is_matmul or engine in MATRIX_ENGINES:
            p = self.matrix_peak(dtype or None)
            return p if np.isfinite(p) else self.matrix_peak()
        return self.vector_peak(engine)

    @property
    def memory_roof(self) -> float:
        """min(HBM per core, DMA per core) when both are known, else the known one (bytes/s)."""
        if np.isfinite(self.hbm_per_core) and np.isfinite(self.dma_per_core):
            return min(self.hbm_per_core, self.dma_per_core)
        return self.dma_per_core if np.isfinite(self.dma_per_core) else self.hbm_per_core


def _by_properties(d):
    """The hardware spec of a GPU the importer did not recognise by name, from its recorded properties (core
    count, memory, compute capability: :func:`neuron_profiler.hardware.gpu_entry_by_properties`); None when
    they do not identify it. Its ``name`` says how it was identified."""
    from neuron_profiler.hardware import gpu_entry_by_properties, gpu_spec, raw_table

    props = dict(d.properties)
    try:
        cores = int(props.get("numSms") or props.get("multiProcessorCount") or 0)
        mem = float(props.get("totalGlobalMem") or 0) or None
    except ValueError:
        return None, ""
    cc = f"{props['computeMajor']}.{props['computeMinor']}" if "computeMajor" in props and "computeMinor" in props \
        else ""
    e = gpu_entry_by_properties(str(d.kind), cores, mem, cc) if cores else None
    if e is None:
        return None, ""
    same = [x["variant"] for x in raw_table()["gpus"] if x.get("properties", {}).get("cores") == cores
            and x["kind"] == e["kind"] and x["peak_flops_per_s"].keys() == e["peak_flops_per_s"].keys()
            and x.get("properties", {}).get("compute_capability") == e["properties"].get("compute_capability")]
    return gpu_spec("", entry=e), f"{d.name} (identified by its properties as {' or '.join(same)})"


def _peaks(position: int, d) -> DevicePeaks:
    from neuron_profiler.hardware import TARGETS

    s = d.spec
    name = str(d.name)
    if not s.peak_flops_per_s and str(d.kind).lower() not in TARGETS:
        spec, label = _by_properties(d)
        if spec is not None:
            s, name = spec, label
    hbm_dev = _nz(s.hbm_bandwidth_bytes_per_s)
    hbm_core = _nz(s.hbm_bandwidth_per_core_bytes_per_s)
    return DevicePeaks(position=position, index=int(d.index), kind=str(d.kind), name=name,
                       num_cores=int(s.num_cores) or 1, is_neuron=str(d.kind).lower() in TARGETS,
                       matrix={k: float(v) for k, v in s.peak_flops_per_s.items() if v},
                       vector={k: float(v) for k, v in s.vector_flops_per_s.items() if v},
                       hbm_per_core=hbm_core if np.isfinite(hbm_core) else hbm_dev, hbm_device=hbm_dev,
                       dma_per_core=_nz(s.dma_bandwidth_per_core_bytes_per_s))


def peaks_at(header, position: int | None) -> DevicePeaks | None:
    """:class:`DevicePeaks` of ``header.devices[position]``; ``position`` None or -1 (unknown) gives the only
    device when the header lists exactly one (None otherwise); out of range gives None."""
    devs = list(header.devices) if header is not None else []
    if position is None or position < 0:
        return _peaks(0, devs[0]) if len(devs) == 1 else None
    return _peaks(int(position), devs[int(position)]) if position < len(devs) else None


def device_peaks(trace, position: int | None = None) -> DevicePeaks | None:
    """:func:`peaks_at` of a trace's header (memoised on the trace)."""
    pos = -1 if position is None else int(position)
    return trace.memo(("device_peaks", pos), lambda: peaks_at(trace.header, pos), shared=True)


def position_of_device(header, index: int) -> int | None:
    """Position in ``header.devices`` of the device whose vendor id (``Device.index``) is ``index``."""
    for pos, d in enumerate(header.devices):
        if int(d.index) == int(index):
            return pos
    return None
