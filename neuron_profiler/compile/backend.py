"""``torch.compile(model, backend="neuron")``: a Dynamo backend that records each graph for the simulated
NeuronCore and runs it on this machine's CPU.

Dynamo finds it through the ``torch_dynamo_backends`` entry point. Training works through AOT autograd:
the forward and backward aten graphs are each registered as a graph program (``registry``) and each call
runs inside a ``neuron::graph <id>`` host range. The graph itself runs with PyTorch's eager kernels (the
numbers are the model's), so its inner aten ops appear nested in that range; the simulated runtime treats
them as parts of one device program: one launch per graph call, elementwise chains fused, intermediates
kept in SBUF when they fit, weights resident in HBM.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import torch

from neuron_profiler.compile import registry

__all__ = ["neuron_backend", "graph_program", "kineto_dtype"]

_KINETO_DTYPE = {torch.float32: "float", torch.float64: "double", torch.float16: "c10::Half",
                 torch.bfloat16: "c10::BFloat16", torch.int64: "long int", torch.int32: "int",
                 torch.int16: "short int", torch.int8: "signed char", torch.uint8: "unsigned char", torch.bool: "bool"}


def kineto_dtype(dt: torch.dtype) -> str:
    """``dt`` spelt as Kineto's ``Input type`` spells it ("float", "c10::BFloat16", ...)."""
    if dt in _KINETO_DTYPE:
        return _KINETO_DTYPE[dt]
    return "c10::" + str(dt).replace("torch.", "").title().replace("_", "")


def _dims(shape: Any) -> list[int]:
    """A shape as ints: a symbolic size (dynamic shapes) as the size it was traced with."""
    out = []
    for d in shape:
        if isinstance(d, int):
            out.append(d)
            continue
        node = getattr(d, "node", None)
        hint = getattr(node, "hint", None)
        out.append(int(hint) if hint is not None else int(d))
    return out


def _value(node: Any) -> Any:
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else None


def _arg_info(a: Any, index: dict[Any, int]) -> tuple[Any, str, int]:
    """(shape, dtype spelling, producer) of one positional argument, Kineto-style; producer -1 = a graph
    input, -2 = not a tensor."""
    if isinstance(a, torch.fx.Node):
        v = _value(a)
        if isinstance(v, torch.Tensor):
            return _dims(v.shape), kineto_dtype(v.dtype), index.get(a, -1)
        return [], "Scalar", -2
    if isinstance(a, (list, tuple)) and a and all(isinstance(x, torch.fx.Node) for x in a):
        vals = [_value(x) for x in a]
        if all(isinstance(v, torch.Tensor) for v in vals):
            return [_dims(v.shape) for v in vals], kineto_dtype(vals[0].dtype), index.get(a[0], -1)
    return [], "Scalar", -2


def _op_name(target: Any) -> str | None:
    schema = getattr(target, "_schema", None)
    if schema is None:
        return None
    return schema.name if "::" in schema.name else f"aten::{schema.name}"


def graph_program(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """The graph program of an aten-level FX graph whose nodes carry FakeTensor ``meta["val"]``: per node its
    op name, input shapes and dtypes (JSON, as Kineto records them), the producing node of each input and
    its output bytes; and the nodes whose values leave the graph."""
    nodes: list[dict[str, Any]] = []
    index: dict[Any, int] = {}
    outputs: list[int] = []
    for n in gm.graph.nodes:
        if n.op == "output":
            flat = n.args[0] if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
            outputs = [index[x] for x in flat if isinstance(x, torch.fx.Node) and x in index]
            continue
        if n.op != "call_function":
            continue
        name = _op_name(n.target)
        if name is None:  # operator.getitem on multi-output ops: alias of its source
            src = n.args[0] if n.args else None
            if isinstance(src, torch.fx.Node) and src in index:
                index[n] = index[src]
            continue
        shapes, dtypes, producers = [], [], []
        for a in n.args:
            s, d, p = _arg_info(a, index)
            shapes.append(s)
            dtypes.append(d)
            producers.append(p)
        v = _value(n)
        first = v[0] if isinstance(v, (tuple, list)) and v and isinstance(v[0], torch.Tensor) else v
        out_bytes = math.prod(_dims(first.shape)) * first.element_size() if isinstance(first, torch.Tensor) else 0
        index[n] = len(nodes)
        nodes.append({"name": name, "shapes": json.dumps(shapes, separators=(",", ":")),
                      "dtypes": json.dumps(dtypes, separators=(",", ":")), "inputs": producers, "out_bytes": out_bytes})
    return {"nodes": nodes, "outputs": outputs}


def _compiler(kind: str) -> Callable[[torch.fx.GraphModule, list], Callable]:
    def compile_graph(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        from functorch.compile import make_boxed_func
        gid = registry.register(kind, graph_program(gm))
        label = registry.GRAPH_PREFIX + gid
        run = make_boxed_func(gm.forward)

        def call(args: list) -> Any:
            with torch.autograd.profiler.record_function(label):
                return run(args)
        call._boxed_call = True  # type: ignore[attr-defined]
        return call
    return compile_graph


def neuron_backend(gm: torch.fx.GraphModule, example_inputs: list, **kwargs: Any) -> Callable:
    """The Dynamo backend registered as "neuron" (``torch.compile(model, backend="neuron")``)."""
    from torch._dynamo.backends.common import aot_autograd
    return aot_autograd(fw_compiler=_compiler("fw"), bw_compiler=_compiler("bw"), **kwargs)(gm, example_inputs)
