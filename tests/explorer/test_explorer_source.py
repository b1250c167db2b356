"""The source view: device time per line with the line's text, read only from .py files the trace names."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pandas as pd
import plotly
import pytest

import analysis
from explorer.pages.common import Ctx
from explorer.source import (
    EDITED,
    MAX_SOURCE_BYTES,
    NOT_READABLE,
    enclosing_function,
    line_texts,
    recorded_cwd,
    source_file,
    source_roots,
    source_section,
)
from explorer.state import ViewState
from explorer.store import TraceStore

SAMPLES = Path(__file__).resolve().parents[2] / "sample_traces"


def test_only_regular_py_files_named_by_the_trace_are_read(tmp_path):
    root = tmp_path / "served"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "m.py").write_text("def f():\n    return 1\n")
    (root / "secret.txt").write_text("password\n")
    (root / "big.py").write_text("x = 1\n" * (MAX_SOURCE_BYTES // 6 + 1))
    os.symlink(root / "secret.txt", root / "link.py")
    (root / "dir.py").mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "other.py").write_text("token = 'not for the explorer'\n")
    os.symlink(outside / "other.py", root / "escape.py")  # a .py link out of the root
    os.symlink(outside, root / "out")                     # a folder link out of the root
    assert source_file("pkg/m.py", [root]) == (root / "pkg" / "m.py").resolve()
    assert source_file(str(root / "pkg" / "m.py"), [root]) == (root / "pkg" / "m.py").resolve()  # absolute, inside
    assert source_file("other.py", [root, outside]) == (outside / "other.py").resolve()  # each root in turn
    for bad in ("secret.txt", str(root / "secret.txt"), "big.py", "link.py", "dir.py", "../served/pkg/m.py",
                "pkg/../pkg/m.py", "missing.py", "", "pkg/m.py\x00.txt", "/etc/passwd",
                str(outside / "other.py"), "escape.py", "out/other.py", "../elsewhere/other.py"):
        assert source_file(bad, [root]) is None, bad
    assert source_file(str(root / "pkg" / "m.py"), []) is None  # an absolute path is no root of its own
    df = pd.DataFrame({"file": ["pkg/m.py", "pkg/m.py", "pkg/m.py", "secret.txt"], "line": [2, 9, 1, 1],
                       "function": ["f", "f", "g", "<module>"]})
    assert line_texts(df, [root]) == ["return 1", NOT_READABLE,
                                      "(the file changed since the capture: line 1 is in <module>, not g)",
                                      NOT_READABLE]
    # a frame at its function's own def line (as recorded for the sample's _gpt_step) is that function's line
    own = pd.DataFrame({"file": ["pkg/m.py"], "line": [1], "function": ["f"]})
    assert line_texts(own, [root]) == ["def f():"]
    mtime = (root / "pkg" / "m.py").stat().st_mtime_ns
    assert line_texts(df.head(1), [root], captured_ns=mtime - 1) == [EDITED + "return 1"]  # edited after capture
    assert line_texts(df.head(1), [root], captured_ns=mtime + 1) == ["return 1"]


def test_enclosing_function_by_indentation():
    src = ["import x", "", "class A:", "    def forward(self):", "        if y:", "            z()",
           "        return (", "            1)", "def g():", "    pass"]
    assert [enclosing_function(src, n) for n in (1, 6, 7, 8, 10)] == ["<module>", "forward", "forward", "forward",
                                                                     "g"]


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    d = tmp_path_factory.mktemp("src")
    shutil.copy(SAMPLES / "gpt_train_step.nprof", d / "gpt_train_step.nprof")
    shutil.copy(SAMPLES / "regenerate.py", d / "regenerate.py")  # the script that captured it, beside it
    return Ctx(TraceStore(d))


def test_source_section_on_a_captured_trace(ctx):
    state = ViewState(page="hot_ops", trace="gpt_train_step.nprof")
    s = json.dumps(source_section(ctx, state), cls=plotly.utils.PlotlyJSONEncoder)
    lines = analysis.source_lines(ctx.store.trace(state.trace))
    assert "src-table" in s and "src-bar" in s and f"{len(lines)} source lines" in s
    assert "main(sys.argv[1:])" in s  # regenerate.py(145): <module>, read from the file beside the trace
    assert '"text": "(source not readable)"' in s  # torch/... and examples/... are not beside the trace
    for r in lines["example_op"][lines["example_op"] >= 0].head(5):
        assert f"sel=host_ops%3A{r}" in s
    empty = Ctx(TraceStore(SAMPLES / "cnn_inference.nprof"))
    s2 = json.dumps(source_section(empty, ViewState(page="hot_ops", trace="cnn_inference.nprof")),
                    cls=plotly.utils.PlotlyJSONEncoder)
    assert "no Python stacks in this trace" in s2


def test_relative_stack_paths_are_read_against_the_recorded_cwd(tmp_path):
    """The sample's stacks name ``examples/models.py`` relative to the capture's working directory (the repo
    root, where sample_traces/regenerate.py runs): with the header's ``cwd`` the view reads it; a cwd that is
    relative, missing or the filesystem root gives no root (the root would open every file)."""
    from types import SimpleNamespace

    from schemas import pb

    repo = SAMPLES.parent
    trace = analysis.load(SAMPLES / "gpt_train_step.nprof")
    lines = analysis.source_lines(trace)
    models = lines[lines["file"] == "examples/models.py"].head(20)
    assert len(models)
    served = Ctx(TraceStore(tmp_path))
    bare = SimpleNamespace(path=str(tmp_path / "t.nprof"), header=pb.Header())
    assert line_texts(models, source_roots(served, bare)) == [NOT_READABLE] * len(models)  # before: no cwd
    captured = SimpleNamespace(path=str(tmp_path / "t.nprof"), header=pb.Header(metadata={"cwd": str(repo)}))
    roots = source_roots(served, captured)
    assert roots[-1] == repo.resolve()
    texts = line_texts(models, roots)
    src = (repo / "examples" / "models.py").read_text().splitlines()
    assert texts == [src[n - 1].strip() for n in models["line"]]  # each line's own text
    for cwd in ("examples", "/", str(tmp_path / "missing"), "/dev/null"):
        assert recorded_cwd(pb.Header(metadata={"cwd": cwd})) is None, cwd
    # a trace claiming the filesystem root as its cwd cannot read a file outside the served folder
    claims_root = SimpleNamespace(path=str(tmp_path / "t.nprof"), header=pb.Header(metadata={"cwd": "/"}))
    assert source_file(str(repo / "examples" / "models.py"), source_roots(served, claims_root)) is None
