"""ModuleRecorder names the model a window ran: the outermost module with parameters, unwrapped from
torch.compile / DDP-style wrappers, that took the most forward time; a parameterless loss module and a
compiled GraphModule are not models."""
from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

from neuron_profiler.capture.modules import ModuleRecorder, unwrapped  # noqa: E402


class Net(torch.nn.Module):
    def __init__(self, n: int = 8) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(n, n)

    def forward(self, x):
        time.sleep(0.002)
        return self.fc(x)


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return x


class Wrapper(torch.nn.Module):  # a DistributedDataParallel stand-in: the model is .module
    def __init__(self, module: torch.nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


Wrapper.__name__ = "DistributedDataParallel"


def test_unwrapped_sees_through_wrappers():
    net = Net()
    assert unwrapped(Wrapper(net)) is net
    assert unwrapped(net) is net


def test_model_is_the_parameterised_root_with_most_forward_time():
    rec = ModuleRecorder()
    rec.start()
    try:
        net, small, loss = Wrapper(Net()), Small(), torch.nn.MSELoss()
        x = torch.zeros(2, 8)
        for _ in range(3):
            y = net(x)
            small(x)
            loss(y, x)  # a root call without parameters: not a model
    finally:
        rec.stop()
    assert rec.model() == {"model": "Net", "model_parameters": str(8 * 8 + 8)}
    assert any(name == "DistributedDataParallel.module.fc" for _, _, name in rec.intervals)


def test_no_module_no_model():
    rec = ModuleRecorder()
    rec.start()
    rec.stop()
    assert rec.model() == {}
