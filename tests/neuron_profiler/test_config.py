"""NeuronConfig / ProfileMode validation and the PrivateUse1 "neuron" registration."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from neuron_profiler.config import NeuronConfig, ProfileMode, parse_nc_ranges  # noqa: E402
from neuron_profiler.hardware import Target  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def test_defaults_and_subclassing(tmp_path):
    cfg = NeuronConfig(profile_output_dir=tmp_path / "out")
    assert isinstance(cfg, torch._C._profiler._ExperimentalConfig)
    assert cfg.modes == (ProfileMode.DEVICE, ProfileMode.RUNTIME)
    assert cfg.target == "trn2" and cfg.capture_enabled_for_nc is None
    assert (tmp_path / "out").is_dir()
    d = json.loads(json.dumps(cfg.to_dict()))
    assert d["modes"] == ["DEVICE", "RUNTIME"] and d["target"] == "trn2"


@pytest.mark.parametrize("spec,expected", [("0,1,2-5", (0, 1, 2, 3, 4, 5)), ("3", (3,)), (" 4 , 0-1 ", (0, 1, 4)),
                                           ("all", None), ("", None), (None, None), ([2, 0, 2], (0, 2)), (7, (7,))])
def test_core_ranges(spec, expected):
    assert parse_nc_ranges(spec) == expected


@pytest.mark.parametrize("spec", ["1-", "a", "5-2", "-1", "0,,1", "1;2", "0-1-2"])
def test_malformed_core_ranges_name_the_syntax(spec, tmp_path):
    with pytest.raises(ValueError, match="capture_enabled_for_nc.*(0,1,2-5|2-5)"):
        NeuronConfig(profile_output_dir=tmp_path, capture_enabled_for_nc=spec)


def test_unknown_mode_and_target_name_valid_values(tmp_path):
    with pytest.raises(ValueError, match="DEVICE, RUNTIME, CPU_UTIL, HOST_MEMORY"):
        NeuronConfig(modes=["DEVICE", "GPU"], profile_output_dir=tmp_path)
    with pytest.raises(ValueError, match="trn1, inf2, trn2, trn3"):
        NeuronConfig(target="h100", profile_output_dir=tmp_path)
    with pytest.raises(ValueError) as e:
        NeuronConfig(target="trn9", profile_output_dir=tmp_path)
    assert str(e.value) == "unknown Neuron target 'trn9'; valid targets: trn1, inf2, trn2, trn3"
    cfg = NeuronConfig(target="trn1", profile_output_dir=tmp_path)  # the public field takes a string
    assert cfg.target == "trn1" and cfg.target is Target.TRN1 and cfg.to_dict()["target"] == "trn1"
    assert type(cfg.to_dict()["target"]) is str and "target='trn1'" in repr(cfg)
    with pytest.raises(ValueError, match="auto, simulated, hardware"):
        NeuronConfig(runtime="gpu", profile_output_dir=tmp_path)
    assert NeuronConfig(modes=["cpu_util", ProfileMode.HOST_MEMORY], profile_output_dir=tmp_path).modes == (
        ProfileMode.CPU_UTIL, ProfileMode.HOST_MEMORY)


def test_single_mode_and_bad_run_id(tmp_path):
    with pytest.raises(ValueError, match="list of ProfileMode"):
        NeuronConfig(modes="DEVICE", profile_output_dir=tmp_path)
    with pytest.raises(ValueError, match="run_id"):
        NeuronConfig(run_id="../escape", profile_output_dir=tmp_path)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True])
def test_bad_max_events(bad, tmp_path):
    with pytest.raises(ValueError, match="max_events_per_nc"):
        NeuronConfig(max_events_per_nc=bad, profile_output_dir=tmp_path)


def test_unwritable_output_dir_fails_before_profiling(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    with pytest.raises(ValueError, match="profile_output_dir .*not writable"):
        NeuronConfig(profile_output_dir=blocker / "sub")


def test_custom_profiler_config_must_be_json(tmp_path):
    with pytest.raises(ValueError, match="JSON object"):
        NeuronConfig(profile_output_dir=tmp_path, custom_profiler_config="max_events_per_nc=10")
    cfg = NeuronConfig(profile_output_dir=tmp_path, custom_profiler_config={"b": 1, "a": "x"})
    assert json.loads(cfg.custom_profiler_config_json) == {"a": "x", "b": 1}
    assert "=" not in cfg.custom_profiler_config_json


def test_neuron_backend_registration_keeps_accelerator_probing_working(tmp_path):
    from neuron_profiler import NeuronProfiler
    NeuronProfiler(NeuronConfig(profile_output_dir=tmp_path))
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.accelerator.is_available() is False
    assert torch.accelerator.current_accelerator(check_available=True) is None
    assert torch.accelerator.device_count() == 0
    assert torch.profiler.ProfilerActivity.PrivateUse1 in torch.profiler.supported_activities()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(0)  # seeds the (stub) neuron device module without warnings
    with pytest.raises(NotImplementedError, match="from the 'neuron' backend"):
        torch.empty(1, device="neuron")  # a name only: no kernels, no devices


def test_package_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import neuron_profiler\n"
            "assert neuron_profiler.__version__\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
            "try:\n    neuron_profiler.NeuronConfig\nexcept ImportError:\n    print('lazy-ok')\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "lazy-ok" in out.stdout


def test_no_registration_when_a_real_neuron_backend_is_loaded(tmp_path):
    code = ("import sys, types, torch\n"
            "sys.modules['torch_neuronx'] = types.ModuleType('torch_neuronx')\n"
            "from neuron_profiler import NeuronConfig, NeuronProfiler\n"
            f"NeuronProfiler(NeuronConfig(profile_output_dir={str(tmp_path)!r}))\n"
            "print(torch._C._get_privateuse1_backend_name(), torch.accelerator.current_accelerator())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={"KINETO_LOG_LEVEL": "6", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["privateuseone", "None"]
