"""The calibration fit's bookkeeping: eager and --compiled dry runs each get their own fitted constant and band
in predict_table.json, and a prediction uses the one of its mode."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import bench.bench_calibration_e2e as b
from neuron_profiler.predict import compose

TABLE = Path(__file__).resolve().parents[2] / "neuron_profiler" / "hardware" / "predict_table.json"


def _row(name: str, expected: float, micro_ns: float, compiled: bool) -> dict:
    """A one-stage row whose step is exactly its micro-step (no matmul under any cap, nothing else)."""
    return {"row": name, "expected": expected, "global_batch": 1, "m": 1, "pp": 1, "p2p_ns": 0.0, "fixed_ns": 0.0,
            "compiled": compiled, "stages": [{"micro": micro_ns, "tp": 0.0, "extra": [0.0] * len(b.GRID_PF)}]}


def test_a_compiled_fit_is_written_beside_the_eager_one(tmp_path):
    table = tmp_path / "predict_table.json"
    shutil.copy(TABLE, table)
    before = json.loads(table.read_text())["fitted"]
    # 1 sample per 1e9 ns = 1 sample/s predicted: rows at 1.0 and 1.25 expected -> errors 0 % and -20 %
    rows = [_row("C1", 1.0, 1e9, True), _row("C2", 1.25, 1e9, True)]
    f = b.fit(rows)
    assert f["errors"] == {"C1": 0.0, "C2": -0.2}
    b.write_fit(f, rows, table)
    after = json.loads(table.read_text())["fitted"]
    assert after["matmul_peak_fraction"] == before["matmul_peak_fraction"]     # the eager fit untouched
    assert after["band"] == before["band"]
    assert after["band_compiled"]["low"] == -0.2 and after["band_compiled"]["high"] == 0.0
    assert "--compiled" in after["matmul_peak_fraction_compiled"]["fit"]


def test_a_prediction_uses_the_constant_of_its_mode():
    t = json.loads(TABLE.read_text())["fitted"]
    assert compose.fitted("matmul_peak_fraction") == t["matmul_peak_fraction"]["value"]
    assert compose.fitted("matmul_peak_fraction", compiled=True) == t["matmul_peak_fraction_compiled"]["value"]
