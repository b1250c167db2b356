"""Digest of what the Kineto importer makes of every real trace: to check that a change to the importer (a
faster parser, a leaner writer) leaves its output identical.

    python3 bench/import_digest.py --save before.json      # on the old checkout
    python3 bench/import_digest.py --compare before.json   # on the new one: exit 1 and the differences if any

Per trace of ``bench_import.TRACES``: the header (without the import's own time and tool version), the footer's
row counts, dropped-event counts, metadata and time range, and for every table each column's dtype and a hash
of its values (strings decoded: the string ids may be numbered differently and still mean the same).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_import  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402

from neuron_profiler.importers.kineto import import_kineto  # noqa: E402
from neuron_profiler.trace import TABLES, read_trace  # noqa: E402

_VOLATILE_HEADER = ("createdUnixNs",)


def _column_hash(s) -> str:
    vals = s.astype(str).to_numpy() if str(s.dtype) in ("category", "object") else s.to_numpy()
    h = hashlib.sha1(str(s.dtype).encode())
    h.update("\x1f".join(map(str, vals)).encode() if vals.dtype == object else vals.tobytes())
    return h.hexdigest()[:16]


def digest(src: Path) -> dict:
    with tempfile.TemporaryDirectory() as d:
        out = import_kineto(src, Path(d) / "t.nprof", progress=False)
        tf = read_trace(out)
        header = {k: v for k, v in MessageToDict(tf.header).items() if k not in _VOLATILE_HEADER}
        res = {"header": header, "rows": tf.row_counts, "dropped": tf.dropped_events,
               "metadata": dict(tf.footer.metadata), "time_range": list(tf.time_range or ())}
        for t in TABLES:
            df = tf.table(t)
            res[t] = {c: _column_hash(df[c]) for c in df.columns}
            res[t]["_index"] = _column_hash(df.index.to_series())
        tf.close()
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    a = ap.parse_args()
    got = {name: digest(bench_import.REALTRACES / rel) for name, rel in bench_import.TRACES.items()}
    if a.save:
        a.save.write_text(json.dumps(got, indent=1, sort_keys=True, default=str))
        print(f"saved digests of {len(got)} imports to {a.save}")
        return 0
    want = json.loads(a.compare.read_text())
    got = json.loads(json.dumps(got, default=str))
    bad = 0
    for name in want:
        for key in sorted(set(want[name]) | set(got.get(name, {}))):
            w, g_ = want[name].get(key), got.get(name, {}).get(key)
            if w != g_:
                bad += 1
                if isinstance(w, dict) and isinstance(g_, dict):
                    diff = {k: (w.get(k), g_.get(k)) for k in set(w) | set(g_) if w.get(k) != g_.get(k)}
                    print(f"{name}.{key}: {json.dumps(diff, default=str)[:600]}")
                else:
                    print(f"{name}.{key}: {str(w)[:300]} != {str(g_)[:300]}")
    print(f"{len(want)} traces: {'identical' if not bad else f'{bad} differences'}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
