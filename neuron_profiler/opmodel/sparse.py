"""Sparse-feature (jagged tensor) ops of recommendation models: FBGEMM's permutes, ``bounds_check_indices``,
``asynchronous_complete_cumsum`` and ``aten::diff`` over lengths and offsets (torch-free).

Rules (sizes from the recorded shapes and dtypes; ``Concrete Inputs`` for the scalar arguments):

* ``permute_2D_sparse_data(permute[T'], lengths[T, B], indices[N], weights?[N], permuted_lengths_sum?)``:
  0 FLOPs (it moves segments; the offsets are integer prefix sums); reads ``permute``, all of ``lengths``
  (the offsets need every length) and the moved segments of ``indices`` (and ``weights``), writes the
  permuted lengths (T' x B) and the moved segments. The moved element count is ``permuted_lengths_sum``
  when recorded, else N when ``permute`` is a permutation of all T features (T' == T); otherwise it
  depends on the data, and the bytes are unknown. ``permute_sparse_features(permute, lengths, indices,
  weights?)`` is the same without ``permuted_lengths_sum``.
* ``permute_pooled_embs`` / ``permute_pooled_embs_auto_grad(pooled_embs[B, D], offset_dim_list,
  permute_list, inv_offset_dim_list, inv_permute_list)``: 0 FLOPs; reads every argument, writes an output
  the shape of ``pooled_embs`` (its column blocks permuted).
* ``bounds_check_indices(rows_per_table, indices[N], offsets[M], mode, warning, ...)``: N + M compares
  (each index against its table's rows, each offset against N); it rewrites only the out-of-bounds
  indices, so what it writes depends on the data: bytes unknown.
* ``asynchronous_complete_cumsum(t[N])``: the inclusive prefix sum with a leading 0: N adds, reads N
  elements, writes N + 1.
* ``aten::diff(self, n, dim, prepend, append)``: the n-th forward difference along ``dim`` (length L,
  ``rest`` elements across it): step k subtracts (L - k) x rest pairs, FLOPs = sum over k = 1..n; reads
  ``self``, writes (L - n) x rest elements. ``n`` and ``dim`` come from Concrete Inputs (unknown without
  them); a recorded ``prepend`` / ``append`` tensor makes it unknown (not modelled).
"""
from __future__ import annotations

from neuron_profiler.hardware import dtype_size_bytes

from .shapes import Tensor, concrete_int
from .traffic import Traffic

__all__ = ["SPARSE_OPS", "sparse_work"]

SPARSE_OPS = ("permute_2D_sparse_data", "permute_sparse_features", "permute_pooled_embs",
              "permute_pooled_embs_auto_grad", "bounds_check_indices", "asynchronous_complete_cumsum", "diff")


def _size(t: Tensor) -> int:
    return dtype_size_bytes(t.dtype) or 4


def sparse_work(base: str, ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, Traffic]:
    """(FLOPs, FLOPs known, traffic) of one of :data:`SPARSE_OPS` from its positional tensor arguments."""
    tensors = [t for t in ts if t is not None]
    if base == "asynchronous_complete_cumsum":
        t = tensors[0]
        return t.numel, True, Traffic(t.nbytes, (t.numel + 1) * _size(t))
    if base in ("permute_2D_sparse_data", "permute_sparse_features"):
        return 0, True, _permute_2d(base, ts, concrete if base == "permute_2D_sparse_data" else None)
    if base.startswith("permute_pooled_embs"):
        return 0, True, Traffic(sum(t.nbytes for t in tensors), tensors[0].nbytes)
    if base == "bounds_check_indices":
        idx = ts[1:3] if len(ts) >= 3 else []
        if len(idx) < 2 or any(t is None for t in idx):
            return 0, False, Traffic(0, 0, False, f"{base}: indices and offsets not recorded")
        return sum(t.numel for t in idx if t is not None), True, Traffic(
            sum(t.nbytes for t in tensors), 0, False, f"{base}: rewrites only out-of-bounds indices (data-dependent)")
    return _diff(ts, concrete)


def _permute_2d(base: str, ts: list[Tensor | None], concrete: list | None) -> Traffic:
    if len(ts) < 3 or ts[0] is None or ts[1] is None or ts[2] is None or len(ts[1].shape) != 2:
        return Traffic(0, 0, False, f"{base}: permute, lengths [T, B] and indices not recorded")
    permute, lengths, indices = ts[0], ts[1], ts[2]
    weights = ts[3] if len(ts) > 3 else None
    moved = concrete_int(concrete, 4)
    if moved is None and permute.numel == lengths.shape[0]:
        moved = indices.numel
    if moved is None:
        return Traffic(0, 0, False, f"{base}: the permuted segments' size depends on the data "
                                    "(permuted_lengths_sum not recorded)")
    seg = moved * (_size(indices) + (_size(weights) if weights is not None else 0))
    out_lengths = permute.numel * lengths.shape[1] * _size(lengths)
    return Traffic(permute.nbytes + lengths.nbytes + seg, out_lengths + seg, True,
                   f"{base}: reads all lengths, moves the permuted segments")


def _diff(ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, Traffic]:
    t = ts[0]
    n, dim = concrete_int(concrete, 1), concrete_int(concrete, 2)
    if t is None or not t.shape:
        return 0, False, Traffic(0, 0, False, "diff: no input shape recorded")
    if any(x is not None for x in ts[3:5]):
        return 0, False, Traffic(0, 0, False, "diff: prepend / append tensors are not modelled")
    if n is None or dim is None:
        return 0, False, Traffic(0, 0, False, "diff: n and dim not recorded (no Concrete Inputs)")
    length = t.shape[dim % len(t.shape)]
    rest = t.numel // max(length, 1)
    n = max(0, min(n, length))
    flops = sum(length - k for k in range(1, n + 1)) * rest
    return flops, True, Traffic(t.nbytes, (length - n) * rest * _size(t))
