"""``torch.compile(model, backend="neuron")`` for the simulated NeuronCore (see ``backend``)."""
from __future__ import annotations

from typing import Any

__all__ = ["neuron_backend"]


def neuron_backend(gm: Any, example_inputs: list, **kwargs: Any) -> Any:
    """Dynamo backend "neuron": records each compiled graph for the simulator, runs it on the CPU."""
    from neuron_profiler.compile.backend import neuron_backend as backend
    return backend(gm, example_inputs, **kwargs)
