#!/usr/bin/env python3
"""Differential fuzzer of the Kineto importer's parse: its typed decode (``decode``: msgspec into ``Event``
structs) against an independent oracle, the standard library's ``json`` parse converted to the same structs,
on structure-aware mutations of the real traces (``kineto_mutations``).

    python bench/fuzz_kineto_paths.py [--inputs 2000] [--seed 1] [--save DIR]

Each mutated document is read by ``api._read_events`` and by the oracle; both must give the same document,
columns and counts, or the same error. Prints the counts; exit code 1 when any input differs (saved to
``--save`` when given).
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

import msgspec
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kineto_mutations as km  # noqa: E402

from neuron_profiler.importers.kineto import api, extract, read, roundtrip  # noqa: E402
from neuron_profiler.importers.kineto.decode import event_list_type, replace_lone_surrogates  # noqa: E402
from neuron_profiler.trace.errors import NotATraceError  # noqa: E402

_ATTRS = ("n_events", "n_instants", "n_counters", "skipped", "skipped_memory", "skipped_counters", "coll_args",
          "bad_flows", "inexact_ts", "meta", "ctr")


def same(a: Any, b: Any) -> bool:
    """Deep equality of extraction results (arrays element-wise, NaN equal to NaN, same types)."""
    if isinstance(a, extract.IdColumn):
        return isinstance(b, extract.IdColumn) and same(a.raw, b.raw)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and \
            (np.array_equal(a, b, equal_nan=True) if a.dtype.kind == "f" else a.tolist() == b.tolist())
    if isinstance(a, msgspec.Struct):
        return type(a) is type(b) and same(msgspec.structs.astuple(a), msgspec.structs.astuple(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return type(a) is type(b) and a == b


def _result(doc: dict[str, Any], ev: Any) -> tuple[Any, ...]:
    cols = ev.finish() if isinstance(ev, extract.EventColumns) else None
    return ("ok", doc, cols, *(getattr(ev, a, None) for a in _ATTRS))


def read_importer(path: Path) -> tuple[Any, ...]:
    try:
        return _result(*api._read_events(path, lambda _s: None))
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return ("error", type(e).__name__, str(e))


def read_oracle(path: Path) -> tuple[Any, ...]:
    """The stdlib's parse (lone surrogate escapes read as U+FFFD, as the decoder does), converted to structs."""
    try:
        raw = read.read_bytes(path)
        try:
            doc = read.parse_json(read.decode_text(replace_lone_surrogates(raw), str(path)), str(path))
        except RecursionError:
            raise NotATraceError(f"{path}: nested too deeply") from None
        events = msgspec.convert(doc.pop("traceEvents"), event_list_type(doc))
        if roundtrip.embedded(doc) is not None:
            col = roundtrip.Collector()
            col.add(events)
            return _result(doc, col)
        return _result(doc, extract.extract_events(events, raw))
    except Exception as e:  # noqa: BLE001 - the error itself is compared
        return ("error", type(e).__name__, str(e))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--inputs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save", type=Path, help="keep inputs whose results differ in this folder")
    a = ap.parse_args(argv)
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
            got, want = read_importer(path), read_oracle(path)
            if got[0] == want[0] == "error":  # messages: the decoder's own, or the stdlib's
                equal = got[1] == want[1]
            else:
                try:
                    equal = same(got, want)
                except RecursionError:  # documents nested too deeply to compare: by repr
                    equal = repr(got) == repr(want)
            key = "different" if not equal else "same result" if got[0] == "ok" else "same error"
            counts[key] += 1
            if not equal:
                print(f"input {i} (from {name}): the decoder and the stdlib oracle differ: {str(got)[:200]} / "
                      f"{str(want)[:200]}", file=sys.stderr)
                if a.save:
                    a.save.mkdir(parents=True, exist_ok=True)
                    (a.save / f"differ_{i}{''.join(path.suffixes)}").write_bytes(text)
    print(f"{a.inputs} inputs (seed {a.seed}): " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if counts["different"] else 0


if __name__ == "__main__":
    raise SystemExit(main())
