"""The trace format schema. `neuron_trace.proto` is the source of truth; `neuron_trace_pb2` is generated
from it (regenerate with `python -m schemas.regenerate`; a test fails when it is stale)."""
from schemas import neuron_trace_pb2 as pb

__all__ = ["pb"]
