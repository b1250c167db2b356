"""Load test of the explorer: N simulated viewers for D seconds against `neuron-explorer` (waitress) serving
a 5M-event trace, on 127.0.0.1 only, bounded (fixed viewers, fixed duration, timeouts on every request).

    python bench/load_explorer.py [--events 5000000] [--viewers 20] [--seconds 60] [--trace PATH]

Each viewer loops: load the timeline page's HTML, fetch timeline views (random zooms from the whole trace to
1/100000 of it, as the canvas does on zoom / pan), and every few rounds a page layout through Dash's callback
endpoint (Summary, Hot ops, Roofline). Prints p50 / p95 / p99 latency per request kind, errors, and the server's
resident memory every 5 s (flat after warm-up = no leak).
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def route_payload(deps: list, page: str, key: str) -> bytes | None:
    """The body of the router callback (outputs page.children ...) for ``/page?trace=key``."""
    for d in deps:
        if "page.children" in d["output"]:
            inputs = [{"id": i["id"], "property": i["property"],
                       "value": f"/{page}" if i["property"] == "pathname" else f"?trace={key}"} for i in d["inputs"]]
            state = [{"id": s["id"], "property": s["property"], "value": 1400 if s["id"] == "width" else None}
                     for s in d["state"]]
            return json.dumps({"output": d["output"], "outputs": [{"id": o.split(".")[0], "property": o.split(".")[1]}
                                                                  for o in d["output"].strip(".").split("...")],
                               "inputs": inputs, "state": state, "changedPropIds": ["url.pathname"]}).encode()
    return None


def viewer(base: str, key: str, span: int, deps: list, stop: float, out: dict, lock, seed: int) -> None:
    rng = random.Random(seed)
    k = 0
    while time.time() < stop:
        k += 1
        jobs = [("view", None)] * 4 + ([("page", rng.choice(["summary", "hot_ops", "roofline"]))] if k % 3 == 0
                                       else []) + ([("html", None)] if k % 5 == 0 else [])
        for kind, arg in jobs:
            if time.time() >= stop:
                break
            if kind == "view":
                w = max(int(span * 10 ** -rng.uniform(0, 5)), 1000)
                t0 = rng.randrange(0, max(span - w, 1))
                req = urllib.request.Request(f"{base}/api/timeline/view?trace={key}&t0={t0}&t1={t0 + w}&w=1200")
            elif kind == "html":
                req = urllib.request.Request(f"{base}/timeline?trace={key}")
            else:
                body = route_payload(deps, arg, key)
                req = urllib.request.Request(f"{base}/_dash-update-component", data=body,
                                             headers={"Content-Type": "application/json"})
            t = time.perf_counter()
            ok = True
            try:
                with urllib.request.urlopen(req, timeout=60) as r:
                    data = r.read()
                    ok = r.status == 200 and (kind != "page" or b"error-box" not in data)
            except Exception:  # noqa: BLE001 - counted
                ok = False
            dt = time.perf_counter() - t
            with lock:
                out.setdefault(kind, []).append(dt)
                if not ok:
                    out["errors"] = out.get("errors", 0) + 1


def pct(v: list[float], p: float) -> float:
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))] if v else float("nan")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--viewers", type=int, default=20)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--trace", help="serve this trace instead of writing a synthetic one")
    args = ap.parse_args(argv)
    viewers = max(1, min(args.viewers, 64))  # bounded
    seconds = max(1.0, min(args.seconds, 600.0))
    with tempfile.TemporaryDirectory(prefix="load-explorer-") as tmp:
        if args.trace:
            path = Path(args.trace)
        else:
            sys.path.insert(0, str(ROOT))
            from neuron_profiler.synthetic_trace import write_synthetic_trace

            path = write_synthetic_trace(Path(tmp) / "big.nprof", args.events, cores=2, steps=4)
        port = free_port()
        env = {"NEURON_EXPLORER_DATA_DIR": str(Path(tmp) / "data"), "PATH": "/usr/bin:/bin"}
        import os

        env = {**os.environ, **env}
        log = open(Path(tmp) / "server.log", "w")  # a file, never an unread pipe (a full pipe stalls the server)
        srv = subprocess.Popen([sys.executable, "-m", "explorer.cli", str(path), "--host", "127.0.0.1",
                                "--port", str(port)], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                               text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            t = time.time()
            while True:
                try:
                    urllib.request.urlopen(base + "/_dash-layout", timeout=5).read()
                    break
                except OSError:
                    if srv.poll() is not None or time.time() - t > 600:
                        log.flush()
                        print((Path(tmp) / "server.log").read_text()[-3000:], file=sys.stderr)
                        raise SystemExit("server did not start") from None
                    time.sleep(0.5)
            print(f"server up in {time.time() - t:.1f} s (open + index of {path.name}), RSS {rss_mb(srv.pid):.0f} MB")
            deps = json.loads(urllib.request.urlopen(base + "/_dash-dependencies", timeout=30).read())
            key = path.name
            meta = json.loads(urllib.request.urlopen(f"{base}/api/timeline/view?trace={key}&w=100", timeout=120).read())
            span = int(meta["t1"])
            out: dict = {}
            lock = threading.Lock()
            stop = time.time() + seconds
            ths = [threading.Thread(target=viewer, args=(base, key, span, deps, stop, out, lock, i), daemon=True)
                   for i in range(viewers)]
            for th in ths:
                th.start()
            mem = []
            t0 = time.time()
            while any(th.is_alive() for th in ths):
                mem.append((time.time() - t0, rss_mb(srv.pid)))
                time.sleep(5)
            for th in ths:
                th.join(70)
            print(f"{viewers} viewers for {seconds:g} s; errors: {out.get('errors', 0)}")
            for kind in ("view", "page", "html"):
                v = out.get(kind, [])
                if v:
                    print(f"  {kind:5s} n={len(v):6d}  p50 {pct(v, 50):.3f} s  p95 {pct(v, 95):.3f} s  "
                          f"p99 {pct(v, 99):.3f} s  max {max(v):.3f} s")
            allv = [x for k in ("view", "page", "html") for x in out.get(k, [])]
            print(f"  all   n={len(allv):6d}  p50 {pct(allv, 50):.3f} s  p95 {pct(allv, 95):.3f} s  "
                  f"p99 {pct(allv, 99):.3f} s")
            print("server RSS over time (s: MB): " + ", ".join(f"{a:.0f}: {b:.0f}" for a, b in mem))
            half = [b for a, b in mem if a >= seconds / 2]
            if len(half) > 1:
                print(f"second half: min {min(half):.0f} MB, max {max(half):.0f} MB, "
                      f"growth {max(half) - min(half):.0f} MB ({statistics.mean(half):.0f} MB mean)")
        finally:
            srv.terminate()
            try:
                srv.wait(10)
            except subprocess.TimeoutExpired:
                srv.kill()
            log.close()
            errs = [ln for ln in (Path(tmp) / "server.log").read_text().splitlines() if "Traceback" in ln]
            print(f"server log: {len(errs)} tracebacks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
