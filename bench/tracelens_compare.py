"""GEMM and convolution FLOPs and bytes: the op model against AMD's TraceLens, op by op.

TraceLens is not a dependency of this project (nor of its tests): install it from its public source into an
environment of its own, dump its per-op numbers there, then compare here::

    python -m venv /work/venv_tracelens
    /work/venv_tracelens/bin/pip install pandas tqdm orjson tabulate PyYAML openpyxl
    /work/venv_tracelens/bin/pip install --no-deps -e <a checkout of AMD-AGI/TraceLens>
    /work/venv_tracelens/bin/python bench/tracelens_compare.py dump /tmp/tl.jsonl TRACE.json.gz ...
    python bench/tracelens_compare.py compare /tmp/tl.jsonl

``dump`` writes, per op TraceLens has a perf model for (its unified perf table), the op's name, External id,
shapes and TraceLens's GFLOPS and "Data Moved (MB)" (MiB). ``compare`` matches each GEMM / convolution op
(``aten::mm``, ``addmm``, ``bmm``, ``linear``, convolutions and ``convolution_backward``) to the host op of the
same name and External id, and prints how many agree within 1 % on FLOPs and on bytes, then every
disagreement grouped by (op, relative difference) with one example. The conventions that differ are in
docs/opmodel.md ("Against TraceLens").
"""
from __future__ import annotations

import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def dump(out: str, traces: list[str]) -> None:
    """(TraceLens environment) One JSON line per op with a TraceLens perf model."""
    from TraceLens import TreePerfAnalyzer  # the TraceLens environment only

    with open(out, "w") as f:
        for p in traces:
            df = TreePerfAnalyzer.from_file(p).build_df_unified_perf_table()
            for r in df.to_dict("records"):
                if r.get("has_perf_model") is not True:
                    continue
                f.write(json.dumps({"trace": p, "name": r.get("name"), "ext": r.get("External id"),
                                    "dims": str(r.get("Input Dims")), "gflops": r.get("GFLOPS"),
                                    "mib": r.get("Data Moved (MB)")}, default=str) + "\n")
            print(f"{p}: {len(df)} ops", file=sys.stderr)


def _num(v: object, scale: float) -> float:
    try:
        x = float(v) * scale  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan
    return x if math.isfinite(x) and x > 0 else math.nan


def compare(rows_path: str) -> int:
    """(This project's environment) Agreement within 1 % on FLOPs and bytes; disagreements listed."""
    sys.path.insert(0, str(REPO))
    import analysis
    from analysis.analyses.work import host_op_work
    from neuron_profiler.opmodel import classify

    rows = [json.loads(ln) for ln in open(rows_path)]
    by_trace: dict[str, list] = defaultdict(list)
    for r in rows:
        by_trace[r["trace"]].append(r)
    tot: Counter = Counter()
    diffs: dict[tuple, list] = defaultdict(list)
    for p, rs in by_trace.items():
        t = analysis.load(p, cache=False)
        ho = t.whole_table("host_ops", ["name", "external_id"])
        w = host_op_work(t)
        key = {(n, int(e)): i for i, (n, e) in enumerate(zip(ho["name"].astype(str), ho["external_id"].to_numpy()))}
        for r in rs:
            if classify(r["name"]) not in ("matmul", "conv"):
                continue
            try:
                i = key.get((r["name"], int(r["ext"])))
            except (TypeError, ValueError):
                i = None
            if i is None:
                tot["not matched"] += 1
                continue
            tot["ops"] += 1
            for what, ours, theirs in (("FLOPs", w["flops"].iloc[i], _num(r["gflops"], 1e9)),
                                       ("bytes", w["bytes"].iloc[i], _num(r["mib"], 1 << 20))):
                if not (math.isfinite(ours) and math.isfinite(theirs)):
                    tot[f"{what}: not priced by both"] += 1
                    continue
                tot[f"{what}: both price"] += 1
                rel = ours / theirs - 1
                if abs(rel) <= 0.01:
                    tot[f"{what}: agree within 1 %"] += 1
                else:
                    diffs[(what, r["name"], round(rel, 3))].append((Path(p).name, r["dims"][:100]))
    for k, v in sorted(tot.items()):
        print(f"{k:32s} {v}")
    for (what, name, rel), ex in sorted(diffs.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(ex):5d} x {what} {name}: ours {100 * rel:+.1f} %  e.g. {ex[0][0]} {ex[0][1]}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "dump":
        dump(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 3 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2]))
    else:
        print(__doc__)
        sys.exit(2)
