"""``neuron-profile predict``: the argument parser and its glue (``launch/cli.py`` registers it)."""
from __future__ import annotations

import argparse
import sys

from neuron_profiler.predict.config import OPTIMIZERS, PRECISIONS, ConfigError, PredictConfig

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``predict`` subcommand to ``sub``."""
    p = sub.add_parser("predict", help="predict a distributed training run on Trainium from dry runs",
                       description="Dry-run one rank per distinct pipeline stage on fake tensors through the "
                                   "simulated runtime and compose the optimizer step (docs/simulation.md).")
    p.add_argument("model", help="built-in model (vit-base, bert-large, gpt3-23b, llama3.1-8b, llama2-70b, tiny-gpt) "
                                 "or module:callable / file.py:callable building a stage (see docs/simulation.md)")
    p.add_argument("--instance", default="trn1.32xlarge", help="instance type (default trn1.32xlarge)")
    p.add_argument("--instances", type=int, default=1)
    p.add_argument("--tp", type=int, default=1)
    p.add_argument("--pp", type=int, default=1)
    p.add_argument("--dp", type=int, default=0, help="default: every remaining NeuronCore")
    p.add_argument("--microbatch", type=int, default=1)
    p.add_argument("--global-batch", type=int, default=0, help="default: microbatch x DP (no accumulation)")
    p.add_argument("--precision", default="bf16-autocast", choices=PRECISIONS)
    p.add_argument("--optimizer", default="adamw", choices=OPTIMIZERS)
    p.add_argument("--zero1", action="store_true", help="ZeRO-1: reduce-scatter, sharded optimizer, all-gather")
    p.add_argument("--no-sequence-parallel", action="store_true")
    p.add_argument("--recompute", default="", help="none, selective, full (default: the model's recipe)")
    p.add_argument("--seq", type=int, default=0, help="override the sequence length")
    p.add_argument("--layers", type=int, default=0, help="override the layer count (reduced-size runs)")
    p.add_argument("--simulate-layers", action="store_true",
                   help="dry-run every layer of each stage instead of 1 and 2 layers extrapolated")
    p.add_argument("--compiled", action="store_true",
                   help="dry-run through torch.compile(backend='neuron') (fused kernels; the fitted constants "
                        "are calibrated on eager dry runs)")
    p.add_argument("-o", "--output-dir", default="./predict_output")
    p.add_argument("--run-id", default="")
    return p


def config_from_args(a: argparse.Namespace) -> PredictConfig:
    """The ``PredictConfig`` of parsed arguments."""
    return PredictConfig(model=a.model, instance=a.instance, instances=a.instances, tp=a.tp, pp=a.pp, dp=a.dp,
                         microbatch=a.microbatch, global_batch=a.global_batch, precision=a.precision,
                         optimizer=a.optimizer, zero1=a.zero1,
                         sequence_parallel=False if a.no_sequence_parallel else None, recompute=a.recompute,
                         seq=a.seq, layers=a.layers, simulate_layers=int(a.simulate_layers), compiled=a.compiled,
                         output_dir=a.output_dir, run_id=a.run_id)


def run(a: argparse.Namespace) -> int:
    """Run a prediction; bad configurations print one line and return 2."""
    import os
    import warnings
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    warnings.filterwarnings("ignore", module="torch.profiler")
    from neuron_profiler.predict.api import predict
    from neuron_profiler.predict.report import format_prediction
    try:
        pred = predict(config_from_args(a))
    except ConfigError as exc:
        print(f"neuron-profile predict: {exc}", file=sys.stderr)
        return 2
    print(format_prediction(pred))
    return 0
