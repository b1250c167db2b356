"""Issue 26 items 3 and 8: the CLIs answer in one line whatever the input does to memory, and print Python
warnings as their own one-line warnings.

Was: ``neuron-analyze`` and ``neuron-trace project`` on a 4 GB sparse file starting with ``{"traceEvents":[`` (or
an all-zero ``.json``) died with a ``MemoryError`` traceback; ``neuron-analyze`` printed raw Python warnings
(``.../source.py:185: UserWarning: ...`` and the source line)."""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_AS_LIMIT = 3 << 30  # address space: a 4 GB read cannot be allocated, the CLIs themselves start well within it


def _sparse(path: Path, head: bytes) -> Path:
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(4 << 30)  # 4 GB, no disk blocks
    return path


def _run(*argv: str) -> subprocess.CompletedProcess:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_AS_LIMIT, _AS_LIMIT))

    env = {**os.environ, "PYTHONPATH": str(REPO), "KINETO_LOG_LEVEL": "6"}
    return subprocess.run([sys.executable, "-m", *argv], capture_output=True, text=True, env=env, cwd=REPO,
                          preexec_fn=cap, timeout=300)


@pytest.mark.slow
@pytest.mark.parametrize("head", [b'{"traceEvents":[', b""])
@pytest.mark.parametrize("command", ["analyze", "project"])
def test_a_4gb_json_is_one_line(tmp_path: Path, head: bytes, command: str) -> None:
    src = _sparse(tmp_path / "big.json", head)
    argv = (["analysis.cli", str(src), "--no-cache"] if command == "analyze"
            else ["neuron_profiler.cli", "project", str(src), "-o", str(tmp_path / "out.nprof")])
    r = _run(*argv)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert str(src) in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.json"]  # nothing written


def test_memory_error_anywhere_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                           tmp_path: Path) -> None:
    """The same in-process: whatever raises MemoryError / RecursionError, the CLIs give one line, exit 2."""
    import analysis
    from analysis.cli import main as analyze
    from neuron_profiler import projection
    from neuron_profiler.cli import main as trace_cli

    src = tmp_path / "t.json"
    src.write_text("{}")

    def boom(*a, **k):
        raise MemoryError()

    def deep(*a, **k):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(analysis, "load", boom)
    assert analyze([str(src)]) == 2
    monkeypatch.setattr(projection, "project_trace", deep)
    assert trace_cli(["project", str(src), "-o", str(tmp_path / "o.nprof")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "too large" in err[0] and "too deeply nested" in err[1]


def test_analyze_prints_python_warnings_as_one_line_each(tmp_path: Path) -> None:
    """A Kineto file with two unreadable events: the importer's UserWarning becomes one ``neuron-analyze:
    warning:`` line (no source location, no code line); the report is still printed."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "bad", "dur": 2.0},
          {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 20, "dur": -5}]
    src = tmp_path / "w.json"
    src.write_text(json.dumps({"traceEvents": ev}))
    env = {**os.environ, "PYTHONPATH": str(REPO), "KINETO_LOG_LEVEL": "6"}
    r = subprocess.run([sys.executable, "-m", "analysis.cli", str(src), "--no-cache"], capture_output=True,
                       text=True, env=env, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines == [f"neuron-analyze: warning: {src}: skipped 2 unreadable events: 1 missing or non-numeric ts, "
                     f"1 negative dur"], r.stderr
    assert "aten::mm" in r.stdout


def test_repeated_warnings_are_counted(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                       tmp_path: Path) -> None:
    import warnings

    import analysis
    from analysis.cli import main as analyze

    def warn_then_fail(*a, **k):
        for _ in range(3):
            warnings.warn("invalid value\nencountered in divide", RuntimeWarning, stacklevel=1)
        raise ValueError("stop here")

    monkeypatch.setattr(analysis, "load", warn_then_fail)
    src = tmp_path / "t.nprof"
    src.write_bytes(b"")
    assert analyze([str(src)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "neuron-analyze: error: stop here",
        "neuron-analyze: warning: invalid value encountered in divide (3 times)"]
