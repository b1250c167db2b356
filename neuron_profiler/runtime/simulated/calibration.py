"""Calibration of the simulated NeuronCore against public or physically derived figures.

``calibration_table()`` runs every case through the real simulator path (synthetic host ops ->
``SimulatedRuntime.emit`` -> events) and returns one row per case: what was expected (with its source),
what the model gives, the relative error and the tolerance. Each row says what kind of check it is:
- ``measured``: a timing published for real hardware (the outside world);
- ``spec``: a published hardware figure the model also takes as a parameter (a bandwidth, a peak): the row
  checks that whole kernels reach it and never exceed it, not that the figure is right;
- ``self``: the model against its own assumptions (MODEL constants, definitions): it guards the
  implementation, it says nothing about the hardware.
A case may record a ``gap``: a public figure the model knowingly disagrees with, and why. Its row is kept
in the table (the test asserts the disagreement still stands, so that a change on either side revisits it).
The test suite asserts every row; the table in ``docs/simulation.md`` is printed by
``python -m neuron_profiler.runtime.simulated.calibration``.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neuron_profiler.hardware import Target
from neuron_profiler.runtime.simulated import dma
from neuron_profiler.runtime.simulated.collectives import Topology
from neuron_profiler.runtime.simulated.params import CoreParams
from neuron_profiler.runtime.simulated.synthetic import op, simulate

__all__ = ["Case", "CASES", "calibration_table", "op_device_span_ns"]

BF16 = "c10::BFloat16"


def op_device_span_ns(b, host_row: int) -> int:
    """First device event start to last device event end of one host op (instructions and DMA)."""
    starts, ends = [], []
    for table in ("instructions", "dma"):
        t = b.table(table)
        t = t[t["framework_op"] == host_row]
        if len(t):
            starts.append(int(t["start_ts"].min()))
            ends.append(int((t["start_ts"] + t["duration_ns"]).max()))
    return max(ends) - min(starts) if starts else 0


def _span(name: str, shapes, dtypes, target: Target = Target.TRN2) -> int:
    return op_device_span_ns(simulate([op(name, 0, 100, shapes, dtypes)], target), 0)


def _matmul_bf16() -> float:
    return _span("aten::mm", [[4096, 4096], [4096, 4096]], [BF16, BF16]) / 1e6


def _matmul_fp32_ratio() -> float:
    return _span("aten::mm", [[4096, 4096], [4096, 4096]], ["float", "float"]) / (_matmul_bf16() * 1e6)


def _add_bf16() -> float:
    n = 8192
    return _span("aten::add", [[n, n], [n, n], []], [BF16, BF16, "Scalar"]) / 1e6


def _add_bf16_expected() -> float:
    p = CoreParams.for_target(Target.TRN2)
    return 3 * 8192 * 8192 * 2 / p.hbm_bytes_per_s * 1e3


def _dma_small_penalty() -> float:
    p = CoreParams.for_target(Target.TRN2)
    total = 64 << 20
    return dma.transfer_ns(total, 512, p) / dma.transfer_ns(total, 64 << 10, p)


def _dma_knee() -> float:
    """Descriptor size (bytes) at which DMA reaches 1/sqrt(2) of its peak efficiency (the curve's knee)."""
    p = CoreParams.for_target(Target.TRN2)
    sizes = np.geomspace(64, 1 << 20, 2000)
    eff = np.array([dma.efficiency(s, p) for s in sizes])
    return float(sizes[np.argmin(np.abs(eff - 1 / math.sqrt(2)))])


def _stream_rate(target: Target, world: int = 1) -> float:
    """Bytes/s one core moves in a BF16 add of 3 x 128 MiB (an HBM-bound streamed op), with ``world`` cores of
    its chip running at once."""
    n = 8192
    rows = [op("aten::add", 0, 100, [[n, n], [n, n], []], [BF16, BF16, "Scalar"])]
    span = op_device_span_ns(simulate(rows, target, world_size=world), 0)
    return 3 * n * n * 2 / (span * 1e-9)


def _trn1_core_dma_rate() -> float:
    return _stream_rate(Target.TRN1) / 1e9


def _trn2_chip_hbm_rate() -> float:
    return 8 * _stream_rate(Target.TRN2, world=8) / 1e12


def _trn1_ridge_point() -> float:
    """Peak BF16 FLOP/s over the memory roof of one trn1 core (the arithmetic intensity that saturates TensorE)."""
    p = CoreParams.for_target(Target.TRN1)
    return p.peak("bfloat16") / p.hbm_bytes_per_s


def _ring_busbw_fraction() -> float:
    topo = Topology.for_target(Target.TRN2, 8)
    members = list(range(0, 128, 8))  # one rank per chip of a trn2.48xlarge
    b = float(1 << 30)
    ns, _ = topo.duration("all_reduce", b, members)
    n = len(members)
    busbw = b / (ns * 1e-9) * 2 * (n - 1) / n
    # a group over every chip drives all of a chip's links (the torus's two Hamiltonian cycles, both ways)
    return busbw / (topo.neuronlink_bytes_per_s * topo.full_torus_fraction)


def _throttle_extra_ns() -> float:
    """Extra Tensor time of a 1024x1024x2048 BF16 matmul issued after the device idled (a sync before it)."""
    big = ([[1024, 1024], [1024, 2048]], [BF16, BF16])
    rows = [op("aten::mm", 0, 100, *big), op("aten::mm", 200, 100, *big),
            op("aten::_local_scalar_dense", 300, 10, [[]], ["float"]), op("aten::mm", 400, 100, *big)]
    b = simulate(rows, Target.TRN2)
    ins = b.table("instructions")
    mm = ins[ins["opcode"] == "MATMUL"]
    busy = mm.groupby("framework_op")["duration_ns"].sum()  # op 1 started warm, op 3 after the sync's idle
    return float(busy.loc[3] - busy.loc[1])


@dataclass(frozen=True)
class Case:
    """One calibration case: ``measure()`` runs the simulator; ``expected`` is the public/derived figure."""

    name: str
    description: str
    unit: str
    expected: Callable[[], float] | float
    measure: Callable[[], float]
    tolerance: float
    source: str
    kind: str = "self"      # "measured", "spec" or "self" (see the module docstring)
    gap: str = ""           # a known disagreement with the public figure, and why

    def expected_value(self) -> float:
        return float(self.expected() if callable(self.expected) else self.expected)


CASES: tuple[Case, ...] = (
    Case("matmul_bf16_4096", "4096x4096x4096 BF16 matmul on one trn2 NeuronCore, the op's device span", "ms",
         1.80, _matmul_bf16, 0.05,
         "AWS NKI matrix-multiplication tutorial, fully optimised kernel (as cited in issue 14); "
         "peak bound 2*4096^3 / 78.6 TFLOP/s = 1.75 ms", kind="measured"),
    Case("trn1_core_dma_rate", "bytes per second one trn1 core moves in a BF16 add of 3 x 128 MiB (HBM bound)",
         "GB/s", 272.0, _trn1_core_dma_rate, 0.05,
         "S23/S28 (AWS NKI DMA pages, Trainium1 row): 17 B/ns x 16 DMA engines = 272 GB/s per NeuronCore",
         kind="spec"),
    Case("trn2_chip_hbm_rate", "bytes per second a trn2 chip moves when its 8 cores each stream a BF16 add "
         "(3 x 128 MiB)", "TB/s", 2.9, _trn2_chip_hbm_rate, 0.05,
         "S19/S22 (AWS Trainium2 pages): 4 HBM stacks, 2.9 TB/s per chip; 8 cores x 368 GB/s of DMA (S23) would "
         "exceed it", kind="spec"),
    Case("trn1_ridge_point", "BF16 arithmetic intensity that saturates one trn1 core's Tensor engine (peak over "
         "memory roof)", "FLOP/byte", 222.0, _trn1_ridge_point, 0.10,
         "AWS NKI matrix-multiplication tutorial: 'to saturate TensorE in a NeuronCore-v2, the arithmetic "
         "intensity threshold of a workload is 222 Flops/Byte for bfloat16'", kind="spec",
         gap="the tutorial divides the 92 TFLOP/s peak by the chip's HBM per core (820 GB/s / 2 = 410 GB/s); "
             "the model's memory roof is one core's DMA rate, 272 GB/s (S23/S28), below that HBM share"),
    Case("matmul_fp32_vs_bf16", "the same matmul in FP32, relative to BF16", "x", 4.0, _matmul_fp32_ratio, 0.05,
         "S22/S3: an FP32 matmul costs ~4x BF16 (four passes of the array); the model's fp32_matmul_slowdown"),
    Case("add_bf16_hbm_bound", "BF16 elementwise add of 64 Mi elements on one trn2 core (3 x 128 MiB moved)", "ms",
         _add_bf16_expected, _add_bf16, 0.10,
         "the model's own memory roof: bytes / the core's DMA rate (16 engines x 23 B/ns = 368 GB/s, S23), below "
         "its share of chip HBM"),
    Case("dma_512B_vs_64KiB", "time per byte of 512 B descriptors relative to 64 KiB descriptors", "x", 4.0,
         _dma_small_penalty, 0.10,
         "S23: DMA needs >= 2 KiB contiguous per partition (target >= 4 KiB); at 512 B each descriptor is "
         "dominated by its fixed cost (MODEL curve: 1/0.24)"),
    Case("dma_efficiency_knee", "descriptor size where DMA reaches 71 % of its rate (the knee)", "bytes", 2048,
         _dma_knee, 0.10, "S23: >= 2 KiB contiguous per partition (the model's dma_descriptor_knee_bytes)"),
    Case("ring_allreduce_busbw", "1 GiB ring all-reduce over 16 chips of a trn2.48xlarge: bus bandwidth over the "
         "rings' link bandwidth (every chip: all of its NeuronLinks, cc_full_torus_link_fraction)",
         "fraction", 1.0, _ring_busbw_fraction, 0.05,
         "nccl-tests busbw definition: a bandwidth-optimal ring approaches the link bandwidth for large messages"),
    Case("throttle_after_idle_ns", "extra Tensor time of a BF16 matmul issued after the device idled (trn2)", "ns",
         750.0, _throttle_extra_ns, 0.02,
         "S4/S7: TensorE restarts at ~50 % and ramps to full rate over ~3 us: R (1 - f0) / 2 = 750 ns "
         "(the model's throttle constants)"),
)


def calibration_table(cases: tuple[Case, ...] = CASES) -> pd.DataFrame:
    """One row per case. Columns: case, description, kind (measured / spec / self), unit, expected, simulated,
    error (relative, signed), tolerance, ok (within tolerance), gap (a known disagreement, '' none), source."""
    rows = []
    for c in cases:
        exp, sim = c.expected_value(), float(c.measure())
        err = (sim - exp) / exp if exp else float("nan")
        rows.append({"case": c.name, "description": c.description, "kind": c.kind, "unit": c.unit, "expected": exp,
                     "simulated": sim, "error": err, "tolerance": c.tolerance, "ok": abs(err) <= c.tolerance,
                     "gap": c.gap, "source": c.source})
    return pd.DataFrame(rows)


def _markdown(df: pd.DataFrame) -> str:
    out = ["| case | kind | expected | simulated | error | tolerance | source |", "|---|---|---|---|---|---|---|"]
    for r in df.itertuples():
        src = r.source + (f" **Known gap:** {r.gap}" if r.gap else "")
        out.append(f"| {r.description} | {r.kind} | {r.expected:.4g} {r.unit} | {r.simulated:.4g} {r.unit} "
                   f"| {r.error:+.1%} | ±{r.tolerance:.0%} | {src} |")
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover
    print(_markdown(calibration_table()))
