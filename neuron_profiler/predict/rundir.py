"""The run directory of a prediction: one trace per simulated rank (a rank of each distinct pipeline stage,
with the prediction and every assumption in its header metadata under ``predict.*``), ``prediction.jsonl``
and ``prediction.txt``."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_profiler.trace import read_trace
from neuron_profiler.trace.writer import TraceWriter

if TYPE_CHECKING:
    from neuron_profiler.predict.api import Prediction

__all__ = ["write_run", "write_summary", "summary"]


def summary(p: Prediction) -> dict[str, Any]:
    """The prediction as JSON-able values (also written to prediction.jsonl and the trace headers)."""
    return {
        "samples_per_s": p.samples_per_s, "step_ns": p.step.step_ns, "breakdown_ns": p.step.parts,
        "slowest_stage": p.step.slowest, "slot_ns": p.step.slot_ns, "mfu": p.mfu,
        "uncertainty_band": {"low": p.band[0], "high": p.band[1],
                             "samples_per_s": [p.samples_per_s / (1 + p.band[1]), p.samples_per_s / (1 + p.band[0])]},
        "hbm_bytes_per_core": p.hbm, "warnings": p.warnings, "wall_s": p.wall_s,
        "peak_rss_bytes": p.peak_rss_bytes,
        "stages": [{"name": s.name, "index": s.index, "count": s.count, "layers": s.layers, "micro_ns": s.micro_ns,
                    "mm_ns": s.mm_ns, "tp_comm_ns": s.tp_comm_ns, "opt_ns": s.opt_ns, "params": s.params,
                    "saved_bytes": s.saved_bytes, "unpriced": s.unpriced} for s in p.stages],
        "assumptions": p.assumptions,
    }


def write_run(p: Prediction) -> list[Path]:
    """Copy each stage's dry-run trace (the largest one simulated) into the run directory, header amended."""
    p.run_dir.mkdir(parents=True, exist_ok=True)
    meta = summary(p)
    out = []
    for s in p.stages:
        src = read_trace(s.traces[-1])
        try:
            hdr = type(src.header)()
            hdr.CopyFrom(src.header)
            hdr.run_id = p.run_dir.name
            hdr.world_size = p.layout.world
            hdr.metadata["predict.model_version"] = str(p.assumptions["model_version"])
            hdr.metadata["predict.stage"] = json.dumps(meta["stages"][p.stages.index(s)])
            hdr.metadata["predict.result"] = json.dumps({k: meta[k] for k in (
                "samples_per_s", "step_ns", "breakdown_ns", "mfu", "uncertainty_band")})
            hdr.metadata["predict.assumptions"] = json.dumps(p.assumptions, default=str)
            dst = p.run_dir / Path(s.traces[-1]).name
            _copy(src, hdr, dst, f"stage{s.index}_")
            out.append(dst)
        finally:
            src.close()
    return out


def _copy(src, hdr, dst: Path, group_prefix: str) -> None:
    """Copy ``src`` under header ``hdr``. Each stage's dry run had its own fake process group, so its TP group
    carries the name every other stage's has too: the prefix keeps the groups of different stages apart (the
    run analysis would otherwise match their collectives as one)."""
    from neuron_profiler.trace import TABLES
    with TraceWriter(dst, hdr) as w:
        for table in TABLES:
            for df in src.iter_table(table):
                if len(df) and table == "collectives":
                    df = df.copy()
                    df["process_group"] = [group_prefix + str(g) for g in df["process_group"].astype(str)]
                if len(df):
                    w.append(table, df)
        w.dropped_events.update(src.dropped_events)
        w.footer_metadata.update(src.footer_metadata)


def write_summary(p: Prediction) -> Path:
    """prediction.jsonl (the summary as one JSON line; not .json, which trace listings would take for a
    Kineto trace) and prediction.txt (the printed report) in the run directory."""
    from neuron_profiler.predict.report import format_prediction
    path = p.run_dir / "prediction.jsonl"
    path.write_text(json.dumps(summary(p), default=str) + "\n", encoding="utf-8")
    (p.run_dir / "prediction.txt").write_text(format_prediction(p) + "\n", encoding="utf-8")
    return path
