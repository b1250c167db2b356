"""The device of a Neuron Explorer profile (``Metadata`` table) and the timeline tracks under it.

The device's peaks come from the project hardware table (``neuron_profiler.hardware.neuron_spec``) for the
target named by ``Metadata.instance_type`` (``trn2.48xlarge`` -> ``trn2``), so MFU/MBU are numbers; every
Metadata field is kept in ``Device.properties``. An unknown instance type keeps the profile's own numbers
(engine clocks, TensorE size) and the header says the peaks are unknown."""
from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.importers.neuron_explorer.columns import _as_text, _is_null
from schemas import pb

_TARGET = re.compile(r"^(trn\d|inf\d)", re.I)
_ENGINES = {"tensor": "Tensor", "tensormatrix": "TensorMatrix", "vector": "Vector", "scalar": "Scalar",
            "gpsimd": "GpSimd", "sync": "Sync", "pool": "GpSimd", "act": "Scalar", "activation": "Scalar",
            "pe": "Tensor", "dve": "Vector"}


def engine_name(v: str) -> str:
    """Explorer engine names in their canonical capitalisation (``tensor`` -> ``Tensor``); others as given."""
    return _ENGINES.get(str(v).strip().lower().replace("_", ""), str(v))


def target_of(instance_type: str) -> str | None:
    """``trn2.48xlarge`` -> ``trn2`` when the hardware table knows the target, else None."""
    from neuron_profiler.hardware import TARGETS

    m = _TARGET.match(instance_type or "")
    t = m.group(1).lower() if m else None
    return t if t in TARGETS else None


def metadata_row(meta: pd.DataFrame | None) -> dict[str, Any]:
    """The first Metadata row as a dict of plain values (empty when there is no Metadata)."""
    if meta is None or not len(meta):
        return {}
    row = meta.iloc[0].to_dict()
    return {str(k): (v.item() if isinstance(v, np.generic) else v) for k, v in row.items() if not _is_null(v)}


def make_device(row: dict[str, Any], index: int = 0) -> tuple[pb.Device, list[str]]:
    """(the ``pb.Device``, notes for the header). ``row``: the Metadata row; ``index``: the device's position
    in ``Header.devices`` (what tracks' ``device`` column holds; the profile's ``neuron_device_idx`` is kept
    in the name and ``properties``)."""
    from neuron_profiler.hardware import neuron_device

    instance = str(row.get("instance_type", "") or "")
    simulated = bool(row.get("is_simulation", False))
    device_id = row.get("neuron_device_idx")
    target = target_of(instance)
    notes: list[str] = []
    if target is not None:
        dev = neuron_device(target, index=index, simulated=simulated)
        if device_id is not None:
            dev.name = f"{dev.name} (Neuron device {device_id})"
        dev.spec.source = (f"peaks: {dev.spec.source} | instance type {instance} from the Neuron Explorer "
                           f"profile Metadata table")
        for field in ("tensor_engine_num_rows", "tensor_engine_num_cols"):
            v = row.get(field)
            if v is not None and int(v) and int(v) != int(getattr(dev.spec, field)):
                notes.append(f"Metadata.{field} = {int(v)}, hardware table {getattr(dev.spec, field)}")
    else:
        dev = pb.Device(index=index, kind="neuron", name=instance or "Neuron device", simulated=simulated)
        dev.spec.CopyFrom(_spec_from_metadata(row))
        notes.append(f"instance type {instance or '(none: no Metadata table)'} is not a target of the hardware "
                     f"table (trn1, trn2, trn3, inf2): peaks unknown, MFU/roofline unavailable")
    for k, v in row.items():
        dev.properties[str(k)] = _as_text(v)
    return dev, notes


def _spec_from_metadata(row: dict[str, Any]) -> pb.HardwareSpec:
    def g(k: str) -> float:
        v = row.get(k, 0)
        try:
            return float(v or 0)
        except (TypeError, ValueError):
            return 0.0

    spec = pb.HardwareSpec(source="Neuron Explorer profile Metadata table (no peaks: unknown instance type)",
                           num_cores=int(g("num_physical_cores")),
                           tensor_engine_num_rows=int(g("tensor_engine_num_rows")),
                           tensor_engine_num_cols=int(g("tensor_engine_num_cols")),
                           dma_engines_per_core=int(g("num_dma_engines_per_neuroncore")))
    for eng, clock, lanes in (("Tensor", "tensor_engine_clock_freq", ""),
                              ("Vector", "vector_engine_clock_freq", "vector_engine_num_channels"),
                              ("Scalar", "scalar_engine_clock_freq", "scalar_engine_num_channels"),
                              ("GpSimd", "gpsimd_engine_clock_freq", "gpsimd_engine_num_channels")):
        if clock in row:
            spec.engines.append(pb.EngineSpec(name=eng, clock_hz=g(clock), lanes=int(g(lanes)) if lanes else 0))
    return spec


class Tracks:
    """Creates the tracks of one Explorer device in a ``TraceBuilder``: device -> NeuronCore -> engine / DMA
    queue / CC stream / counter / hierarchy tracks, each made once per key."""

    def __init__(self, builder: Any, dev_idx: int, dev_name: str, nc_base: int, rank: int = 0) -> None:
        self.b, self.dev_idx, self.nc_base, self.rank = builder, dev_idx, nc_base, rank
        self.device = builder.add_track("device", dev_name, device=dev_idx, rank=rank)
        self._keyed: dict[tuple, int] = {}

    def _once(self, key: tuple, make: Any) -> int:
        t = self._keyed.get(key)
        if t is None:
            t = self._keyed[key] = make()
        return t

    def core(self, pcore: int) -> int:
        nc = self.nc_base + int(pcore)
        return self._once(("core", nc), lambda: self.b.add_track("core", f"NC {nc}", parent=self.device,
                                                                 device=self.dev_idx, nc_idx=nc, rank=self.rank,
                                                                 sort_index=nc))

    def child(self, kind: str, pcore: int, name: str, *, tid: int = 0, unit: str = "") -> int:
        nc = self.nc_base + int(pcore)
        return self._once((kind, nc, name), lambda: self.b.add_track(
            kind, name, parent=self.core(pcore), device=self.dev_idx, nc_idx=nc, tid=tid, rank=self.rank,
            unit=unit))

    def device_child(self, kind: str, name: str, *, tid: int = -1) -> int:
        return self._once(("dev", kind, name), lambda: self.b.add_track(
            kind, name, parent=self.device, device=self.dev_idx, tid=tid, rank=self.rank))

    def per_row(self, kind: str, pcore: np.ndarray, names: np.ndarray, **kw: Any) -> np.ndarray:
        """Track id per row (``pcore``, ``names`` aligned), one track per distinct (core, name)."""
        out = np.empty(len(names), dtype=np.int64)
        if not len(names):
            return out
        key = pd.MultiIndex.from_arrays([pcore, names])
        codes, uniq = pd.factorize(key)
        ids = np.asarray([self.child(kind, int(p), str(n) or "unknown", **kw) for p, n in uniq], dtype=np.int64)
        return ids[codes]
