"""Accessors over ``hardware_table.json``: the one place every hardware number of the project lives.

Neuron values are per NeuronCore unless the field says per device; GPU values are per whole GPU.
Every value in the JSON carries its public source; ``HardwareSpec.source`` repeats them.
"""
from __future__ import annotations

import json
from functools import cache, lru_cache
from importlib import resources
from typing import Any

from neuron_profiler.hardware.dtypes import normalize_dtype
from neuron_profiler.hardware.target import Target
from schemas import pb

__all__ = [
    "TARGETS", "neuron_spec", "neuron_device", "gpu_spec", "gpu_variant_name", "device_kind_for_gpu",
    "gpu_entry_by_properties",
    "adjusted_flops_multiplier", "model_param", "neuron_flag", "engine_clock_hz", "target_display_name", "raw_table",
    "host_model_params", "validate_host_model",
]

_TABLE_FILE = "hardware_table.json"
_ENGINE_ORDER = ("Tensor", "Vector", "Scalar", "GpSimd", "Sync")


@lru_cache(maxsize=1)
def raw_table() -> dict[str, Any]:
    """The parsed hardware table JSON (do not mutate)."""
    text = resources.files("neuron_profiler.hardware").joinpath(_TABLE_FILE).read_text(encoding="utf-8")
    return json.loads(text)


TARGETS: tuple[str, ...] = tuple(raw_table()["neuron"])


def _target(target: Target | str) -> dict[str, Any]:
    return raw_table()["neuron"][Target.parse(target).value]


def _val(entry: Any) -> Any:
    return entry["value"] if isinstance(entry, dict) and "value" in entry else entry


def target_display_name(target: Target | str) -> str:
    """Chip name of a target, e.g. "Trainium2" for "trn2"."""
    return _target(target)["name"]


def engine_clock_hz(target: Target | str, engine: str) -> float:
    """Clock of one engine (Tensor, Vector, Scalar, GpSimd, Sync) of a Neuron target, Hz."""
    engines = _target(target)["engines"]
    if engine not in engines:
        raise ValueError(f"unknown engine {engine!r}; valid engines: {', '.join(engines)}")
    return float(_val(engines[engine]["clock_hz"]))


def neuron_flag(target: Target | str, name: str) -> bool:
    """A boolean property of a Neuron target (e.g. "tensor_didt_throttling"); False when absent."""
    return bool(_val(_target(target).get(name, False)))


def model_param(name: str) -> float:
    """A simulator model constant (DMA latency, overhead cycles...) from the table's ``model`` section."""
    model = raw_table()["model"]
    if name not in model:
        raise ValueError(f"unknown model parameter {name!r}; valid: {', '.join(model)}")
    return float(_val(model[name]))


def host_model_params() -> dict[str, tuple[float, str, str]]:
    """The host dispatch model's constants: name -> (value, unit, source). All are modelling assumptions
    (no public per-op figures for TorchNeuron exist); ``NeuronConfig(host_model=...)`` overrides them."""
    section = raw_table()["host_model"]
    return {k: (float(v["value"]), str(v.get("unit", "")), str(v["source"])) for k, v in section.items()
            if isinstance(v, dict)}


def validate_host_model(overrides: dict[str, Any] | None) -> dict[str, float]:
    """Check host-model overrides: known names, finite values >= 0. Returns them as floats; raises
    ``ValueError`` naming the valid parameters otherwise."""
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise ValueError(f"host_model: expected a dict of parameter -> number, found {overrides!r}")
    valid = host_model_params()
    out: dict[str, float] = {}
    for k, v in overrides.items():
        if k not in valid:
            raise ValueError(f"host_model: unknown parameter {k!r}; valid: {', '.join(valid)}")
        try:
            f = float(v)
        except (TypeError, ValueError):
            f = float("nan")
        if isinstance(v, bool) or not (f >= 0 and f != float("inf")):
            raise ValueError(f"host_model: {k} must be a finite number >= 0, found {v!r}")
        out[k] = f
    return out


