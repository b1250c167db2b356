"""Screenshots of every explorer page, for the docs: starts ``neuron-explorer`` as a user would (no argument: the
bundled sample folder) and saves a full-page PNG of each page listed in the app's navigation bar, so a page
another change registers is included without editing this script.

    python docs/screenshots/take.py                      # -> docs/screenshots/<page>.png, <page>_ddp.png, ...
    python docs/screenshots/take.py --only summary compare --out /tmp/shots
    python docs/screenshots/take.py --extra gpu=path/to/kineto_trace.json.gz

Shots: the eager GPT sample (``<page>.png``), the bundled 2-rank DDP run (``<page>_ddp.png``), the real H100
Kineto trace of the project's real traces when present (``<page>_gpu.png``) and every ``--extra TAG=PATH``
(``<page>_<TAG>.png``: a trace or a folder; a folder's first multi-rank run is shot, else its default trace).

Chromium is Debian's (``--chromium``, default /usr/bin/chromium) driven by Playwright with a fresh profile
(never ``playwright install``). Waits are on conditions: the page's root element, no "computing" placeholder,
no pending Dash callback, the timeline canvas painted with no row still computing (its cumulative counters).
Console errors and error boxes are printed, and the exit code is 1 when there was one. Look at every PNG after
running it.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
GPU_TRACE = "TraceLens/h100/gaunernst_bert-small-uncased__1016001.json.gz"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1500, "height": 950}
PAGE_TIMEOUT_MS = 120_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Explorer:
    """``python -m explorer.cli [PATH] --port P`` in a subprocess (this checkout first on the path)."""

    def __init__(self, path: Path | None):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "KINETO_LOG_LEVEL": "6"}
        self.data_dir = tempfile.TemporaryDirectory(prefix="explorer-shots-data-")
        env["NEURON_EXPLORER_DATA_DIR"] = self.data_dir.name  # no notes of the user's in the screenshots
        cmd = [sys.executable, "-m", "explorer.cli", *([str(path)] if path else []), "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        deadline = time.time() + 300
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"neuron-explorer exited: {self.proc.stdout.read() if self.proc.stdout else ''}")
            try:
                urllib.request.urlopen(self.url + "/_dash-layout", timeout=2).read()
                return
            except OSError:
                time.sleep(0.5)
        self.close()
        raise SystemExit("neuron-explorer did not answer within 300 s")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.data_dir.cleanup()


def wait_ready(page) -> None:
    """The page is built (its root element), nothing is computing or loading, the timeline has painted."""
    page.wait_for_function(
        "() => { const p = document.querySelector('#page [id$=\"-page\"]');"
        " return p && !document.querySelector('.nx-pending')"
        " && !document.querySelector('[data-dash-is-loading=\"true\"]'); }", timeout=PAGE_TIMEOUT_MS, polling=250)
    page.wait_for_load_state("networkidle", timeout=PAGE_TIMEOUT_MS)
    if page.query_selector("#timeline-page"):
        # painted, and no row computing: the cumulative counter rows read "computing…" until their background
        # computation ends (the canvas asks again every 0.7 s), so the view must report none pending
        page.wait_for_function("() => { const v = window.neuronTimeline && window.neuronTimeline.view();"
                               " return v && v.painted > 0 && v.painted === v.seq && v.pending === 0; }",
                               timeout=PAGE_TIMEOUT_MS, polling=250)
        page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")  # drawn
    page.evaluate("() => window.scrollTo(0, 0)")


def nav_pages(page, url: str) -> list[str]:
    """The pages the running app lists in its navigation bar (path names without the slash)."""
    page.goto(url + "/")
    wait_ready(page)
    hrefs = page.eval_on_selector_all("#nav a", "els => els.map(e => e.getAttribute('href'))")
    return [urllib.parse.urlsplit(h).path.strip("/") for h in hrefs if h]


def shoot(page, url: str, pages: list[str], trace: str | None, suffix: str, out: Path,
          problems: list[str]) -> list[Path]:
    """One full-page PNG per page of ``trace`` (None: the app's default trace)."""
    written = []
    for name in pages:
        q = f"?trace={urllib.parse.quote(trace, safe='')}" if trace else ""
        page.goto(f"{url}/{name}{q}")
        try:
            wait_ready(page)
        except Exception as exc:  # noqa: BLE001 - recorded, the next page is still shot
            problems.append(f"{name}{suffix}: not ready ({type(exc).__name__})")
        for box in page.locator(".error-box").all_inner_texts():
            problems.append(f"{name}{suffix}: error box: {box[:200]}")
        path = out / f"{name}{suffix}.png"
        page.screenshot(path=str(path), full_page=True)
        written.append(path)
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  ({page.title()})", flush=True)
    return written


def _run_key(url: str) -> str | None:
    """The first multi-rank run the app lists (its picker options come with the layout)."""
    import json

    layout = json.loads(urllib.request.urlopen(url + "/_dash-layout", timeout=30).read())
    found: list[str] = []

    def walk(node):
        if isinstance(node, dict):
            props = node.get("props", {})
            if props.get("id") == "trace-picker":
                found.extend(o["value"] for o in props.get("data", []) if str(o["value"]).startswith("group:"))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(layout)
    return found[0] if found else None


def targets(args) -> list[tuple[Path | None, str, bool]]:
    """(path served, file suffix, shoot the first multi-rank run instead of the default trace)."""
    out: list[tuple[Path | None, str, bool]] = [(None, "", False), (None, "_ddp", True)]
    gpu = Path(os.environ.get("NEURON_PROFILER_REALTRACES", "/work/shared/realtraces")) / GPU_TRACE
    if gpu.is_file() and not args.no_gpu:
        out.append((gpu, "_gpu", False))
    for item in args.extra:
        tag, _, path = item.partition("=")
        p = Path(path).expanduser()
        if not tag or not p.exists():
            raise SystemExit(f"--extra wants TAG=PATH of an existing trace or folder, got {item!r}")
        out.append((p, f"_{tag}", p.is_dir()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT, help="folder for the PNGs (default docs/screenshots)")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--only", nargs="*", default=None, help="only these pages (path names, e.g. summary compare)")
    ap.add_argument("--extra", action="append", default=[], metavar="TAG=PATH", help="also shoot this trace/folder")
    ap.add_argument("--no-gpu", action="store_true", help="skip the real H100 trace")
    args = ap.parse_args(argv)
    if not Path(args.chromium).exists():
        raise SystemExit(f"no Chromium at {args.chromium} (apt-get install -y chromium)")
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    servers: dict[Path | None, Explorer] = {}
    with tempfile.TemporaryDirectory(prefix="explorer-shots-chromium-") as profile, sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(user_data_dir=profile, executable_path=args.chromium,
                                                    args=CHROMIUM_ARGS, headless=True, viewport=VIEWPORT)
        try:
            page = ctx.new_page()
            page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"pageerror: {e}"))
            for path, suffix, run in targets(args):
                srv = servers.get(path) or servers.setdefault(path, Explorer(path))
                pages = nav_pages(page, srv.url)
                if args.only is not None:
                    pages = [p for p in pages if p in args.only]
                key = _run_key(srv.url) if run else None
                if run and key is None:
                    problems.append(f"{suffix}: no multi-rank run listed")
                    continue
                shoot(page, srv.url, pages, key, suffix, args.out, problems)
        finally:
            ctx.close()
            for s in servers.values():
                s.close()
    for p in problems:
        print(f"PROBLEM {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
