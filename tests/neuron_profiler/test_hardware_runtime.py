"""HardwareRuntime: clear failure without a Neuron device, and the inspect environment it sets."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from neuron_profiler.runtime.base import RuntimeUnavailableError  # noqa: E402
from neuron_profiler.runtime.hardware import HardwareRuntime, inspect_env  # noqa: E402


def test_hardware_runtime_unavailable_here(tmp_path):
    assert HardwareRuntime.available() is False
    with pytest.raises(RuntimeUnavailableError, match="torch_neuronx.*|Neuron device"):
        HardwareRuntime.check_available()
    pytest.importorskip("torch")
    from neuron_profiler.config import NeuronConfig
    with pytest.raises(RuntimeUnavailableError, match="runtime='simulated'"):
        NeuronConfig(runtime="hardware", profile_output_dir=tmp_path)


def test_inspect_env_mirrors_config():
    from neuron_profiler.config import ProfileMode
    cfg = SimpleNamespace(max_events_per_nc=500, capture_enabled_for_nc=(0, 2, 3),
                          has=lambda m: m in (ProfileMode.DEVICE, ProfileMode.CPU_UTIL))
    env = inspect_env(cfg, "/tmp/x")
    assert env["NEURON_RT_INSPECT_ENABLE"] == "1" and env["NEURON_RT_INSPECT_OUTPUT_DIR"] == "/tmp/x"
    assert env["NEURON_RT_INSPECT_DEVICE_PROFILE"] == "session" and env["NEURON_RT_INSPECT_SYSTEM_PROFILE"] == "0"
    assert env["NEURON_RT_INSPECT_CPU_UTIL"] == "1" and env["NEURON_RT_INSPECT_HOST_MEMORY"] == "0"
    assert env["NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC"] == "500"
    assert env["NEURON_RT_INSPECT_EVENT_FILTER_NC"] == "0,2,3"


# The Neuron Explorer converter's tests live with the importer: tests/neuron_profiler/test_import_neuron_explorer.py
