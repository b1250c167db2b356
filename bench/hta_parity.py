"""Worst row per trace of ``hta_compatible=True`` against HTA 0.5.0's own numbers.

    python bench/hta_parity.py [--reference tests/data/hta_reference.json] [--realtraces tests/data/realtraces]

The reference is written by ``bench/hta_reference.py`` (run with HTA in its own venv, any ``--realtraces``
folder); this script runs in our venv and compares, for every row HTA produced (kernel-type sums, temporal
breakdown, comm/comp overlap, idle-time breakdown), our number through the Trace methods with
``hta_compatible=True``. Relative difference = |ours - HTA| / max(|HTA|, 1) (the parity test's measure, 0.5 %
tolerance). Prints one line per trace: rows compared, rows off by more than 0.5 %, the worst row.
``--epoch``: the reference's ``epoch_rewrites`` instead (the traces rewritten into epoch µs, as
``bench/hta_reference.py`` gave them to HTA).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import warnings
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parent.parent


def _rows(frame: dict) -> list[dict]:
    return [dict(zip(frame["columns"], r)) for r in frame["rows"]]


def _ok(entry: dict, name: str) -> dict | None:
    v = entry.get(name)
    return None if v is None or "error" in v else v


def compare(entry: dict, traces: dict) -> list[tuple[str, float, float]]:
    """(row label, ours, HTA's) for every number HTA produced for one trace set (``traces``: rank -> Trace)."""
    out: list[tuple[str, float, float]] = []
    kb = _ok(entry, "gpu_kernel_breakdown")
    if kb and kb["by_kernel_type"]["rows"]:
        ours: dict[str, float] = {}
        for t in traces.values():
            bt, _ = t.kernel_breakdown(hta_compatible=True)
            for k, v in zip(bt["kernel_type"], bt["sum_ns"]):
                ours[k] = ours.get(k, 0) + v / 1000.0
        out += [(f"kernel_type {r['kernel_type']} sum", ours.get(r["kernel_type"], 0.0), r["sum"])
                for r in _rows(kb["by_kernel_type"])]
    if kb and kb["by_name"]["rows"]:
        out += [(f"by_name rank {r} {t} {n[:40]}", o, h) for r, t, n, o, h in by_name_sums(kb["by_name"], traces)]
    tb = _ok(entry, "temporal_breakdown")
    for r in _rows(tb) if tb else []:
        got = traces[r["rank"]].temporal_breakdown(hta_compatible=True).iloc[0]
        out += [(f"rank {r['rank']} {c}(us)", got[f"{c}_ns"] / 1000.0, r[f"{c}(us)"])
                for c in ("idle_time", "compute_time", "non_compute_time", "kernel_time")]
    co = _ok(entry, "comm_comp_overlap")
    for r in _rows(co) if co else []:
        pct = traces[r["rank"]].comm_comp_overlap(hta_compatible=True)["comp_comm_overlap_pctg"].iloc[0]
        if r["comp_comm_overlap_pctg"] is not None:
            out.append((f"rank {r['rank']} comp_comm_overlap_pctg", float(pct), r["comp_comm_overlap_pctg"]))
    it = _ok(entry, "idle_time_breakdown")
    if it:
        idle = pd.concat([t.idle_time_breakdown(hta_compatible=True) for t in traces.values()])
        got = {(r, s, c): v / 1000.0 for r, s, c, v in idle[["rank", "stream", "idle_category",
                                                            "idle_time_ns"]].itertuples(index=False)}
        for r in _rows(it["breakdown"]):
            k = (r["rank"], r["stream"], r["idle_category"])
            out.append((f"idle rank {k[0]} stream {k[1]} {k[2]}", got.get(k, 0.0), r["idle_time"]))
    return out


def by_name_sums(frame: dict, traces: dict) -> list[tuple[int, str, str, float, float]]:
    """(rank, kernel type, name, our sum in µs, HTA's) for every row of HTA's by-name kernel breakdown; its
    ``others`` row (the names past the top ones) is compared with our type total less HTA's named rows."""
    out = []
    rows = _rows(frame)
    for rank, t in traces.items():
        bn = t.kernel_breakdown(hta_compatible=True)[1]
        sums = {(k, n): v / 1000.0 for n, k, v in bn[["name", "kernel_type", "sum_ns"]].itertuples(index=False)}
        for r in (r for r in rows if r["rank"] == rank):
            k = r["kernel_type"]
            if r["name"] == "others":
                named = {x["name"] for x in rows if x["rank"] == rank and x["kernel_type"] == k}
                ours = sum(v for (kk, n), v in sums.items() if kk == k and n not in named)
            else:
                ours = sums.get((k, r["name"]), 0.0)
            out.append((rank, k, r["name"], ours, r["sum (us)"]))
    return out


def rel(ours: float, ref: float) -> float:
    return abs(ours - ref) / max(abs(ref), 1.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", type=Path, default=REPO / "tests" / "data" / "hta_reference.json")
    ap.add_argument("--realtraces", type=Path, default=REPO / "tests" / "data" / "realtraces")
    ap.add_argument("--epoch", action="store_true", help="compare the epoch-µs rewrites (epoch_rewrites)")
    args = ap.parse_args()
    import analysis

    doc = json.loads(args.reference.read_text())
    ref = doc["epoch_rewrites"] if args.epoch else doc["traces"]
    spec = importlib.util.spec_from_file_location("hta_reference", REPO / "bench" / "hta_reference.py")
    assert spec is not None and spec.loader is not None
    hta_reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hta_reference)
    tmp = tempfile.TemporaryDirectory(prefix="hta_parity_")
    for key, entry in sorted(ref.items()):
        if "error" in entry:
            entry = entry.get("fallback", entry) | {"files": entry.get("files") or [key]}
        if "error" in entry:
            print(f"{key}: HTA produced no result ({entry['error']['type']})")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traces = {}
            for f in entry.get("files") or [key]:
                path = args.realtraces / f
                if args.epoch:
                    path = Path(tmp.name) / "trace.json"
                    path.write_bytes(hta_reference.epoch_text(args.realtraces / f))
                t = analysis.load(path, cache=False)
                traces[t.rank] = t
        rows = compare(entry, traces)
        if not rows:
            print(f"{key}: HTA produced no breakdown rows")
            continue
        worst = max(rows, key=lambda r: rel(r[1], r[2]))
        bad = sum(rel(o, h) > 0.005 for _, o, h in rows)
        print(f"{key}: {len(rows)} rows, {bad} off by > 0.5 %; worst {rel(worst[1], worst[2]) * 100:.3f} % "
              f"({worst[0]}: ours {worst[1]:.6g}, HTA {worst[2]:.6g})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
