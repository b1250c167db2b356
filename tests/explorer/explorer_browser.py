"""Browser-test helpers: run the app in a background thread on a free 127.0.0.1 port and drive Debian's
Chromium through Playwright (never ``playwright install``)."""
from __future__ import annotations

import contextlib
import socket
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(app, timeout: float = 20.0):
    """Serve a Dash app (werkzeug, threaded) in a daemon thread; yields its base URL."""
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    port = free_port()
    srv = make_server("127.0.0.1", port, app.server, threaded=True)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/_dash-layout", timeout=2).read()
            break
        except OSError:
            time.sleep(0.1)
    try:
        yield url
    finally:
        srv.shutdown()
        th.join(5)


def chromium_executable() -> str:
    """Debian's Chromium (never a Playwright download): the test is skipped when it is absent, and fails under
    CI, where ``.ci/run`` installs it."""
    import os
    import shutil

    import pytest

    exe = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(exe).exists():
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; .ci/run must install Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return exe


@contextlib.contextmanager
def browser(executable: str = "/usr/bin/chromium"):
    """A fresh Chromium (own user-data dir) from Playwright; yields the persistent context."""
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="explorer-chromium-") as tmp, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(user_data_dir=tmp, executable_path=executable,
                                                   args=CHROMIUM_ARGS, headless=True,
                                                   viewport={"width": 1500, "height": 950})
        try:
            yield ctx
        finally:
            ctx.close()


def collect_errors(page) -> list[str]:
    """Attach listeners; the returned list fills with console errors and page errors."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"pageerror: {e}"))
    return errors


def wait_idle(page, timeout: float = 30000) -> None:
    """Wait until Dash has no pending callback (no loading state) and the network is idle."""
    page.wait_for_load_state("networkidle", timeout=timeout)
    page.wait_for_function("() => !document.querySelector('[data-dash-is-loading=\"true\"]')", timeout=timeout)


def wait_painted(page, after: int = 0, timeout: float = 30000) -> dict:
    """Wait until the canvas timeline has painted a view newer than ``after`` with no request pending;
    returns its state (``window.neuronTimeline.view()``: t0, t1, painted, n, thr, area)."""
    page.wait_for_function("(p) => { const v = window.neuronTimeline && window.neuronTimeline.view();"
                           " return v && v.painted > p && v.painted === v.seq; }", arg=after, timeout=timeout)
    return page.evaluate("() => window.neuronTimeline.view()")