@cache
def _neuron_spec_cached(key: str) -> bytes:
    t = _target(key)
    sources: list[str] = [f"{t['name']} ({key}) from the project hardware table"]
    spec = pb.HardwareSpec()

    def scalar(field: str, cast: type = float) -> None:
        entry = t[field]
        setattr(spec, field, cast(_val(entry)))
        sources.append(f"{field}: {entry['source']}")

    scalar("num_cores", int)
    scalar("tensor_engine_num_rows", int)
    scalar("tensor_engine_num_cols", int)
    for f in ("hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s", "hbm_bandwidth_per_core_bytes_per_s",
              "dma_bandwidth_per_core_bytes_per_s", "sbuf_bytes_per_core", "psum_bytes_per_core",
              "interconnect_bandwidth_bytes_per_s"):
        scalar(f)
    scalar("dma_engines_per_core", int)
    scalar("cc_cores", int)
    for dtype, entry in t["peak_flops_per_s"].items():
        spec.peak_flops_per_s[dtype] = float(_val(entry))
        sources.append(f"peak_flops_per_s[{dtype}]: {entry['source']}")
    for name in _ENGINE_ORDER:
        e = t["engines"][name]
        spec.engines.add(name=name, clock_hz=float(_val(e["clock_hz"])), lanes=int(e.get("lanes", 0)))
        sources.append(f"{name} clock: {e['clock_hz']['source']}")
        if "fp32_flops_per_s" in e:
            spec.vector_flops_per_s[name] = float(_val(e["fp32_flops_per_s"]))
            sources.append(f"{name} FP32 FLOP/s: {e['fp32_flops_per_s']['source']}")
    legend = raw_table()["sources"]
    sources.append("; ".join(f"{k} = {v}" for k, v in legend.items() if not k.startswith(("NV-", "AMD-", "META-"))))
    spec.source = " | ".join(sources)
    return spec.SerializeToString()


def neuron_spec(target: Target | str) -> pb.HardwareSpec:
    """HardwareSpec of one Neuron target (trn1, inf2, trn2, trn3), per-core peaks, with sources.

    Raises ValueError naming the valid targets for an unknown one."""
    key = str(target).strip().lower()
    _target(key)
    return pb.HardwareSpec.FromString(_neuron_spec_cached(key))


def neuron_device(target: Target | str, index: int = 0, simulated: bool = True) -> pb.Device:
    """A ``pb.Device`` for a Neuron chip: kind = target, name e.g. "Trainium2", spec = ``neuron_spec``."""
    key = str(target).strip().lower()
    t = _target(key)
    dev = pb.Device(index=int(index), kind=key, name=t["name"], simulated=bool(simulated))
    dev.spec.CopyFrom(neuron_spec(key))
    dev.properties["neuron_core"] = t.get("neuron_core", "")
    return dev


def adjusted_flops_multiplier(target: Target | str, dtype: str) -> float:
    """BF16-equivalent FLOP multiplier (Explorer ``adjusted_flops``) for a dtype on a target; 1.0 when
    the table has no entry for the dtype (e.g. integer or unknown dtypes)."""
    mult = _target(target)["adjusted_flops_multiplier"]
    d = normalize_dtype(dtype) or str(dtype).lower()
    v = mult.get(d)
    return float(v) if isinstance(v, (int, float)) else 1.0


def _gpu_entry(name: str, total_mem_bytes: float | None) -> dict[str, Any] | None:
    low = str(name or "").lower()
    if not low:
        return None
    best_len, fams = 0, []
    for e in raw_table()["gpus"]:
        m = max((len(p) for p in e["match"] if p in low), default=0)
        if m > best_len:
            best_len, fams = m, [e]
        elif m and m == best_len:
            fams.append(e)
    if not fams:
        return None
    tokened = [e for e in fams if e["tokens"] and any(tok in low for tok in e["tokens"])]
    pool = tokened or [e for e in fams if not e["tokens"]] or fams
    if total_mem_bytes is None or not total_mem_bytes or total_mem_bytes != total_mem_bytes:
        return pool[0]
    return min(pool, key=lambda e: abs(e["hbm_capacity_bytes"] - float(total_mem_bytes)))


