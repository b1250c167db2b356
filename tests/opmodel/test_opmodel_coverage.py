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


def test_pooling_from_its_recorded_window():
    # torch 2.13 CPU capture: aten::max_pool2d_with_indices [[2, 4, 16, 16], [], [], [], [], []], Concrete
    # Inputs ['', '[2, 2]', '[]', '[0, 0]', '[1, 1]', 'False']: stride [] = kernel, so 2 x 4 x 8 x 8 = 512
    # outputs, 3 compares each (1,536 FLOPs); reads 2,048 float32 (8,192 bytes), writes 512 float32 + 512
    # int64 indices (2,048 + 4,096 bytes)
    shapes = [[2, 4, 16, 16], [], [], [], [], []]
    win = ["", "[2, 2]", "[]", "[0, 0]", "[1, 1]", "False"]
    w = _w("aten::max_pool2d_with_indices", shapes, [F32] + ["ScalarList"] * 4 + ["Scalar"], concrete=win)
    assert (w.flops, w.read_bytes, w.write_bytes) == (1536, 8192, 2048 + 4096) and _priced(w)
    # aten::avg_pool2d of the same capture, Concrete Inputs ['', '[2, 2]', '[]', '[0, 0]', 'False', 'True', '']:
    # 512 outputs x (3 adds + 1 divide) = 2,048 FLOPs, no indices written
    w = _w("aten::avg_pool2d", shapes + [[]], [F32] + ["ScalarList"] * 3 + ["Scalar", "Scalar", ""],
           concrete=["", "[2, 2]", "[]", "[0, 0]", "False", "True", ""])
    assert (w.flops, w.read_bytes, w.write_bytes) == (2048, 8192, 2048)
    # sample cnn_inference.nprof: aten::adaptive_avg_pool2d [[16,128,8,8],[]], output_size [1, 1]: one window
    # of 64 elements per (image, channel): 16 x 128 x 64 = 131,072 FLOPs (63 adds + 1 divide per window);
    # reads 524,288 bytes, writes 16 x 128 float32 (8,192 bytes)
    w = _w("aten::adaptive_avg_pool2d", [[16, 128, 8, 8], []], [F32, "ScalarList"], concrete=["", "[1, 1]"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (131072, 524288, 8192)
    # max_pool2d_with_indices_backward(grad_output[2,4,8,8], self[2,4,16,16], ..., indices[2,4,8,8] int64):
    # one add per grad_output element (512); reads grad_output (2,048) + indices (4,096), writes grad_input
    # (8,192 bytes); all from the shapes
    w = _w("aten::max_pool2d_with_indices_backward", [[2, 4, 8, 8], [2, 4, 16, 16], [], [], [], [], [], [2, 4, 8, 8]],
           [F32, F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar", I64])
    assert (w.flops, w.read_bytes, w.write_bytes) == (512, 2048 + 4096, 8192) and _priced(w)


def test_unknown_window_or_flops_say_why():
    # sample cnn_inference.nprof: aten::max_pool2d_with_indices with no Concrete Inputs (the window is a
    # ScalarList, [] in the shapes): FLOPs and the output size are unknown, not a guessed 2 x 2 window
    w = _w("aten::max_pool2d_with_indices", [[16, 32, 64, 64], [], [], [], [], []],
           [F32, "ScalarList", "ScalarList", "ScalarList", "ScalarList", "Scalar"])
    assert not w.flops_known and not w.bytes_known and "pooling window" in w.note
    # HTA trace_filter: aten::repeat_interleave [[2048],[2048],[],[]]: its output size depends on the repeats'
    # values and it has no per-element FLOP count: both unknown, the note names the op
    w = _w("aten::repeat_interleave", [[2048], [2048], [], []], [I64, I64, "", "Scalar"])
    assert not w.flops_known and not w.bytes_known and "repeat_interleave: no FLOP count" in w.note
    # HTA trace_filter: the fused table-batched embedding lookup + rowwise-adagrad update. Its arguments
    # include the whole 7.7G-element fp16 table (uvm_weights [7722480160]) but it reads only the rows its
    # 30M indices pick, with per-table widths that are not recorded: unknown, not 15 GB "read"
    shapes = [[0], [7722480160], [0], [0, 0], [9], [9], [10], [], [], [10], [], [30111429], [2359297], [], [], [],
              [0], [], [], [], [48265501], [0], [9], [9], [], [], [], [], []]
    dtypes = ["float", "c10::Half", "c10::Half", "c10::Half", "int", "long", "int", "Scalar", "Scalar", "long",
              "Scalar", "long", "long", "Scalar", "", "", "int", "Scalar", "Scalar", "Scalar", "float", "float",
              "int", "long", "Scalar", "Scalar", "Scalar", "Scalar", "Scalar"]
    w = _w("fbgemm::split_embedding_codegen_lookup_rowwise_adagrad_function", shapes, dtypes)
    assert not w.flops_known and not w.bytes_known and "no op model for this fbgemm op" in w.note


def test_sparse_permutes_and_bounds_check():
    # HTA trace_filter: fbgemm::permute_pooled_embs_auto_grad [[2048, 186588], [1391], [1390], [1391], [1390]]
    # (float, 4 x long): 0 FLOPs; reads the 2048 x 186588 float32 embeddings (1,528,528,896 bytes) + the
    # four int64 lists (5,562 x 8 = 44,496), writes an output of the embeddings' shape (1,528,528,896)
    w = _w("fbgemm::permute_pooled_embs_auto_grad", [[2048, 186588], [1391], [1390], [1391], [1390]],
           [F32, "long", "long", "long", "long"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (0, 1528528896 + 44496, 1528528896) and _priced(w)
    # HTA trace_filter: fbgemm::permute_sparse_features [[300], [300, 2048], [16334339], []] (int): a
    # permutation of all 300 features, so all 16,334,339 indices move: reads permute (1,200) + lengths
    # (2,457,600) + indices (65,337,356), writes lengths (2,457,600) + indices (65,337,356)
    w = _w("fbgemm::permute_sparse_features", [[300], [300, 2048], [16334339], []], ["int", "int", "int", ""])
    assert (w.read_bytes, w.write_bytes) == (1200 + 2457600 + 65337356, 2457600 + 65337356) and _priced(w)
    # HTA trace_filter: fbgemm::bounds_check_indices [[9], [30111429], [2359297], [], [1], [], [], []]: one
    # compare per index and per offset (32,470,726 FLOPs); it rewrites only out-of-bounds indices: bytes unknown
    w = _w("fbgemm::bounds_check_indices", [[9], [30111429], [2359297], [], [1], [], [], []],
           ["long", "long", "long", "Scalar", "long", "", "", "Scalar"])
    assert (w.flops, w.flops_known) == (30111429 + 2359297, True)
    assert not w.bytes_known and "data-dependent" in w.note


def test_fbgemm_quantize_dequantize():
    # HTA trace_filter: fbgemm::FloatToFP8RowwiseQuantized [[1492704, 256], []] float: 2 FLOPs per element;
    # reads 1,492,704 x 256 x 4 bytes, writes 1,492,704 rows of 256 + 8 bytes
    w = _w("fbgemm::FloatToFP8RowwiseQuantized", [[1492704, 256], []], [F32, "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (2 * 1492704 * 256, 1492704 * 1024, 1492704 * 264)
    # HTA trace_filter: fbgemm::FP8RowwiseQuantizedToFloat [[1638400, 264], []] uint8: 1,638,400 x 256 outputs,
    # one divide each; reads 1,638,400 x 264 bytes, writes 1,638,400 x 256 float32
    w = _w("fbgemm::FP8RowwiseQuantizedToFloat", [[1638400, 264], []], ["unsigned char", "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (1638400 * 256, 1638400 * 264, 1638400 * 256 * 4)
    # HTA trace_filter: fbgemm::FloatToHFP8Quantized [[419430400],[],[],[]] float: a bit-level cast, 0 FLOPs,
    # 4 bytes read and 1 written per element
    w = _w("fbgemm::FloatToHFP8Quantized", [[419430400], [], [], []], [F32, "Scalar", "Scalar", "Scalar"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (0, 419430400 * 4, 419430400) and _priced(w)


def test_to_copy_writes_the_target_dtype():
    # torch 2.13 CPU capture of x.to(torch.float16): aten::_to_copy [[8, 16], [], [], [], [], [], []]
    # ['float', 'Scalar', '', '', '', 'Scalar', ''], Concrete Inputs ['', '5', '', '', '', 'False', ''] (5 = Half):
    # 0 FLOPs, reads 128 float32 (512 bytes), writes 128 float16 (256 bytes)
    args = ([[8, 16], [], [], [], [], [], []], [F32, "Scalar", "", "", "", "Scalar", ""])
    w = _w("aten::_to_copy", *args, concrete=["", "5", "", "", "", "False", ""])
    assert (w.flops, w.read_bytes, w.write_bytes) == (0, 512, 256) and _priced(w)
    w = _w("aten::_to_copy", *args, concrete=["", "", "", "", "", "False", ""])      # dtype None: same dtype
    assert (w.read_bytes, w.write_bytes) == (512, 512)
    w = _w("aten::_to_copy", *args)                                                # not recorded: unknown
    assert w.flops_known and not w.bytes_known and "target dtype not recorded" in w.note


def test_nll_loss_reads_the_picked_elements_only():
    # sample ddp_train_rank0.nprof: aten::nll_loss_forward [[2048,1024],[2048],[],[],[]] (float, long int):
    # 2,048 targets: 2,048 FLOPs; with reduction 1 (mean) recorded it reads 2,048 int64 targets (16,384
    # bytes) + the 2,048 picked float32 (8,192), not the 8 MiB of logits, and writes the loss + total_weight
    args = ([[2048, 1024], [2048], [], [], []], [F32, I64, "", "Scalar", "Scalar"])
    w = _w("aten::nll_loss_forward", *args, concrete=["", "", "", "1", "-100"])
    assert (w.flops, w.read_bytes, w.write_bytes) == (2048, 16384 + 8192, 8) and _priced(w)
    # this capture keeps no Concrete Inputs: the reduction, hence what it writes, is unknown (FLOPs are not)
    w = _w("aten::nll_loss_forward", *args)
    assert w.flops == 2048 and w.flops_known and not w.bytes_known and "reduction not recorded" in w.note
    # sample ddp_train_rank0.nprof: aten::nll_loss_backward [[],[2048,1024],[2048],[],[],[],[]]
    # (grad_output 0-d float, self, target long int, weight None, .., total_weight 0-d float): reads
    # grad_output (4) + targets (16,384) + total_weight (4), writes the 2,048 picked gradients (8,192 bytes)
    w = _w("aten::nll_loss_backward", [[], [2048, 1024], [2048], [], [], [], []],
           [F32, F32, I64, "", "Scalar", "Scalar", F32])
    assert (w.flops, w.read_bytes, w.write_bytes) == (2048, 4 + 16384 + 4, 8192) and _priced(w)


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
