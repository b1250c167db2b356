"""The op model (torch-free): the bytes an op moves, FLOPs per element, and saying so when they are unknown."""
from __future__ import annotations

import json

import pytest

from neuron_profiler.opmodel import FLOPS_PER_ELEMENT, known_no_work, lower_signature

BF, F32 = "c10::BFloat16", "float"


def _w(name, shapes, dtypes, concrete=None):
    return lower_signature(name, json.dumps(shapes), json.dumps(dtypes), 0, concrete)


@pytest.mark.parametrize("name,shapes,dtypes,read,write", [
    # matmul: read both operands, write the output (2 bytes per bf16 element)
    ("aten::mm", [[64, 256], [256, 96]], [BF, BF], (64 * 256 + 256 * 96) * 2, 64 * 96 * 2),
    # elementwise: read the inputs, write the broadcast output
    ("aten::add", [[8, 16], [16], []], [F32, F32, "Scalar"], (8 * 16 + 16) * 4, 8 * 16 * 4),
    # KV-cache update: reads the token (and index), writes one token's slice, not the 256 MiB cache
    ("aten::index_put_", [[8, 32, 4096, 128], [[1]], [8, 32, 1, 128], []], [BF, "TensorList", BF, "Scalar"],
     8 * 32 * 128 * 2 + 4, 8 * 32 * 128 * 2),
    ("aten::index_copy_", [[8, 32, 4096, 128], [], [1], [8, 32, 1, 128]], [BF, "Scalar", "long int", BF],
     8 + 8 * 32 * 128 * 2, 8 * 32 * 128 * 2),
    # copy_ into a view: read the source, write the destination view
    ("aten::copy_", [[8, 32, 1, 128], [8, 32, 1, 128], []], [BF, BF, "Scalar"], 8 * 32 * 128 * 2, 8 * 32 * 128 * 2),
    # the functional slice update, as the issue asks: the slice is what moves
    ("aten::slice_scatter", [[8, 32, 4096, 128], [8, 32, 1, 128], [], [], [], []], [BF, BF] + ["Scalar"] * 4,
     8 * 32 * 128 * 2, 8 * 32 * 128 * 2),
    # embedding lookup: the indices and the 128 rows fetched, not the 30522-row table
    ("aten::embedding", [[30522, 512], [1, 128], [], [], []], [BF, "long int", "Scalar", "Scalar", "Scalar"],
     128 * 8 + 128 * 512 * 2, 128 * 512 * 2),
    ("aten::index_select", [[30522, 512], [], [128]], [BF, "Scalar", "long int"], 128 * 8 + 128 * 512 * 2,
     128 * 512 * 2),
    ("aten::view", [[8, 16], []], [F32, ""], 0, 0),
])
def test_bytes_moved(name, shapes, dtypes, read, write):
    w = _w(name, shapes, dtypes)
    assert (w.read_bytes, w.write_bytes) == (read, write)
    assert w.bytes_known and w.moved_bytes == read + write


def test_index_select_uses_the_recorded_dim():
    w = _w("aten::index_select", [[64, 100], [], [10]], [F32, "Scalar", "long int"], concrete=["", "1", ""])
    assert w.write_bytes == 10 * 64 * 4 and w.note == ""            # 10 columns of 64 rows
    assert "assumed 0" in _w("aten::index_select", [[64, 100], [], [10]], [F32, "Scalar", "long int"]).note


def test_simulator_fields_keep_their_meaning():
    """inputs / in_bytes / out_bytes still size every tensor argument (what the simulator stages)."""
    w = _w("aten::index_put_", [[8, 32, 4096, 128], [[1]], [8, 32, 1, 128], []], [BF, "TensorList", BF, "Scalar"])
    assert w.in_bytes == 8 * 32 * 4096 * 128 * 2 + 4 + 8 * 32 * 128 * 2
    assert w.cls == "gpsimd" and len(w.inputs) == 3


def test_flops_per_element_and_unknown_flops():
    gelu = _w("aten::gelu", [[4, 8]], [F32])
    assert gelu.flops == FLOPS_PER_ELEMENT["gelu"] * 32 and gelu.flops_known
    assert _w("aten::mm", [[8, 16], [16, 4]], [BF, BF]).flops == 2 * 8 * 16 * 4
    copy = _w("aten::copy_", [[4], [4]], [F32, F32])
    assert copy.flops == 0 and copy.flops_known
    mystery = _w("aten::mystery_op", [[4]], [F32])
    assert mystery.flops == 0 and not mystery.flops_known               # no formula: unknown, not zero
    for args in (("aten::mm", "", ""), ("aten::mm", "[[8],[16,4,2,1]]", '["float","float"]'),
                 ("aten::bmm", "[[1,2],", "[]")):
        w = lower_signature(*args)
        assert w.cls == "none" and not w.flops_known and not w.bytes_known and w.note
    nz = _w("aten::nonzero", [[100]], ["bool"])
    assert not nz.bytes_known and "depends on the data" in nz.note


def test_known_no_work():
    """Views and allocations do no device work; names the model does not know are not "no work"."""
    assert all(map(known_no_work, ("aten::view", "aten::empty_strided", "aten::empty_permuted", "c10d::allreduce_")))
    assert not known_no_work("aten::mm") and not known_no_work("aten::add_")
    assert not known_no_work("triton_poi_fused_add_0") and not known_no_work("ProfilerStep#3")


def test_concrete_strings_never_raise_on_unusual_values():
    """Recorded scalar arguments become Kineto's strings; a value JSON has no form for becomes its str()
    instead of breaking the trace export."""
    from neuron_profiler.capture.flops import concrete_strings

    class Odd:
        def __str__(self) -> str:
            return "odd"

    assert concrete_strings([None, "", 3, [2, 2], False, 0.5, Odd()]) == ["", "", "3", "[2, 2]", "false", "0.5",
                                                                         '"odd"']
