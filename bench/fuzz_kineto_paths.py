#!/usr/bin/env python3
"""Differential fuzzer of the Kineto importer's two paths: the compiled scan / dict passes (``_fastextract``)
against the Python path they replace, on structure-aware mutations of the real traces (``kineto_mutations``).

    python bench/fuzz_kineto_paths.py [--inputs 2000] [--seed 1] [--save DIR]

Each mutated document is read by ``api._read_events`` twice, with the compiled module and without it; both
must give the same document, columns and counts, or the same error. Prints the counts; exit code 1 when
any input differs (saved to ``--save`` when given).
"""
from __future__ import annotations

import argparse
import math
import random
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kineto_mutations as km  # noqa: E402

from neuron_profiler.importers.kineto import api, extract  # noqa: E402

_ATTRS = ("n_events", "n_instants", "n_counters", "skipped", "skipped_memory", "skipped_counters", "coll_args",
          "bad_flows", "inexact_ts", "meta", "ctr")


def same(a: Any, b: Any) -> bool:
    """Deep equality of extraction results (arrays element-wise, NaN equal to NaN, same types)."""
    if isinstance(a, extract.IdColumn):
        return isinstance(b, extract.IdColumn) and same(a.raw, b.raw)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else a.tolist() == b.tolist())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def read(path: Path, use_compiled: bool) -> tuple[Any, ...]:
    compiled = extract.compiled
    extract.compiled = compiled if use_compiled else None
    try:
        doc, ev = api._read_events(path, lambda _s: None)
        cols = ev.finish() if isinstance(ev, extract.EventColumns) else None
        return ("ok", doc, cols, *(getattr(ev, a, None) for a in _ATTRS))
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return ("error", type(e).__name__, str(e))
    finally:
        extract.compiled = compiled


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save", type=Path, help="keep inputs whose results differ in this folder")
    a = ap.parse_args(argv)
    if extract.compiled is None:
        print("the C extension _fastextract is not built: nothing to compare", file=sys.stderr)
        return 1
    warnings.simplefilter("ignore")
    sys.setrecursionlimit(10_000)  # deeply nested mutated values
    rng = random.Random(a.seed)
    seeds, mutator = km.load_seeds(rng), km.Mutator(rng)
    counts = {"same result": 0, "same error": 0, "different": 0}
    with tempfile.TemporaryDirectory(prefix="fuzz_paths_") as d:
        for i in range(a.inputs):
            name, text = mutator.document(seeds)
            path = Path(d) / ("t.json.gz" if text[:2] == b"\x1f\x8b" else "t.json")
            path.write_bytes(text)
            fast, slow = read(path, True), read(path, False)
            try:
                equal = same(fast, slow)
            except RecursionError:  # documents nested too deeply to compare: their errors / docs by repr
                equal = repr(fast) == repr(slow)
            key = "different" if not equal else "same result" if fast[0] == "ok" else "same error"
            counts[key] += 1
            if not equal:
                print(f"input {i} (from {name}): the paths differ", file=sys.stderr)
                if a.save:
                    a.save.mkdir(parents=True, exist_ok=True)
                    (a.save / f"differ_{i}{''.join(path.suffixes)}").write_bytes(text)
    print(f"{a.inputs} inputs (seed {a.seed}): " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if counts["different"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
