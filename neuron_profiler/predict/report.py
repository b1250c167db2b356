"""The text ``neuron-profile predict`` prints."""
from __future__ import annotations

from typing import TYPE_CHECKING

from neuron_profiler.predict.config import calibration_band

if TYPE_CHECKING:
    from neuron_profiler.predict.api import Prediction

__all__ = ["format_prediction"]


def _ms(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms"


def format_prediction(p: Prediction) -> str:
    """Throughput, the step broken down (adds up to the step), MFU, HBM per core, the band, where the run went."""
    c, lay, s = p.config, p.layout, p.step
    lo, hi = p.samples_per_s / (1 + p.band[1]), p.samples_per_s / (1 + p.band[0])
    lines = [
        f"{c.model} on {c.instances} x {lay.inst.name} ({lay.world} NeuronCores): TP={lay.tp} PP={lay.pp} "
        f"DP={lay.dp}{' +SP' if lay.sp else ''}{' ZeRO-1' if c.zero1 else ''}, microbatch {c.microbatch} x "
        f"{lay.accumulation} accumulation = global batch {lay.accumulation * c.microbatch * lay.dp}, "
        f"{c.precision}, {c.optimizer}",
        f"predicted {p.samples_per_s:,.2f} samples/s  (calibration band {lo:,.2f} - {hi:,.2f}: leave-one-out "
        f"errors {p.band[0] * 100:+.0f} % .. {p.band[1] * 100:+.0f} % on the published rows C1-C5)",
        f"time per optimizer step {_ms(s.step_ns)}:",
    ]
    if not c.compiled:
        clo, chi = calibration_band(compiled=True)
        lines.insert(2, f"  (eager dry run: the published rows are compiled graphs; --compiled, their mode, has "
                        f"leave-one-out errors {clo * 100:+.0f} % .. {chi * 100:+.0f} %)")
    for k, v in s.parts.items():
        lines.append(f"  {k:<20} {_ms(v):>14}  {100 * v / s.step_ns:5.1f} %")
    lines.append(f"  {'total':<20} {_ms(sum(s.parts.values())):>14}")
    if p.mfu == p.mfu:
        lines.append(f"MFU {100 * p.mfu:.1f} % (model FLOPs / (step x {lay.world} cores x BF16 peak))")
    else:
        lines.append("MFU unknown: the custom stage module has no flops_per_sample")
    for st, h in zip(p.stages, p.hbm):
        parts = ", ".join(f"{k} {v / 2**30:.2f}" for k, v in h.items() if k not in ("total", "capacity"))
        lines.append(f"HBM stage {st.index} ({st.name}, x{st.count}): {h['total'] / 2**30:.2f} of "
                     f"{h['capacity'] / 2**30:.0f} GiB per core ({parts})")
    lines += [f"warning: {w}" for w in p.warnings]
    lines.append(f"model {p.assumptions['model_version']}; assumptions in {p.run_dir}/prediction.jsonl and the trace "
                 f"headers (predict.*); wall {p.wall_s:.1f} s, peak RSS {p.peak_rss_bytes / 2**30:.2f} GiB")
    lines.append(f"run directory: {p.run_dir}  (neuron-analyze / neuron-explorer open it)")
    return "\n".join(lines)
