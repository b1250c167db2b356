"""``neuron-profile predict``: bad configurations give one line and exit 2, before any dry run."""
from __future__ import annotations

from pathlib import Path

import pytest

from neuron_profiler.launch.cli import main

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "predict_custom.py")

BAD = [
    (["tiny-gpt", "--tp", "3"], "TP=3 does not divide the model's 8 attention heads"),
    (["tiny-gpt", "--pp", "8"], "PP=8 is larger than the model's 4 layers"),
    (["tiny-gpt", "--pp", "3"], "PP=3 does not divide the model's 4 layers"),
    (["tiny-gpt", "--instance", "trn9.xlarge"], "unknown instance type 'trn9.xlarge'"),
    (["tiny-gpt", "--tp", "64"], "TP=64 is larger than one trn1.32xlarge (32 NeuronCores)"),
    (["llama2-70b"], "a stage does not fit in HBM"),
    (["no-such-model"], "unknown model 'no-such-model'"),
    (["tiny-gpt", "--microbatch", "3", "--global-batch", "100"], "is not a multiple of microbatch 3 x DP 32"),
    (["tiny-gpt", "--tp", "2", "--pp", "2", "--dp", "16"], "= 64 NeuronCores; 1 x trn1.32xlarge have 32"),
]


@pytest.mark.parametrize("args, message", BAD)
def test_bad_configuration_one_line_exit_2(args, message, tmp_path, capsys):
    assert main(["predict", *args, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not any(tmp_path.iterdir())   # nothing written


def test_llama2_70b_fits_once_sharded(tmp_path):
    """The same model passes the memory check with the C5 layout (TP=32, PP=4: 8.2 GiB of 16 per core)."""
    from neuron_profiler.predict.api import static_bytes_per_core
    from neuron_profiler.predict.config import PredictConfig, layout
    from neuron_profiler.predict.models.zoo import get_model
    c = PredictConfig(model="llama2-70b", instances=32, tp=32, pp=4, global_batch=1024)
    m = get_model("llama2-70b")
    b = static_bytes_per_core(c, layout(c, 64, 80), m)
    # 20 layers of 856 M parameters (+ the 262 M embedding) / 32 ranks x (4 + 4 + 8) bytes
    assert b == pytest.approx((20 * 856_227_840 + 262_144_000) / 32 * 16, rel=0.01)
    assert b < 16 * 2**30


@pytest.mark.parametrize("model, message", [
    ("examples/nope.py:make_stage", "model script 'examples/nope.py' not found"),
    (f"{EXAMPLE}:nothing", f"'{EXAMPLE}' has no callable 'nothing'"),
    ("no_such_module_xyz:make", "cannot import 'no_such_module_xyz': ModuleNotFoundError"),
])
def test_custom_model_that_cannot_load(model, message, tmp_path, capsys):
    assert main(["predict", model, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
