"""Record reference numbers from Holistic Trace Analysis (HTA 0.5.0) for the real traces.

Run with the HTA venv's python (HTA is a reference tool only, never a dependency of ours):

    python3 -m venv /opt/hta-venv && /opt/hta-venv/bin/pip install holistictraceanalysis==0.5.0
    /opt/hta-venv/bin/python bench/hta_reference.py [--realtraces DIR] [--out tests/data/hta_reference.json]
        [--fallback-python /opt/hta-venv-pd2/bin/python]

pip resolves HTA 0.5.0 to pandas 3.x, under which one trace fails to load; the optional fallback venv
(``python3 -m venv /opt/hta-venv-pd2 && /opt/hta-venv-pd2/bin/pip install holistictraceanalysis==0.5.0
"pandas<3"``) re-runs only such traces (all other results are identical under pandas 2.3 and 3.1).

For each trace under ``realtraces`` (each file on its own, plus the 2-rank ``trace_filter/`` pair
together) it runs ``TraceAnalysis`` and stores, keyed by the path relative to ``realtraces``:
``get_gpu_kernel_breakdown`` (both frames), ``get_temporal_breakdown``,
``get_idle_time_breakdown`` (all ranks, all streams, with interval stats),
``get_comm_comp_overlap`` and the load time; a few traces are also analysed rewritten into the
epoch-microsecond time base (``epoch_rewrites``: where HTA's float64 reading of ts/dur shows).
HTA failures are stored as exception type + message.
All times from HTA are in HTA's units: microseconds (us), as in the Kineto JSON ``ts``/``dur``.
Everything but ``load_time_s`` is deterministic; the JSON is written with sorted keys.
How HTA computes these numbers: docs/hta_definitions.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import logging
import math
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parent.parent
DEFAULT_REALTRACES = Path(os.environ.get("REALTRACES_DIR", REPO / "tests" / "data" / "realtraces"))
DEFAULT_OUT = REPO / "tests" / "data" / "hta_reference.json"
#: traces with baseTimeNanoseconds also analysed rewritten into the epoch-µs time base (every ts + base / 1000,
#: 3 decimals, exact in decimal): ~1.7e15 µs, where HTA's float64 reading moves ts/dur by up to 0.125 µs
#: before its µs rounding (docs/hta_definitions.md §1.3); stored under "epoch_rewrites"
EPOCH_REWRITES = (
    "HolisticTraceAnalysis/mtia_inference_trace/mtia_inference_rank_0.json.gz",
    "HolisticTraceAnalysis/nccl_parser_config/nccl_data.json.gz",
    "HolisticTraceAnalysis/triton_example/triton_example.json.gz",
    "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz",
)
_TS = re.compile(rb'("ts"\s*:\s*)(-?[0-9][0-9.eE+-]*)')
MULTI_RANK_SETS = {"HolisticTraceAnalysis/trace_filter/": ["sampled_rank-0.json.gz", "sampled_rank-1.json.gz"]}


def _jsonable(v: Any) -> Any:
    """Convert numpy/pandas scalars to plain JSON values (NaN/inf -> None)."""
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        f = float(v)
        return None if math.isnan(f) or math.isinf(f) else f
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, (int, str, bool)):
        return v
    return str(v)


def frame(df: pd.DataFrame | None, keep_index: bool = False) -> dict | None:
    """A DataFrame as {"columns": [...], "rows": [[...], ...]} with plain JSON values."""
    if df is None:
        return None
    if keep_index:
        df = df.reset_index()
    return {
        "columns": [str(c) for c in df.columns],
        "rows": [[_jsonable(v) for v in row] for row in df.itertuples(index=False, name=None)],
    }


def _error(exc: BaseException) -> dict:
    """Exception type + first message line; for message-less errors (bare asserts) the raising HTA line."""
    msg = str(exc).strip().splitlines()
    err = {"type": type(exc).__name__, "message": (msg[0] if msg else "")[:500]}
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/hta/" in f.filename]
    if frames:
        f = frames[-1]
        err["where"] = f"hta/{f.filename.split('/hta/', 1)[1]}:{f.name}:{f.lineno}: {(f.line or '').strip()}"
    return {"error": err}


def _run(fn: Callable[[], Any]) -> Any:
    """Call an HTA analysis with its stdout/warnings silenced; failures become {"error": ...}."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return fn()
    except Exception as exc:  # noqa: BLE001 - HTA raises anything; we record it
        return _error(exc)


