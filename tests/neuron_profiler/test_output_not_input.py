"""Issue 26 item 1: no command writes over its own input. Was: ``neuron-trace convert T.nprof -o T.nprof``,
``import X.json -o X.json`` and ``project X.json -o X.json`` exited 0 and replaced the input. Now every writing
command refuses an output that is (or resolves to, through symbolic or hard links) one of its inputs: one line,
exit 2, the input byte for byte unchanged and no temporary file left."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from neuron_profiler.cli import main
from neuron_profiler.synthetic_trace import write_synthetic_trace
from neuron_profiler.trace.files import OutputIsInputError, atomic_output, check_not_input, same_file

KINETO = {"traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.5, "dur": 2.0,
     "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 13.0, "dur": 1.0}]}


@pytest.fixture
def nprof(tmp_path: Path) -> Path:
    return write_synthetic_trace(tmp_path / "t.nprof", 200, steps=1, n_dma=10)


@pytest.fixture
def kineto(tmp_path: Path) -> Path:
    p = tmp_path / "x.json"
    p.write_text(json.dumps(KINETO))
    return p


def _aliases(src: Path, how: str) -> str:
    """An output path naming ``src``: itself, a relative spelling, a symbolic link or a hard link to it."""
    if how == "same":
        return str(src)
    if how == "dotdot":
        return str(src.parent / "." / ".." / src.parent.name / src.name)
    link = src.with_name("alias" + "".join(src.suffixes))
    if how == "symlink":
        link.symlink_to(src)
    else:
        os.link(src, link)
    return str(link)


def _refused(argv: list[str], src: Path, capsys: pytest.CaptureFixture) -> None:
    before = src.read_bytes()
    listing = sorted(p.name for p in src.parent.iterdir())
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refusing to write" in err and "it is the input" in err, err
    assert src.read_bytes() == before
    assert sorted(p.name for p in src.parent.iterdir()) == listing  # no temporary file, nothing new


@pytest.mark.parametrize("how", ["same", "dotdot", "symlink", "hardlink"])
@pytest.mark.parametrize("to", ["chrome", "perfetto", "nprof", "parquet"])
def test_convert_refuses_its_input(nprof: Path, how: str, to: str, capsys: pytest.CaptureFixture) -> None:
    _refused(["convert", str(nprof), "-o", _aliases(nprof, how), "--to", to], nprof, capsys)


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
def test_import_refuses_its_input(kineto: Path, how: str, capsys: pytest.CaptureFixture) -> None:
    _refused(["import", str(kineto), "-o", _aliases(kineto, how)], kineto, capsys)


@pytest.mark.parametrize("how", ["same", "symlink", "hardlink"])
@pytest.mark.parametrize("source", ["kineto", "nprof"])
def test_project_refuses_its_input(request: pytest.FixtureRequest, source: str, how: str,
                                   capsys: pytest.CaptureFixture) -> None:
    src = request.getfixturevalue(source)
    _refused(["project", str(src), "-o", _aliases(src, how)], src, capsys)


def test_a_run_directory_is_not_its_own_parquet_output(nprof: Path, capsys: pytest.CaptureFixture) -> None:
    _refused(["convert", str(nprof.parent), "-o", str(nprof.parent), "--to", "parquet"], nprof, capsys)


def test_other_outputs_still_write(nprof: Path, kineto: Path, tmp_path: Path) -> None:
    """The check refuses only the input: a new name beside it writes as before."""
    assert main(["convert", str(nprof), "-o", str(tmp_path / "t.json")]) == 0
    assert json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    assert main(["import", str(kineto), "-o", str(tmp_path / "x.nprof")]) == 0
    assert (tmp_path / "x.nprof").stat().st_size > 0


def test_library_writers_refuse_too(nprof: Path) -> None:
    """The exporters and ``rewrite_trace`` check the same (a script calling them directly)."""
    from neuron_profiler.exporters.chrome import export_chrome
    from neuron_profiler.exporters.perfetto import export_perfetto
    from neuron_profiler.trace.builder import rewrite_trace

    before = nprof.read_bytes()
    for write in (export_chrome, export_perfetto, rewrite_trace):
        with pytest.raises(OutputIsInputError):
            write(nprof, nprof)
    assert nprof.read_bytes() == before
    with pytest.raises(OutputIsInputError), atomic_output(nprof, [nprof]):
        pytest.fail("atomic_output must refuse before yielding")


def test_same_file_oracle(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    b.write_text("1")
    assert same_file(a, a) and not same_file(a, b) and not same_file(a, tmp_path / "missing")
    os.link(a, tmp_path / "h")
    assert same_file(tmp_path / "h", a)
    check_not_input(b, [a, None])  # different files: no error
