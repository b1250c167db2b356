"""The hardware table: sourced values, accessor behaviour, GPU name matching, dtype normalisation."""
import json
import math
from pathlib import Path

import pytest

from neuron_profiler import hardware as hw
from schemas import pb


def test_targets_and_unknown_target():
    assert hw.TARGETS == ("trn1", "inf2", "trn2", "trn3")
    with pytest.raises(ValueError, match="trn2"):
        hw.neuron_spec("trn9")


def test_target_values_are_the_hardware_table_keys():
    table_keys = list(hw.raw_table()["neuron"])  # read from the JSON, not from the enum
    assert [t.value for t in hw.Target] == table_keys
    for key in table_keys:
        t = hw.Target.parse(key)
        assert t is hw.Target(key) and t == key and str(t) == key and f"{t}" == key
        assert hw.Target.parse(f"  {key.upper()} ") is t  # blanks and case, as the table's accessors accept
        assert hw.Target.parse(t) is t
        assert hw.raw_table()["neuron"][t] is hw.raw_table()["neuron"][key]  # a str key: hashes like its value
        assert hw.target_display_name(t) == hw.target_display_name(key)


@pytest.mark.parametrize("bad", ["trn9", "", "h100", "trn2 trn3", 2])
def test_target_parse_rejects_unknown_with_one_line_naming_the_targets(bad):
    with pytest.raises(hw.UnknownTargetError) as e:
        hw.Target.parse(bad)
    msg = str(e.value)
    assert isinstance(e.value, ValueError) and "\n" not in msg
    assert repr(bad) in msg and "trn1, inf2, trn2, trn3" in msg


def test_internal_signatures_carry_target():
    import typing

    from neuron_profiler.projection import project_trace
    from neuron_profiler.runtime.simulated.collectives import Topology
    from neuron_profiler.runtime.simulated.params import CoreParams
    from neuron_profiler.runtime.simulated.runtime import SimulatedRuntime
    assert typing.get_type_hints(CoreParams)["target"] is hw.Target
    assert typing.get_type_hints(Topology)["target"] is hw.Target
    assert typing.get_type_hints(CoreParams.for_target)["target"] is hw.Target
    assert hw.Target in typing.get_args(typing.get_type_hints(project_trace)["target"])
    rt = SimulatedRuntime("TRN1")  # converted at the edge
    assert rt.target is hw.Target.TRN1 and rt.spec == hw.neuron_spec("trn1")


@pytest.mark.parametrize("target", ["trn1", "inf2", "trn2", "trn3"])
def test_neuron_spec_complete_and_consistent(target):
    s = hw.neuron_spec(target)
    assert isinstance(s, pb.HardwareSpec)
    for field in ("num_cores", "hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s", "hbm_bandwidth_per_core_bytes_per_s",
                  "dma_bandwidth_per_core_bytes_per_s", "sbuf_bytes_per_core", "psum_bytes_per_core",
                  "interconnect_bandwidth_bytes_per_s", "tensor_engine_num_rows", "tensor_engine_num_cols",
                  "dma_engines_per_core", "cc_cores"):
        assert getattr(s, field) > 0, field
    # Explorer's peak formula: rows x cols x 2 x Tensor clock (within the rounding of the table).
    clock = {e.name: e.clock_hz for e in s.engines}["Tensor"]
    formula = s.tensor_engine_num_rows * s.tensor_engine_num_cols * 2 * clock
    assert s.peak_flops_per_s["bfloat16"] == pytest.approx(formula, rel=1e-3)
    assert s.peak_flops_per_s["float32"] == pytest.approx(s.peak_flops_per_s["bfloat16"] / 4, rel=1e-2)
    assert {e.name for e in s.engines} == {"Tensor", "Vector", "Scalar", "GpSimd", "Sync"}
    assert set(s.vector_flops_per_s) == {"Vector", "Scalar", "GpSimd"}
    # one HBM stack is a fraction of the chip bandwidth
    assert s.hbm_bandwidth_per_core_bytes_per_s < s.hbm_bandwidth_bytes_per_s
    # sources travel with the spec, including the uncertain choices
    assert "S22" in s.source and "peak_flops_per_s[bfloat16]" in s.source


def test_trn2_published_values():
    s = hw.neuron_spec("trn2")
    assert s.num_cores == 8
    assert s.hbm_capacity_bytes == 96 * 2**30
    assert s.peak_flops_per_s["bfloat16"] * s.num_cores == pytest.approx(667e12, rel=0.06)
    assert s.peak_flops_per_s["fp8"] == pytest.approx(2 * s.peak_flops_per_s["bfloat16"], rel=1e-3)
    assert "UNCERTAIN" in s.source and "435" in s.source  # DMA bandwidth: both values recorded


def test_every_table_value_has_a_source():
    table = json.loads((Path(hw.__file__).parent / "hardware_table.json").read_text())

    def walk(node, path):
        if isinstance(node, dict):
            if "value" in node:
                assert node.get("source"), path
            for k, v in node.items():
                walk(v, f"{path}.{k}")
    walk(table["neuron"], "neuron")
    walk(table["model"], "model")
    for g in table["gpus"]:
        assert g["source"].split(":")[0] in table["sources"], g["variant"]