def _include_last_step_variant(trace_dir: str) -> dict:
    """Reload with include_last_profiler_step=True (see docs/hta_definitions.md section 1.7)."""
    from hta.trace_analysis import TraceAnalysis

    loaded = _run(lambda: TraceAnalysis(trace_dir=trace_dir, include_last_profiler_step=True))
    if isinstance(loaded, dict):
        return loaded
    return {
        "gpu_kernel_breakdown_by_kernel_type": _run(
            lambda: frame(loaded.get_gpu_kernel_breakdown(visualize=False)[0])),
        "temporal_breakdown": _run(lambda: frame(loaded.get_temporal_breakdown(visualize=False))),
        "comm_comp_overlap": _run(lambda: frame(loaded.get_comm_comp_overlap(visualize=False))),
    }


def analyse(trace_dir: str) -> dict:
    """Load one trace directory with HTA and run the reference analyses."""
    from hta.trace_analysis import TraceAnalysis

    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    loaded = _run(lambda: TraceAnalysis(trace_dir=trace_dir))
    out["load_time_s"] = round(time.perf_counter() - t0, 3)
    if isinstance(loaded, dict):
        out.update(loaded)
        return out
    ta = loaded
    t = ta.t
    ranks = sorted(int(r) for r in t.traces)
    sym = t.symbol_table.get_sym_table()
    out["ranks"] = ranks
    out["min_ts_us"] = _jsonable(t.min_ts)
    out["profiler_step_symbols"] = sorted(s for s in sym if "ProfilerStep" in s)
    out["last_step_filter_applied"] = len(out["profiler_step_symbols"]) >= 2
    out["rows_after_load"] = {str(r): int(len(t.traces[r])) for r in ranks}
    out["gpu_rows_stream_ne_minus1"] = {str(r): int(t.traces[r]["stream"].ne(-1).sum()) for r in ranks}

    def kernel_breakdown() -> dict:
        by_type, by_name = ta.get_gpu_kernel_breakdown(visualize=False)
        return {"by_kernel_type": frame(by_type), "by_name": frame(by_name)}

    def temporal() -> dict:
        return frame(ta.get_temporal_breakdown(visualize=False))

    def idle() -> dict:
        res, stats = ta.get_idle_time_breakdown(ranks=ranks, visualize=False, show_idle_interval_stats=True)
        return {"breakdown": frame(res), "interval_stats": frame(stats, keep_index=True)}

    def overlap() -> dict:
        return frame(ta.get_comm_comp_overlap(visualize=False))

    out["gpu_kernel_breakdown"] = _run(kernel_breakdown)
    out["temporal_breakdown"] = _run(temporal)
    out["idle_time_breakdown"] = _run(idle)
    out["comm_comp_overlap"] = _run(overlap)
    if out["last_step_filter_applied"]:
        out["include_last_profiler_step_true"] = _include_last_step_variant(trace_dir)
    return out


def trace_sets(realtraces: Path) -> dict[str, list[Path]]:
    """Key (path relative to realtraces, or a directory key ending in '/') -> files to analyse together."""
    sets: dict[str, list[Path]] = {}
    for p in sorted(realtraces.rglob("*")):
        if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz")):
            sets[p.relative_to(realtraces).as_posix()] = [p]
    for key, names in MULTI_RANK_SETS.items():
        files = [realtraces / key / n for n in names]
        if all(f.exists() for f in files):
            sets[key] = files
    return sets


def analyse_files(files: list[Path]) -> dict:
    """Symlink the files into a fresh temp dir (HTA wants a directory of per-rank traces)."""
    with tempfile.TemporaryDirectory(prefix="hta_ref_") as d:
        for f in files:
            os.symlink(f, Path(d) / f.name)
        return analyse(d)


def to_epoch(text: bytes) -> bytes:
    """A Kineto trace's text in the epoch-µs time base: every ``ts`` + baseTimeNanoseconds / 1000 written with
    3 decimals (decimal arithmetic: the rewrite is exact), baseTimeNanoseconds removed."""
    m = re.search(rb'"baseTimeNanoseconds"\s*:\s*(\d+)', text)
    if m is None:
        raise ValueError("the trace has no baseTimeNanoseconds")
    off = Decimal(int(m.group(1))) / 1000

    def shift(t: re.Match) -> bytes:
        return t.group(1) + format(Decimal(t.group(2).decode()) + off, ".3f").encode()

    out = _TS.sub(shift, text)
    return re.sub(rb'"baseTimeNanoseconds"\s*:\s*\d+', b'"baseTimeNanoseconds_removed": 0', out)


