"""End-to-end calibration of ``neuron-profile predict`` against AWS's published trn1 training throughput.

Runs every row C1-C5 of ../shared/reference/trainium-training-calibration.md through ``predict`` (each row in
its own process, so its peak RSS is its own) and prints expected, predicted, error, wall time and peak RSS.
Those rows are the calibration set; other published AWS figures are an independent check and are not used here.

    nice -n 10 python bench/bench_calibration_e2e.py              # all rows, compiled as they were published
    nice -n 10 python bench/bench_calibration_e2e.py --rows C1,C4
    nice -n 10 python bench/bench_calibration_e2e.py --eager      # eager dry runs (predict's other mode)
    python bench/bench_calibration_e2e.py --fit     # refit the mode's matmul peak fraction on the last run's rows
    python bench/bench_calibration_e2e.py --fit --write   # ... and store it in hardware/predict_table.json

The published runs are compiled graphs (torch-neuronx / NxD / NeMo through XLA), so the rows run through
``torch.compile(backend="neuron")`` (``predict --compiled``) unless ``--eager`` is given; each mode has its own
fitted constant and band.

Where a row's recipe differs from the calibration file's wording, ``NOTES`` says which public source was used.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: row -> (expected samples/s, PredictConfig keyword arguments)
ROWS: dict[str, tuple[float, dict]] = {
    "C1": (5232.78, dict(model="vit-base", instances=1, microbatch=64, global_batch=2048,
                         precision="bf16", optimizer="adamw")),
    "C2": (32482.34, dict(model="bert-large", instances=16, microbatch=8, global_batch=1048576, precision="fp32",
                          optimizer="lamb")),
    "C3": (102.0, dict(model="gpt3-23b", instances=32, tp=8, pp=4, microbatch=1, global_batch=1024,
                       precision="bf16", optimizer="adamw")),
    "C4": (47.95, dict(model="llama3.1-8b", instances=32, tp=32, microbatch=1, global_batch=1024,
                       precision="bf16", optimizer="adamw", zero1=True)),
    "C5": (15.34, dict(model="llama2-70b", instances=32, tp=32, pp=4, microbatch=1, global_batch=1024,
                       precision="bf16", optimizer="adamw", zero1=True)),
}
NOTES = {
    "C1": "'Autocast:BF16+SR' (the AWS table's label for C1 and C3): the ViT notebook of that release "
          "(aws-neuron-samples hf_image_classification/vit.ipynb, 2023-12) sets XLA_USE_BF16=1, BF16 weights, as "
          "C3's script does. It pins transformers 4.28.1, whose ViT attention is eager (no SDPA before 4.36).",
    "C2": "FP32: the script's fp32 mode (dp_bert_hf_pretrain run_dp_bert_large_hf_pretrain_bf16_s128_lamb.sh fp32: "
          "--enable_fp32, no torch.autocast) trains an FP32 model, and neuronx-cc casts its matmuls to BF16 on chip "
          "(its default --auto-cast matmult; the script's own MFU uses the BF16 peak unless --auto-cast=none): "
          "predict dry-runs the FP32 model with the simulator's auto_cast='matmult'. The calibration file says "
          "the FP32 rate. 2.27 publishes 32,752.79 (+0.8 %). HF eager attention with the padding mask and "
          "probability dropout 0.1 (transformers 4.44: SDPA on XLA is the math decomposition).",
    "C3": "neuronx-nemo-megatron train_setup.sh's default recipe 'bf16SR' sets XLA_USE_BF16=1 (BF16 weights); "
          "gpt_23b.sh: selective recompute, sequence parallel; hidden dropout 0.1 (test.sh). Attention as SDK 2.16 "
          "ran it (the tree at 89680bb, 2023-11-16; no 2.16 commit, next is 2.18's): transformer.py CoreAttention, "
          "eager (baddbmm, scale, causal mask, softmax, dropout 0.1 = megatron_gpt_config.yaml attention_dropout, "
          "bmm; masked_softmax_fusion False; no flash/NKI kernel in that tree), recomputed in the backward "
          "(selective: 'Region where selective activation recomputation is applied').",
    "C4": "'Autocast:BF16+FP32Optimizer': BF16 weights on the device, FP32 master weights and optimizer state "
          "(NxD 2.24 tp_zero1_llama3_8B_hf_pretrain.sh passes --use_gpu_compatible_precision 1, so neither "
          "XLA_DOWNCAST_BF16 nor XLA_USE_BF16 is set: the weights are BF16 because the model is built in the "
          "config's torch_dtype bfloat16; get_mixed_precision_config: FP32 master weights in ZeRO-1). "
          "Column/RowParallelLinear reduce_dtype=torch.float32: FP32 sequence-parallel reduce-scatters.",
    "C5": "NxD 2.16 (aws-neuron/neuronx-distributed a80091d) run_llama_70b_tp_pp.sh: XLA_DOWNCAST_BF16=1, BF16 "
          "weights on the device. Attention: modeling_llama_nxd.py CoreAttention, eager (matmul / sqrt(d), triu "
          "causal mask, softmax(dtype=torch.double), FP32 on the device, matmul; NxD 2.16 has no flash kernel), "
          "recomputed in the backward (--use_selective_checkpoint 1: activation_checkpoint_config=CoreAttention). "
          "ZeRO-1: the script passes --use_zero1_optimizer 1 (NxD 2.16 trainer.py: NeuronZero1Optimizer sharded "
          "over the DP group; no FP32 gradient accumulation or higher_cc_precision options at 2.16).",
}
LAST = Path(tempfile.gettempdir()) / "neuron_predict_calibration.json"


GRID_PF = [round(0.20 + 0.01 * i, 2) for i in range(81)]     # matmul peak fraction 0.20 .. 1.00


def run_row(row: str, out: str, eff: tuple[float | None, float | None] = (None, None), reduced: bool = False,
            compiled: bool = False) -> dict:
    """Predict one row in this process; returns its figures and what a refit needs. ``reduced``: the row's
    layout with 2 layers per stage and a 512-token sequence (the CI case; its throughput is not the row's)."""
    import warnings
    warnings.filterwarnings("ignore")
    from neuron_profiler.predict import PredictConfig, predict
    expected, kw = ROWS[row]
    if reduced:
        kw = dict(kw, layers=2 * kw.get("pp", 1), seq=512 if kw["model"] != "vit-base" else 0)
    p = predict(PredictConfig(output_dir=out, run_id=row.lower(), compiled=compiled, **kw), efficiency=eff)
    parts = p.step.parts
    fixed = sum(v for k, v in parts.items() if k.startswith("dp ") or k in ("optimizer", "host"))
    return {"row": row, "expected": expected, "predicted": p.samples_per_s, "error": p.samples_per_s / expected - 1,
            "wall_s": p.wall_s, "rss_gib": p.peak_rss_bytes / 2**30, "step_ns": p.step.step_ns,
            "breakdown_ns": parts, "mfu": p.mfu, "global_batch": kw["global_batch"], "fixed_ns": fixed,
            "m": p.layout.accumulation, "pp": p.layout.pp, "p2p_ns": p.step.detail["p2p_ns"],
            "compiled": compiled, "warnings": p.warnings,
            "stages": [{"micro": s.micro_ns, "tp": s.tp_comm_ns, "extra": [s.mm_extra_ns(f) for f in GRID_PF]}
                       for s in p.stages]}


def step_at(r: dict, i_pf: int, ov: float) -> float:
    """A row's step time (ns) for GRID_PF[i_pf] and TP overlap ``ov`` (compose.compose's arithmetic)."""
    slot = max(s["micro"] + s["extra"][i_pf] + s["tp"] * (1 - ov) for s in r["stages"]) + 2 * r["p2p_ns"]
    return (r["m"] + r["pp"] - 1) * slot + r["fixed_ns"]


def row_error(r: dict, i_pf: int, ov: float) -> float:
    return r["global_batch"] / (step_at(r, i_pf, ov) / 1e9) / r["expected"] - 1


def best(rows: list[dict]) -> tuple[int, float]:
    """(GRID_PF index, TP overlap) minimising the squared log errors of ``rows``; the TP overlap is the
    framework's (predict_table.json ``framework``: 0, TP collectives are not overlapped), not fitted."""
    from neuron_profiler.predict.compose import framework
    ov = framework("tp_overlap")
    return min(((i, ov) for i in range(len(GRID_PF))),
               key=lambda e: sum(math.log(1 + row_error(r, *e)) ** 2 for r in rows))


def fit(results: list[dict]) -> dict:
    """The fit on every row, each row's error under it, and each row's error when left out of the fit."""
    i, ov = best(results)
    loo = {r["row"]: row_error(r, *best([x for x in results if x is not r])) for r in results}
    return {"matmul_peak_fraction": GRID_PF[i], "tp_overlap": ov,
            "errors": {r["row"]: round(row_error(r, i, ov), 4) for r in results},
            "leave_one_out": {k: round(v, 4) for k, v in loo.items()}}


def write_fit(f: dict, results: list[dict], table: Path | None = None) -> Path:
    """Store a fit in neuron_profiler/hardware/predict_table.json (``fitted``): both constants with the fit and
    the errors at it, and the band from the leave-one-out errors."""
    table = table or ROOT / "neuron_profiler" / "hardware" / "predict_table.json"
    t = json.loads(table.read_text())
    mode = "_compiled" if any(r.get("compiled") for r in results) else ""
    for k in ("matmul_peak_fraction", "band"):
        t["fitted"].setdefault(k + mode, {"source": "FITTED"})
    errs = ", ".join(f"{k} {100 * v:+.1f} %" for k, v in f["errors"].items())
    loo = ", ".join(f"{k} {100 * v:+.1f} %" for k, v in f["leave_one_out"].items())
    how = ("least squares on log(predicted / published) over calibration rows "
           f"{', '.join(r['row'] for r in results)} (bench/bench_calibration_e2e.py --fit, grid 0.01)")
    how += "; dry runs through torch.compile(backend='neuron') (--compiled)" if mode else "; eager dry runs"
    t["fitted"]["matmul_peak_fraction" + mode].update(value=f["matmul_peak_fraction"], fit=how + "; the one constant "
        "fitted: no matrix multiply of a production compiled graph runs faster than this fraction of the Tensor "
        f"engine's peak for the dtype it multiplies in. Errors at the fit: {errs}.")
    lo, hi = min(f["leave_one_out"].values()), max(f["leave_one_out"].values())
    t["fitted"]["band" + mode].update(low=round(min(lo, 0.0), 3), high=round(max(hi, 0.0), 3), fit="the range of "
        f"leave-one-out errors (each row predicted with the constants fitted on the others): {loo}; a "
        "prediction's published figure is expected within predicted / (1 + high) .. predicted / (1 + low)")
    table.write_text(json.dumps(t, indent=2) + "\n")
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None)
    ap.add_argument("--efficiency", default=None, help="PEAK_FRACTION,TP_OVERLAP: override the fitted constants")
    ap.add_argument("--fit", action="store_true", help="fit the matmul peak fraction on the last run's rows")
    ap.add_argument("--eager", action="store_true", help="eager dry runs instead of the published runs' compiled "
                                                         "graphs (torch.compile(backend='neuron'), the default)")
    ap.add_argument("--compiled", action="store_true", help=argparse.SUPPRESS)  # the default; kept for old scripts
    ap.add_argument("--write", action="store_true", help="with --fit: store the fit in predict_table.json")
    a = ap.parse_args(argv)
    a.compiled = not a.eager
    if a.one:
        eff = tuple(float(x) for x in a.efficiency.split(",")) if a.efficiency else (None, None)
        print(json.dumps(run_row(a.one, a.out, eff, compiled=a.compiled)))
        return 0
    if a.fit:
        results = json.loads(LAST.read_text())
        f = fit(results)
        print(json.dumps(f, indent=1))
        if a.write:
            print(f"written to {write_fit(f, results)}")
        return 0
    out = a.out or tempfile.mkdtemp(prefix="calib_e2e_")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               KINETO_LOG_LEVEL="6")
    results = []
    print(f"{'row':<4} {'expected':>11} {'predicted':>11} {'error':>8} {'wall s':>7} {'RSS GiB':>8}")
    for row in a.rows.split(","):
        cmd = [sys.executable, __file__, "--one", row, "--out", out]
        if a.efficiency:
            cmd += ["--efficiency", a.efficiency]
        if a.eager:
            cmd.append("--eager")
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode:
            print(f"{row}: failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        results.append(r)
        print(f"{row:<4} {r['expected']:>11,.2f} {r['predicted']:>11,.2f} {100 * r['error']:>+7.1f}% "
              f"{r['wall_s']:>7.1f} {r['rss_gib']:>8.2f}")
    LAST.write_text(json.dumps(results))
    for row, note in NOTES.items():
        print(f"note {row}: {note}")
    print(f"traces: {out}; figures: {LAST}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
