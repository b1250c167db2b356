"""Op-model coverage: how much of the operator time of real traces the op model prices.

For every real torch.profiler trace of ``tests/data/realtraces`` (the files of ``tests/realdata.py``) and every
bundled ``sample_traces/*.nprof``, the host ops with recorded shapes are priced through analysis' one path
(``analysis.analyses.work.host_op_work``: ``neuron_profiler.opmodel.lower_signature``); an op is *priced*
when both its FLOPs and its bytes are known (not NaN). Each op is weighed by the time it accounts for:

* traces with device rows: the device time of the instructions (kernels) it launched;
* traces without device rows, or whose device rows no op with shapes launched (MTIA): its host *self*
  time (duration minus its direct children's), so nested ops (``aten::linear`` -> ``aten::addmm``) are not
  counted twice.

Collectives (``nccl:*``, ``gloo:*``, ``record_param_comms``, ...) are left out of the operator time and their
time printed apart: the collectives analysis prices them by bus bandwidth, not as FLOPs and HBM bytes.

Printed per trace: the operator time with recorded shapes, the share of it that is priced (FLOPs and bytes
known) and the FLOPs-known / bytes-known shares, then the top unpriced ops with their time and the op
model's reason; at the end the top unpriced ops over all traces (by share of their trace's operator time,
summed, so a small trace weighs as much as a big one). Device time launched by ops without recorded shapes
is reported apart (the op model cannot price what was not recorded).

    python bench/opmodel_coverage.py [--top 8] [--realtraces DIR]
"""
from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))
from realdata import REAL_TRACE_FILES, REALTRACES, SAMPLE_TRACES  # noqa: E402

import analysis  # noqa: E402
from analysis.analyses.hot_ops import host_op_parents  # noqa: E402
from analysis.analyses.work import host_op_work  # noqa: E402
from analysis.core.tables import row_positions  # noqa: E402


def _has_shapes(shapes: pd.Series) -> np.ndarray:
    s = shapes.astype(str).to_numpy(dtype=object)
    return np.array([bool(x) and x not in ("[]", "nan", "None") for x in s], dtype=bool)


def op_times(trace) -> tuple[pd.DataFrame, str, float, float]:
    """Per host op with recorded shapes (collectives left out): name, time (ns), flops/bytes known, note;
    the weighting used ("device" / "host self"), the device time of instructions launched by ops without
    shapes, and the time of the collectives left out."""
    ho = trace.whole_table("host_ops", ["name", "track", "start_ts", "duration_ns", "input_shapes"])
    work = host_op_work(trace)
    ins = trace.whole_table("instructions", ["duration_ns", "framework_op"])
    shaped = _has_shapes(ho["input_shapes"])
    linked = ins[ins["framework_op"].to_numpy() >= 0] if len(ins) else ins
    t = np.zeros(len(ho))
    if len(linked):
        pos = row_positions(ho.index, linked["framework_op"].to_numpy())
        ok = pos >= 0
        t = np.bincount(pos[ok], weights=linked["duration_ns"].to_numpy()[ok].astype(float), minlength=len(ho))
    if t[shaped].sum() > 0:
        mode, unshaped = "device", float(t[~shaped].sum())
    else:  # no device rows, or none launched by an op with shapes (MTIA): the ops' host self time
        dur = ho["duration_ns"].to_numpy().astype(float)
        parent = host_op_parents(trace)
        child = np.bincount(parent[parent >= 0], weights=dur[parent >= 0], minlength=len(ho))
        t, mode, unshaped = np.maximum(dur - child, 0.0), "host self", 0.0
    df = pd.DataFrame({"name": ho["name"].astype(str).to_numpy(), "time": t,
                       "fk": np.isfinite(work["flops"].to_numpy(dtype=float)),
                       "bk": np.isfinite(work["bytes"].to_numpy(dtype=float)),
                       "note": work["note"].astype(str).to_numpy()})
    comm = np.array([_is_communication(x) for x in df["name"]], dtype=bool)
    return df[shaped & (t > 0) & ~comm], mode, unshaped, float(df["time"][shaped & comm].sum())


def _is_communication(name: str) -> bool:
    """Collectives and their wrappers: priced by the collectives analysis (bus bandwidth), not as FLOPs and
    HBM bytes, so they are left out of the operator time here and reported apart."""
    return name.startswith(("nccl:", "gloo:", "c10d::", "_c10d_functional::", "c10d_functional::", "All2All_")) \
        or name == "record_param_comms"


def report(label: str, trace, top: int, overall: dict) -> None:
    df, mode, unshaped, comm = op_times(trace)
    total = df["time"].sum()
    if total <= 0:
        print(f"\n== {label}: no operator time with recorded shapes ({mode} time)")
        return
    priced = df["fk"] & df["bk"]
    print(f"\n== {label}  [{mode} time, {total / 1e6:,.3f} ms of ops with shapes"
          + (f"; {unshaped / 1e6:,.3f} ms launched by ops without shapes" if unshaped else "")
          + (f"; {comm / 1e6:,.3f} ms of collectives left out" if comm else "") + "]")
    print(f"   priced {100 * df.time[priced].sum() / total:6.2f} %   FLOPs known "
          f"{100 * df.time[df.fk].sum() / total:6.2f} %   bytes known {100 * df.time[df.bk].sum() / total:6.2f} %")
    un = df[~priced].groupby(["name", "note"], sort=False)["time"].agg(["sum", "count"]).sort_values(
        "sum", ascending=False)
    for (name, note), r in un.head(top).iterrows():
        print(f"   {100 * r['sum'] / total:6.2f} %  {int(r['count']):6d} x  {name:<34} {note}")
        overall[name] += r["sum"] / total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--top", type=int, default=8, help="unpriced ops listed per trace")
    ap.add_argument("--realtraces", type=Path, default=REALTRACES)
    a = ap.parse_args(argv)
    overall: dict[str, float] = defaultdict(float)
    paths = [(rel, a.realtraces / rel) for rel in REAL_TRACE_FILES]
    paths += [(p.name, p) for p in sorted(SAMPLE_TRACES.glob("*.nprof"))]
    for i, (label, p) in enumerate(paths, 1):
        if not p.is_file():
            print(f"\n== {label}: absent, skipped")
            continue
        print(f"[{i}/{len(paths)}] {label}", file=sys.stderr)
        report(label, analysis.load(p, cache=False), a.top, overall)
    print("\n== top unpriced ops over all traces (sum of their share of each trace's operator time)")
    for name, share in sorted(overall.items(), key=lambda kv: -kv[1])[:20]:
        print(f"   {100 * share:7.2f} %  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
