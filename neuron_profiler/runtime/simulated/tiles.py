"""Tiling decisions for one kernel: how many tiles, how they are grouped, and the matmul blocking.

- ``tile_groups(n, max_groups)``: sizes of the groups that stand for ``n`` identical tiles, with single
  tiles at both ends (so pipeline fill and drain are as for real tiles) and geometric growth in between;
  the schedule stays small (at most ``max_groups`` groups) whatever the tile count.
- ``matmul_blocking``: which operand stays resident in SBUF and how often the other is re-read from HBM,
  chosen to minimise HBM traffic within the usable SBUF; re-reads beyond the first pass are the reload
  traffic of an operand that does not fit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["tile_groups", "Blocking", "matmul_blocking", "split"]


def tile_groups(n: int, max_groups: int) -> list[int]:
    """Group sizes summing to ``n`` (>= 1 tile each): 1, 1, 2, 4, ... bulk ..., 4, 2, 1, 1."""
    n = max(int(n), 1)
    if n <= max_groups:
        return [1] * n
    head: list[int] = []
    size, budget = 1, max_groups - 2  # keep at least two bulk groups
    while len(head) * 2 + 2 <= budget and sum(head) * 2 + 2 * size <= n // 2:
        head.append(size)
        size = size * 2 if len(head) > 1 else 1
    rest = n - 2 * sum(head)
    bulk = max(1, max_groups - 2 * len(head))
    bulk = min(bulk, rest)
    q, r = divmod(rest, bulk)
    middle = [q + (1 if i < r else 0) for i in range(bulk)]
    return head + middle + head[::-1]


def split(total: float, sizes: list[int]) -> list[float]:
    """``total`` spread over groups in proportion to their sizes."""
    n = sum(sizes)
    return [total * s / n for s in sizes]


@dataclass(frozen=True)
class Blocking:
    """How a [M, K] x [K, N] matmul (``batch`` times) streams its operands through SBUF."""

    resident: str           # "B" (moving operand slab kept), "A" (stationary slab kept) or "none"
    passes: int             # times the streamed operand is read from HBM
    a_bytes: float          # HBM bytes of A read in the first pass
    b_bytes: float
    reload_bytes: float     # HBM bytes re-read after the first pass
    slab_bytes: float       # SBUF bytes held resident for the whole kernel
    block_n: int            # columns of B per resident slab (resident "B")

    @property
    def in_bytes(self) -> float:
        return self.a_bytes + self.b_bytes + self.reload_bytes


def matmul_blocking(batch: int, m: int, k: int, n: int, a_elem: int, b_elem: int, sbuf_budget: float,
                    moving_max: int = 512, rows: int = 128) -> Blocking:
    """Blocking with the least HBM traffic whose resident slab fits in ``sbuf_budget`` bytes.

    Resident B: slabs of B [K, Nb] (Nb a multiple of ``moving_max``) stay in SBUF while all of A streams
    past them: A is read ceil(N / Nb) times, B once. Resident A: slabs [Mb, K] (Mb a multiple of ``rows``),
    B read ceil(M / Mb) times. When neither fits, both stream per output tile."""
    a, b = float(batch * m * k * a_elem), float(batch * k * n * b_elem)
    best: Blocking | None = None
    # resident B
    nb_max = int(sbuf_budget // max(k * b_elem, 1))
    nb = min(n, (nb_max // moving_max) * moving_max) if nb_max >= min(n, moving_max) else 0
    if nb <= 0 and nb_max >= n:
        nb = n
    if nb > 0:
        passes = math.ceil(n / nb)
        best = Blocking("B", passes, a, b, a * (passes - 1), min(b / batch, nb * k * b_elem), nb)
    # resident A
    mb_max = int(sbuf_budget // max(k * a_elem, 1))
    mb = min(m, (mb_max // rows) * rows) if mb_max >= min(m, rows) else 0
    if mb > 0:
        passes = math.ceil(m / mb)
        cand = Blocking("A", passes, a, b, b * (passes - 1), min(a / batch, mb * k * a_elem), 0)
        if best is None or cand.reload_bytes < best.reload_bytes:
            best = cand
    if best is None:  # K too large for any slab: each output tile re-reads its row of A and column of B
        pa, pb = math.ceil(n / moving_max), math.ceil(m / rows)
        best = Blocking("none", max(pa, pb), a, b, a * (pa - 1) + b * (pb - 1), 0.0, 0)
    return best
