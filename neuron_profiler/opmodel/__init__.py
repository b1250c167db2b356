"""The op model (torch-free): op classes and the device work of an op signature from its recorded shapes.

One definition shared by capture (the ``flops`` column), the simulated runtime (what each op asks of a
NeuronCore) and analysis (FLOPs and bytes of imported GPU ops)::

    from neuron_profiler.opmodel import lower_signature
    w = lower_signature("aten::mm", "[[256,512],[512,1024]]", '["c10::BFloat16","c10::BFloat16"]')
    w.cls, w.flops, w.gemm      # "matmul", 268435456, (1, 256, 512, 1024)
    w.read_bytes, w.write_bytes # what the op moves (an in-place slice update writes the slice only)
"""
from .classes import COMPUTE_CLASSES, TENSOR_ENGINE_CLASSES, classify, is_composite, known_no_work
from .shapes import Tensor, parse_json_list, tensor_args
from .traffic import FLOPS_PER_ELEMENT, Traffic, elementwise_flops, traffic
from .work import OpWork, lower_signature, wants_concrete

__all__ = ["classify", "known_no_work", "is_composite", "COMPUTE_CLASSES", "TENSOR_ENGINE_CLASSES", "Tensor",
           "parse_json_list", "tensor_args", "OpWork", "lower_signature", "wants_concrete", "Traffic", "traffic",
           "elementwise_flops", "FLOPS_PER_ELEMENT"]
