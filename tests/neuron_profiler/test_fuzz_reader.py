"""CI's share of the reader fuzzer (``bench/fuzz_reader.py``; run it outside CI for 100k+ inputs): a fixed set of
2,000 mutated trace files, each under a time and a memory limit, must give only documented outcomes."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "fuzz_reader.py"


def _fuzzer():
    spec = importlib.util.spec_from_file_location("fuzz_reader", BENCH)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["fuzz_reader"] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="per-input peak RSS needs Linux /proc")
def test_2000_mutated_files_give_only_documented_outcomes() -> None:
    r = _fuzzer().fuzz(2000, workers=2, seed=20261201, timeout=30, mem_limit_mb=2048, fixed_mb=128)
    assert r["inputs"] == 2000
    assert r["findings"] == {}, r["findings"]  # no undocumented exception, hang, crash or memory over 10x + 128 MB
    documented = sum(v for k, v in r["outcomes"].items() if k.startswith("documented"))
    assert documented > 200 and r["outcomes"].get("ok", 0) > 200  # the mutations do break files, not all of them
    assert r["max_excess_over_10x_bytes"] < 128 << 20


def test_inputs_are_reproducible() -> None:
    fz = _fuzzer()
    import tempfile

    seeds = fz.make_seeds(Path(tempfile.mkdtemp()))
    assert [fz.make_input(seeds, 3, i) for i in range(20)] == [fz.make_input(seeds, 3, i) for i in range(20)]
    assert len({fz.make_input(seeds, 3, i) for i in range(20)}) > 15