def gpu_variant_name(name: str, total_mem_bytes: float | None = None) -> str | None:
    """The table variant a GPU device name resolves to (e.g. "NVIDIA A100 40GB SXM"), None if unknown."""
    e = _gpu_entry(name, total_mem_bytes)
    return None if e is None else e["variant"]


def gpu_entry_by_properties(kind: str, cores: int, total_mem_bytes: float | None,
                            compute_capability: str = "") -> dict[str, Any] | None:
    """The table entry of a GPU identified by its properties (Kineto ``deviceProperties``: ``numSms`` /
    CU count, ``totalGlobalMem``, ``computeMajor``.``computeMinor``), for a device whose name the table does
    not know ("AMD Radeon Graphics" on an MI250). The entries of that kind with that core count and compute
    capability, the memory size within 10 %; None when none fits or the fitting entries' peaks differ by more
    than 1 % (an MI250 GCD and an MI210 share 104 CUs, gfx90a and 64 GB, and their peaks)."""
    fits = [e for e in raw_table()["gpus"] if e["kind"] == kind and e.get("properties", {}).get("cores") == cores
            and (not compute_capability or e["properties"].get("compute_capability") == compute_capability)]
    if total_mem_bytes:
        fits = [e for e in fits if abs(e["hbm_capacity_bytes"] - total_mem_bytes) <= 0.1 * e["hbm_capacity_bytes"]]
    if not fits or any(not _same_peaks(e, fits[0]) for e in fits):
        return None
    return fits[0]


def _same_peaks(a: dict[str, Any], b: dict[str, Any]) -> bool:
    pa, pb = a["peak_flops_per_s"], b["peak_flops_per_s"]
    return pa.keys() == pb.keys() and all(abs(pa[k] - pb[k]) <= 0.01 * max(pa[k], pb[k]) for k in pa)


def gpu_spec(name: str, total_mem_bytes: float | None = None, entry: dict[str, Any] | None = None
             ) -> pb.HardwareSpec | None:
    """HardwareSpec of a GPU from its device name (Kineto ``deviceProperties.name``), or None if unknown.

    Case-insensitive substring match ("A100-PG509-200", "NVIDIA H100 80GB HBM3", "AMD Instinct MI300X",
    "ARTEMIS"); name tokens ("PCIe", "NVL") and then the memory size closest to ``total_mem_bytes`` pick
    the variant. Values are per whole GPU (num_cores = 1), dense peaks."""
    e = entry or _gpu_entry(name, total_mem_bytes)
    if e is None:
        return None
    spec = pb.HardwareSpec(num_cores=1, hbm_capacity_bytes=float(e["hbm_capacity_bytes"]),
                           hbm_bandwidth_bytes_per_s=float(e["hbm_bandwidth_bytes_per_s"]),
                           hbm_bandwidth_per_core_bytes_per_s=float(e["hbm_bandwidth_bytes_per_s"]),
                           interconnect_bandwidth_bytes_per_s=float(e["interconnect_bandwidth_bytes_per_s"]))
    for d, v in e["peak_flops_per_s"].items():
        spec.peak_flops_per_s[d] = float(v)
    for k, v in e.get("vector_flops_per_s", {}).items():
        spec.vector_flops_per_s[k] = float(v)
    doc = e["source"].split(":", 1)[0]
    spec.source = f"{e['variant']}: {e['source']} [{doc} = {raw_table()['sources'].get(doc, doc)}]"
    return spec


def device_kind_for_gpu(name: str) -> str:
    """Device kind of a GPU name: "rocm" (AMD/Instinct/MI*), "mtia" (MTIA/ARTEMIS), else "cuda"."""
    e = _gpu_entry(name, None)
    if e is not None:
        return e["kind"]
    low = str(name or "").lower()
    if any(k in low for k in ("amd", "instinct", "radeon", "gfx")):
        return "rocm"
    if any(k in low for k in ("mtia", "artemis")):
        return "mtia"
    return "cuda"