def test_neuron_device():
    d = hw.neuron_device("trn2", index=3, simulated=True)
    assert (d.index, d.kind, d.name, d.simulated) == (3, "trn2", "Trainium2", True)
    assert d.spec.num_cores == 8


@pytest.mark.parametrize("name,mem,variant,kind", [
    ("NVIDIA A100-PG509-200", 42297524224, "NVIDIA A100 40GB SXM", "cuda"),
    ("NVIDIA A100-SXM4-80GB", 85e9, "NVIDIA A100 80GB SXM", "cuda"),
    ("NVIDIA H100 80GB HBM3", 85018279936, "NVIDIA H100 SXM 80GB HBM3", "cuda"),
    ("NVIDIA H100 PCIe", None, "NVIDIA H100 PCIe 80GB", "cuda"),
    ("Tesla V100-SXM2-16GB", 16.9e9, "Tesla V100 SXM2 16GB", "cuda"),
    ("Tesla V100-SXM2-32GB", 34089730048, "Tesla V100 SXM2 32GB", "cuda"),
    ("NVIDIA B200", None, "NVIDIA B200 (HGX)", "cuda"),
    ("AMD Instinct MI250X", None, "AMD Instinct MI250X", "rocm"),
    ("AMD Instinct MI250", None, "AMD Instinct MI250", "rocm"),
    ("AMD Instinct MI300X", 206141652992, "AMD Instinct MI300X", "rocm"),
    ("ARTEMIS", None, "Meta MTIA v2", "mtia"),
])
def test_gpu_matching(name, mem, variant, kind):
    assert hw.gpu_variant_name(name, mem) == variant
    assert hw.gpu_variant_name(name.lower(), mem) == variant
    s = hw.gpu_spec(name, mem)
    assert s.num_cores == 1 and s.hbm_bandwidth_bytes_per_s > 0 and s.source.startswith(variant)
    assert hw.device_kind_for_gpu(name) == kind


def test_gpu_values_and_unknown():
    h100 = hw.gpu_spec("NVIDIA H100 80GB HBM3")
    assert h100.peak_flops_per_s["bfloat16"] == pytest.approx(989.5e12)
    assert h100.peak_flops_per_s["fp8"] == pytest.approx(2 * h100.peak_flops_per_s["bfloat16"])
    assert hw.gpu_spec("A100", 40 * 2**30).hbm_bandwidth_bytes_per_s == pytest.approx(1555e9)
    assert "bfloat16" not in hw.gpu_spec("Tesla V100-SXM2-32GB").peak_flops_per_s
    assert hw.gpu_spec("Some Unknown Accelerator") is None
    assert hw.gpu_spec("") is None
    assert hw.device_kind_for_gpu("Radeon Pro W7900") == "rocm"


@pytest.mark.parametrize("s,canon,size", [
    ("float", "float32", 4), ("c10::BFloat16", "bfloat16", 2), ("BFloat16", "bfloat16", 2),
    ("Half", "float16", 2), ("c10::Half", "float16", 2), ("torch.bfloat16", "bfloat16", 2),
    ("fp32", "float32", 4), ("long int", "int64", 8), ("int", "int32", 4), ("double", "float64", 8),
    ("unsigned char", "uint8", 1), ("signed char", "int8", 1), ("bool", "bool", 1),
    ("c10::Float8_e4m3fn", "fp8", 1), ("c10::complex<float>", "complex64", 8), ("torch.float16", "float16", 2),
])
def test_normalize_dtype(s, canon, size):
    assert hw.normalize_dtype(s) == canon
    assert hw.dtype_size_bytes(s) == size
    assert hw.dtype_size_bytes(canon) == size


@pytest.mark.parametrize("s", ["", "Scalar", "TensorList", "garbage", None])
def test_normalize_dtype_unknown(s):
    assert hw.normalize_dtype(s) == ""
    assert hw.dtype_size_bytes(s or "") == 0


def test_adjusted_flops_multiplier():
    assert hw.adjusted_flops_multiplier("trn2", "float") == 4.0
    assert hw.adjusted_flops_multiplier("trn2", "fp8") == 0.5
    assert hw.adjusted_flops_multiplier("trn1", "fp8") == 1.0
    assert hw.adjusted_flops_multiplier("trn3", "mxfp8") == 0.25
    assert hw.adjusted_flops_multiplier("trn2", "c10::BFloat16") == 1.0
    with pytest.raises(ValueError):
        hw.adjusted_flops_multiplier("gpu", "float")


def test_model_params():
    assert hw.model_param("dma_fixed_latency_ns") == 1300
    assert hw.model_param("dma_efficient_size_bytes") == 32768
    with pytest.raises(ValueError, match="dma_fixed_latency_ns"):
        hw.model_param("nope")
    assert math.isclose(hw.engine_clock_hz("trn2", "Vector"), 0.96e9)
