"""torch.compile (Inductor) Triton kernels as the ops they fused (torch-free).

Kineto records an Inductor kernel launch as a host op named ``triton_{poi,red,per}_fused_<ops>_<n>`` whose
arguments are the kernel's buffers (shapes and dtypes) followed by its iteration sizes (Concrete Inputs:
``xnumel``, and ``r0numel`` for a reduction). The name lists the aten ops the kernel fused, in Inductor's
spelling (``_unsafe_view_add_mean_mul_pow_rsqrt``; at most ``kernel_name_max_ops`` of them).

* dtype: the first buffer's;
* FLOPs: Σ over the fused ops the name lists of ``FLOPS_PER_ELEMENT[op]`` × the iteration space (xnumel ×
  r0numel; the largest buffer when the sizes are not recorded): each op once per element, an estimate the note
  states (a per-row op such as a reduction's ``rsqrt`` runs once per row, so this is an upper estimate for it);
  views and copies add none; unknown when the name holds an op without a per-element count;
* bytes: Σ of the buffers' sizes, each read or written once (the record does not tell in from out; a buffer
  both read and written counts once: a lower bound).
"""
from __future__ import annotations

import math
import re
from functools import lru_cache

from .shapes import Tensor
from .traffic import FLOPS_PER_ELEMENT

__all__ = ["is_inductor_kernel", "inductor_work", "fused_ops"]

_NAME = re.compile(r"^triton_(poi|red|per|tem)_fused_(.+?)(_\d+)?$")
#: ops Inductor fuses that do no arithmetic per element
_FREE = {"_unsafe_view", "view", "clone", "copy", "_to_copy", "permute", "transpose", "slice", "select", "index",
         "expand", "squeeze", "unsqueeze", "cat", "stack", "embedding", "full", "zeros", "ones", "scalar_tensor",
         "constant_pad_nd", "convert_element_type", "t", "reshape", "split", "split_with_sizes", "alias",
         "detach", "lift_fresh", "repeat", "gather", "scatter", "slice_scatter", "select_scatter", "fill",
         "empty", "new_zeros", "unbind", "flip", "roll", "iota", "arange", "device_put", "_unsafe_index",
         "index_put", "masked_fill", "copy_", "as_strided", "squeeze_", "unsqueeze_", "nll_loss_forward"}
_VOCAB = set(FLOPS_PER_ELEMENT) | _FREE | {"rsub"}


def is_inductor_kernel(name: str) -> bool:
    """True for an Inductor Triton kernel's launch (``triton_poi_fused_add_0``)."""
    return isinstance(name, str) and bool(_NAME.match(name))


@lru_cache(maxsize=4096)
def fused_ops(name: str) -> tuple[str, ...] | None:
    """The aten ops an Inductor kernel's name lists, or None when the name does not split into known ops."""
    m = _NAME.match(name)
    if not m:
        return None
    s = m.group(2)
    best: list[tuple[str, ...] | None] = [None] * (len(s) + 1)
    best[0] = ()
    for i in range(len(s)):  # split at "_" into the fewest known ops (op names hold "_" themselves)
        if best[i] is None or (i and s[i - 1] != "_"):
            continue
        for j in range(len(s), i, -1):
            if (j == len(s) or s[j] == "_") and s[i:j] in _VOCAB:
                nxt = j + 1 if j < len(s) else j
                cand = (*best[i], s[i:j])  # type: ignore[misc]
                if best[nxt] is None or len(cand) < len(best[nxt]):  # type: ignore[arg-type]
                    best[nxt] = cand
    return best[len(s)]


def inductor_work(name: str, ts: list[Tensor | None], concrete: list | None) -> tuple[int, bool, int, str, str]:
    """(FLOPs, FLOPs known, bytes moved, dtype, note) of an Inductor kernel launch (see the module doc)."""
    bufs = [t for t in ts if t is not None and t.shape]
    nbytes = sum(t.nbytes for t in bufs)
    dtype = bufs[0].dtype if bufs else ""
    sizes = []
    for c in concrete or []:
        try:
            sizes.append(int(str(c).strip()))
        except ValueError:
            continue
    kind = _NAME.match(name).group(1)  # type: ignore[union-attr]
    n = math.prod(sizes[-2:]) if kind in ("red", "per") and len(sizes) >= 2 else (sizes[-1] if sizes else 0)
    if n <= 0:
        n = max((t.numel for t in bufs), default=0)
    ops = fused_ops(name)
    if ops is None:
        return 0, False, nbytes, dtype, (f"{name}: its name does not list ops with a per-element FLOP count "
                                        "(an Inductor kernel: its buffers are recorded, its arithmetic is not)")
    flops = sum(FLOPS_PER_ELEMENT.get(op, 0) for op in ops) * n
    note = (f"Inductor kernel: FLOPs of the ops its name lists ({', '.join(ops)}) once per element of its "
            f"{n:,} iterations (an estimate); bytes: its buffers, each moved once (a lower bound)")
    return int(flops), True, nbytes, dtype, note
