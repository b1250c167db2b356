"""The ops the op model newly prices, each against FLOPs and bytes computed by hand from shapes copied from a
real trace event (the trace named in each comment), and the ops whose records cannot tell staying unknown
with their reason."""
from __future__ import annotations

import json

import pandas as pd

from neuron_profiler.opmodel import lower_signature, wants_concrete

BF, F32, I64 = "c10::BFloat16", "float", "long int"


def _w(name, shapes, dtypes, concrete=None):
    return lower_signature(name, json.dumps(shapes), json.dumps(dtypes), 0, concrete)


def _priced(w):
    return w.flops_known and w.bytes_known


# --- tensor lists: cat / stack / _foreach_* ---------------------------------------------------------------

def test_cat_and_stack_move_each_input_once():
    # torch 2.13 CPU capture: aten::cat [[[8, 16], [4, 16]], []] ['TensorList', 'Scalar'] (x and x[:4], dim 0)
    w = _w("aten::cat", [[[8, 16], [4, 16]], []], ["TensorList", "Scalar"])
    assert w.flops == 0 and w.flops_known and w.out_elems == 8 * 16 + 4 * 16      # 192 elements out
    # Kineto writes the list's type as "TensorList", not its elements' dtype: bytes unknown, said why
    assert not w.bytes_known and "dtype of its tensor list is not recorded" in w.note
    # where a writer records the element dtype, each input is read once and the output written once:
    # 192 bf16 elements = 384 bytes each way
    w = _w("aten::stack", [[[8, 16], [8, 16]], []], [BF, "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes, w.bytes_known) == (0, 256 * 2, 256 * 2, True)


def test_foreach_ops_are_elementwise_over_every_tensor_of_the_list():
    # torch 2.13 CPU capture of an optimizer-like step over 3 tensors of [3, 4] (N = 36 elements per list)
    lst = [[3, 4], [3, 4], [3, 4]]
    add = _w("aten::_foreach_add_", [lst, lst, []], ["TensorList", "TensorList", "Scalar"])
    assert (add.flops, add.flops_known) == (36, True)                               # 1 add per element
    mul = _w("aten::_foreach_mul_", [lst, []], ["TensorList", "Scalar"])
    assert mul.flops == 36                                                          # 1 mul per element
    addcmul = _w("aten::_foreach_addcmul_", [lst, lst, lst, []], ["TensorList"] * 3 + ["Scalar"])
    assert addcmul.flops == 2 * 36                                                  # x + v * (a * b): mul, fma
    lerp = _w("aten::_foreach_lerp_", [lst, lst, []], ["TensorList", "TensorList", "Scalar"])
    assert lerp.flops == 2 * 36                                                     # x + w * (y - x)
    sqrt = _w("aten::_foreach_sqrt", [lst], ["TensorList"])
    assert sqrt.flops == 36
    for w in (add, mul, addcmul, lerp, sqrt):
        assert not w.bytes_known and "TensorList" in w.note
    # with the element dtype recorded (float32): _foreach_add_ reads both lists (2 x 36 x 4 = 288 bytes) and
    # writes its first list in place (36 x 4 = 144 bytes)
    w = _w("aten::_foreach_add_", [lst, lst, []], [F32, F32, "Scalar"])
    assert (w.read_bytes, w.write_bytes, w.bytes_known) == (288, 144, True)
    # _foreach_norm: square + add per element (72 FLOPs), one value written per tensor (3 x 4 bytes)
    w = _w("aten::_foreach_norm", [lst, []], [F32, "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (72, 144, 12)


def test_tensor_lists_recorded_as_empty_dims_stay_unknown():
    # HTA trace_filter/sampled_rank-0: aten::cat [[],[]] ["TensorList","Scalar"], aten::_foreach_add_
    # [[],[],[]] ["TensorList","TensorList","Scalar"]: that Kineto writes [] for a tensor list
    for name, shapes, dtypes in (("aten::cat", [[], []], ["TensorList", "Scalar"]),
                                 ("aten::_foreach_add_", [[], [], []], ["TensorList", "TensorList", "Scalar"]),
                                 ("aten::stack", [[], []], ["TensorList", "Scalar"])):
        w = _w(name, shapes, dtypes)
        assert not w.flops_known and not w.bytes_known
        assert "tensor-list argument is recorded without shapes" in w.note


# --- elementwise, backward, reductions, losses: FLOPs per element -------------------------------------------

def test_backward_elementwise_ops():
    # sample ddp_train_rank0.nprof: aten::gelu_backward [[8,256,2048],[8,256,2048],[]] bf16: 4,194,304 elements,
    # g * (Phi(x) + x * phi(x)) = 11 FLOPs each; reads grad and x (2 x 8 MiB), writes one bf16 gradient (8 MiB)
    n = 8 * 256 * 2048
    w = _w("aten::gelu_backward", [[8, 256, 2048], [8, 256, 2048], []], [BF, BF, ""])
    assert (w.flops, w.read_bytes, w.write_bytes) == (11 * n, 2 * n * 2, n * 2) and _priced(w)
    # HTA trace_filter: aten::_softmax_backward_data [[2,1],[2,1],[],[]] float: y * (g - sum(g * y)), 4 each
    w = _w("aten::_softmax_backward_data", [[2, 1], [2, 1], [], []], [F32, F32, "Scalar", "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (8, 16, 8)
    # HTA trace_filter: aten::tanh_backward [[2048,3474],[2048,3474]] float: g * (1 - y^2), 3 each
    n = 2048 * 3474
    w = _w("aten::tanh_backward", [[2048, 3474], [2048, 3474]], [F32, F32])
    assert (w.flops, w.read_bytes, w.write_bytes) == (3 * n, 2 * n * 4, n * 4)


def test_layer_norm_backward():
    # HTA trace_filter: aten::native_layer_norm_backward (grad, x, normalized_shape, mean, rstd, weight, bias,
    # output_mask) [[2048,1,742],[2048,1,742],[],[2048,1,1],[2048,1,1],[1,742],[1,742],[]] float.
    # 1,519,616 elements x 13 FLOPs; reads grad + x (2 x 6,078,464 bytes), mean + rstd (2 x 8,192), weight +
    # bias (2 x 2,968) = 12,179,248 bytes; writes dx (6,078,464 bytes).
    shapes = [[2048, 1, 742], [2048, 1, 742], [], [2048, 1, 1], [2048, 1, 1], [1, 742], [1, 742], []]
    w = _w("aten::native_layer_norm_backward", shapes, [F32, F32, "", F32, F32, F32, F32, ""])
    assert (w.flops, w.read_bytes, w.write_bytes) == (13 * 1519616, 12179248, 6078464) and _priced(w)


def test_comparisons_write_bool_and_reductions():
    # TraceLens bert-small: aten::eq [[1,141],[]] ["long int","Scalar"]: 141 compares, reads 141 int64
    # (1,128 bytes), writes 141 bools (141 bytes)
    w = _w("aten::eq", [[1, 141], []], [I64, "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (141, 1128, 141) and _priced(w)
    # TraceLens bert-small: aten::all [[1,141]] ["bool"]: 141 ands, reads 141 bytes, writes one bool
    w = _w("aten::all", [[1, 141]], ["bool"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (141, 141, 1)
    # sample cnn_inference.nprof: aten::clamp_min [[16,32,64,64],[]] float: one compare per element
    n = 16 * 32 * 64 * 64
    w = _w("aten::clamp_min", [[16, 32, 64, 64], []], [F32, "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (n, 4 * n, 4 * n)


def test_nll_loss_counts_one_flop_per_target():
    # sample ddp_train_rank0.nprof: aten::nll_loss_forward [[2048,1024],[2048],[],[],[]]: 2048 targets
    w = _w("aten::nll_loss_forward", [[2048, 1024], [2048], [], [], []], [F32, I64, "", "Scalar", "Scalar"])
    assert (w.flops, w.flops_known) == (2048, True)


# --- sparse-feature ops (recommendation models) -------------------------------------------------------------

def test_permute_2d_sparse_data():
    # HTA mtia_inference_rank_0: fbgemm::permute_2D_sparse_data [[109],[110,100],[598466],[],[]]
    # ['int','long','int','','Scalar'], Concrete Inputs [.., '598466'] (permuted_lengths_sum).
    # reads permute (109 x 4) + all lengths (110 x 100 x 8) + the moved indices (598,466 x 4) = 2,482,300 bytes;
    # writes the permuted lengths (109 x 100 x 8 = 87,200) + the moved indices (2,393,864) = 2,481,064 bytes
    args = ([[109], [110, 100], [598466], [], []], ["int", "long", "int", "", "Scalar"])
    w = _w("fbgemm::permute_2D_sparse_data", *args, concrete=["", "", "", "", "598466"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (0, 2482300, 2481064) and _priced(w)
    # HTA trace_filter: [[1390],[1334,2048],[64162701],[],[]], no Concrete Inputs: 1390 of 1334 features
    # (some repeated), so how many indices move depends on the data
    w = _w("fbgemm::permute_2D_sparse_data", [[1390], [1334, 2048], [64162701], [], []],
           ["int", "int", "int", "", "Scalar"])
    assert not w.bytes_known and "depends on the data" in w.note


def test_complete_cumsum_and_diff():
    # HTA mtia_inference_rank_0: fbgemm::asynchronous_complete_cumsum [[10900]] long: 10,900 adds, reads
    # 87,200 bytes, writes 10,901 int64 (87,208 bytes)
    w = _w("fbgemm::asynchronous_complete_cumsum", [[10900]], ["long"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (10900, 87200, 87208) and _priced(w)
    # HTA mtia_inference_rank_0: aten::diff [[10901],[],[],[],[]] ['int','Scalar','Scalar','',''], Concrete
    # Inputs ['', '1', '-1', '', '']: n = 1 along the last dim: 10,900 subtractions, reads 43,604 bytes,
    # writes 10,900 int32 (43,600 bytes)
    args = ([[10901], [], [], [], []], ["int", "Scalar", "Scalar", "", ""])
    w = _w("aten::diff", *args, concrete=["", "1", "-1", "", ""])
    assert (w.flops, w.read_bytes, w.write_bytes) == (10900, 43604, 43600) and _priced(w)
    # without Concrete Inputs n is not known: unknown, not n = 1
    w = _w("aten::diff", *args)
    assert not w.flops_known and not w.bytes_known and "n and dim not recorded" in w.note


def test_unknown_flops_say_why():
    # sample cnn_inference.nprof: aten::max_pool2d_with_indices: the window (kernel_size, stride) is a
    # ScalarList, not in the shapes, and this capture keeps no Concrete Inputs
    w = _w("aten::max_pool2d_with_indices", [[16, 32, 64, 64], [], [], [], [], []],
           [F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"])
    assert not w.flops_known and "no FLOP count" in w.note


def test_analysis_passes_concrete_inputs_where_the_model_reads_them():
    """analysis' one path (op_flops_and_bytes) hands diff its Concrete Inputs: priced, not unknown."""
    from analysis.analyses.work import op_flops_and_bytes

    assert wants_concrete("aten::diff") and wants_concrete("aten::convolution") and not wants_concrete("aten::add")
    args = json.dumps({"Concrete Inputs": ["", "1", "-1", "", ""]})
    ho = pd.DataFrame({"name": ["aten::diff", "aten::diff"], "input_shapes": ['[[10901],[],[],[],[]]'] * 2,
                       "input_dtypes": ['["int","Scalar","Scalar","",""]'] * 2, "args": [args, ""], "flops": [0, 0]})
    r = op_flops_and_bytes(ho)
    assert r["flops"].tolist()[0] == 10900 and r["bytes"].tolist()[0] == 43604 + 43600
    assert pd.isna(r["flops"].iloc[1]) and "n and dim" in r["note"].iloc[1]
