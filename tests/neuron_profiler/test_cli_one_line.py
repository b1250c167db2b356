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


@pytest.mark.parametrize("to, module", [("parquet", "pyarrow"), ("perfetto", "perfetto")])
def test_a_missing_optional_extra_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture, to: str, module: str) -> None:
    """Was: a RuntimeError traceback. Now one line naming the extra to install, exit 2, nothing written."""
    from neuron_profiler.cli import main
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    src = write_synthetic_trace(tmp_path / "t.nprof", 200, steps=1)
    for name in list(sys.modules):
        if name == module or name.startswith(module + "."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, module, None)  # `import pyarrow` raises ImportError
    assert main(["convert", str(src), "--to", to, "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"neuron-profiler[{to}]" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.nprof"]


def _capped_convert(src: Path, out: Path, limit: int) -> subprocess.CompletedProcess:
    import signal

    def cap() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run([sys.executable, "-m", "neuron_profiler.cli", "convert", str(src), "--to", "parquet",
                           "-o", str(out)], capture_output=True, text=True, cwd=REPO, timeout=300, preexec_fn=cap)


def test_a_full_disk_leaves_no_partial_parquet_dataset(tmp_path: Path) -> None:
    """Was: the tables written before the disk filled stayed (``out/host_ops/rank=0/part-00000.parquet`` ...): a
    partial dataset that reads as the whole trace. Now everything this run wrote is removed, folders it created
    included; what was in the output folder before stays."""
    pytest.importorskip("pyarrow")
    from neuron_profiler.synthetic_trace import write_synthetic_trace

    src = write_synthetic_trace(tmp_path / "src.nprof", 60_000)
    new = tmp_path / "new" / "pq"
    r = _capped_convert(src, new, 64 << 10)  # the instructions table hits the cap, tables before it fit
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert not (tmp_path / "new").exists()
    mine = tmp_path / "mine"
    (mine / "notes").mkdir(parents=True)
    (mine / "notes" / "keep.txt").write_text("the user's")
    r = _capped_convert(src, mine, 64 << 10)
    assert r.returncode == 2
    assert sorted(str(p.relative_to(mine)) for p in mine.rglob("*")) == ["notes", "notes/keep.txt"]
    r = _capped_convert(src, mine, 1 << 30)  # without the cap the same export completes
    from neuron_profiler.trace.columns import TABLES

    assert r.returncode == 0 and len(list(mine.rglob("*.parquet"))) == len(TABLES)  # one part per table