def epoch_text(path: Path) -> bytes:
    """:func:`to_epoch` of a (possibly gzipped) trace file."""
    raw = path.read_bytes()
    return to_epoch(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def analyse_epoch(path: Path) -> dict:
    """HTA's numbers for the trace rewritten into the epoch-µs time base (:func:`to_epoch`)."""
    with tempfile.TemporaryDirectory(prefix="hta_ref_epoch_") as d:
        (Path(d) / "trace.json").write_bytes(epoch_text(path))
        return analyse(d)


def _status(res: dict) -> str:
    failed = {k: v["error"] for k, v in res.items() if isinstance(v, dict) and "error" in v}
    if "error" in res:
        failed["load"] = res["error"]
    if not failed:
        return "ok"
    return "FAILED " + "; ".join(f"{k}: {e['type']}: {e['message'] or e.get('where', '')}" for k, e in failed.items())


def _fallback(python: str, realtraces: Path, key: str) -> dict:
    """Re-run one key in another HTA venv (e.g. HTA 0.5.0 on pandas 2.x) when it failed to load here."""
    cmd = [python, str(Path(__file__).resolve()), "--realtraces", str(realtraces), "--key", key]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        return {"python": python, "error": {"type": "SubprocessError", "message": proc.stderr.strip()[-300:]}}
    return json.loads(proc.stdout)


def _env() -> dict:
    from importlib.metadata import version

    return {"hta_version": version("holistictraceanalysis"), "pandas_version": pd.__version__,
            "numpy_version": np.__version__, "python_version": sys.version.split()[0]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--realtraces", type=Path, default=DEFAULT_REALTRACES)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--key", help="analyse only this key and print its JSON result to stdout (no file written)")
    ap.add_argument("--fallback-python", help="python of a second HTA venv used for traces whose load fails "
                    "here (optional; stored under 'fallback' with its versions)")
    args = ap.parse_args()

    import hta  # noqa: F401 - fail early outside the HTA venv

    logging.getLogger("hta").setLevel(logging.ERROR)
    if not args.realtraces.is_dir():
        print(f"realtraces folder not found: {args.realtraces}", file=sys.stderr)
        return 2
    sets = trace_sets(args.realtraces)
    if args.key:
        if args.key not in sets:
            print(f"unknown key {args.key!r}; valid: {sorted(sets)}", file=sys.stderr)
            return 2
        res = analyse_files(sets[args.key])
        res.update(_env())
        print(json.dumps(res, sort_keys=True))
        return 0

    results: dict[str, Any] = {}
    for key, files in sets.items():
        res = analyse_files(files)
        res["files"] = [f.relative_to(args.realtraces).as_posix() for f in files]
        results[key] = res
        print(f"{key}: load {res['load_time_s']:.2f} s, {_status(res)}", flush=True)
        if "error" in res and args.fallback_python:
            res["fallback"] = fb = _fallback(args.fallback_python, args.realtraces, key)
            print(f"  fallback ({fb.get('pandas_version', '?')} pandas): {_status(fb)}", flush=True)

    epoch: dict[str, Any] = {}
    for rel in EPOCH_REWRITES:
        if (args.realtraces / rel).is_file():
            epoch[rel] = res = analyse_epoch(args.realtraces / rel)
            print(f"{rel} (epoch-us rewrite): load {res['load_time_s']:.2f} s, {_status(res)}", flush=True)
    doc = {
        **_env(),
        "units": {
            "time": "us (HTA keeps Kineto JSON microseconds; float ts are rounded: ts=ceil(ts), end=floor(ts+dur))",
            "load_time_s": "seconds, wall clock of TraceAnalysis(trace_dir=...) (not deterministic)",
            "pctg/percentage": "percent (0-100)",
            "idle_time_ratio": "fraction (0-1) of the stream's total idle time",
        },
        "calls": {
            "gpu_kernel_breakdown": "get_gpu_kernel_breakdown(visualize=False) (defaults: duration_ratio=0.8, "
            "num_kernels=10, include_memory_kernels=True)",
            "temporal_breakdown": "get_temporal_breakdown(visualize=False)",
            "idle_time_breakdown": "get_idle_time_breakdown(ranks=<all>, visualize=False, "
            "show_idle_interval_stats=True) (consecutive_kernel_delay=30, streams=all)",
            "comm_comp_overlap": "get_comm_comp_overlap(visualize=False)",
            "load": "TraceAnalysis(trace_dir=<temp dir with symlinks>) (include_last_profiler_step=False)",
            "include_last_profiler_step_true": "only when the last-step filter applies: the same trace reloaded "
            "with include_last_profiler_step=True (by-type kernel breakdown, temporal breakdown, overlap)",
            "epoch_rewrites": "the traces of EPOCH_REWRITES rewritten into the epoch-us time base (to_epoch: "
            "every ts + baseTimeNanoseconds / 1000, 3 decimals), analysed as under 'traces'",
            "fallback": "only for traces whose load failed and when --fallback-python was given: the same "
            "analyses run by that python (its versions recorded inside)",
        },
        "frame_format": "{'columns': [...], 'rows': [[...], ...]}; NaN -> null",
        "definitions": "docs/hta_definitions.md",
        "traces": results,
        "epoch_rewrites": epoch,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
