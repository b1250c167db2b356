"""The Hot ops page's source view: device time per Python source line (:func:`analysis.source_lines`) with the
line's text where the file is readable, each line linked to its longest op on the timeline.

Reading source files is the only file access here, and it is narrow: a file is read only when its path
appears in the trace's recorded stacks, lies (its real path, symlinks followed) under the trace's folder, the
served folder or the working directory the capture recorded (``header.metadata["cwd"]``; relative stack paths
are looked up under each), is a regular ``.py`` file of at most :data:`MAX_SOURCE_BYTES`, and it is read as
text, never imported or executed. Anything else shows as "(source not readable)".
"""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
from dash import html

import analysis
from analysis import figures

from .pages.common import Ctx, data_table, graph, note, window_href
from .state import ViewState

MAX_SOURCE_BYTES = 1 << 20
NOT_READABLE = "(source not readable)"
EDITED = "(file edited after the capture: may differ) "
TOP_LINES = 500
_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+(\w+)")


def source_file(recorded: str, roots: list[Path]) -> Path | None:
    """The file a recorded stack path names, if it may be read: a regular ``.py`` file of at most
    :data:`MAX_SOURCE_BYTES` under one of ``roots`` (a relative path is looked up under each root in turn, an
    absolute one must lie under one). "Under" holds for the real path, symlinks followed, so neither ``..`` nor a
    symlink reaches out of a root. None otherwise: the explorer reads nothing outside the folders it serves and
    the capture's recorded working directory."""
    if not recorded or "\x00" in recorded or not recorded.endswith(".py"):
        return None
    p = Path(recorded)
    if ".." in p.parts:
        return None
    reals = []
    for r in roots:
        try:
            reals.append(r.resolve(strict=True))
        except OSError:
            continue
    cands = [p] if p.is_absolute() else [r / p for r in reals]
    for c in cands:
        try:
            real = c.resolve(strict=True)
            if not any(real.is_relative_to(r) for r in reals):
                continue
            if real.suffix == ".py" and real.is_file() and real.stat().st_size <= MAX_SOURCE_BYTES:
                return real
        except OSError:
            continue
    return None


def recorded_cwd(header) -> Path | None:
    """The capture's working directory (``header.metadata["cwd"]``) as a root to read sources under: an absolute
    path of an existing directory other than the filesystem root (which would open every file); None else."""
    raw = header.metadata.get("cwd", "") if header is not None else ""
    if not raw or "\x00" in raw:
        return None
    p = Path(raw)
    try:
        if not p.is_absolute() or not p.is_dir():
            return None
        real = p.resolve(strict=True)
    except OSError:
        return None
    return None if real == Path(real.anchor) else real


def enclosing_function(lines: list[str], n: int) -> str:
    """Name of the ``def`` that line ``n`` (1-based) of ``lines`` is in, by indentation; "<module>" at top level."""
    target = lines[n - 1]
    ind = len(target) - len(target.lstrip())
    for i in range(n - 2, -1, -1):
        text = lines[i]
        if not text.strip():
            continue
        li = len(text) - len(text.lstrip())
        if li < ind:
            m = _DEF.match(text)
            if m:
                return m.group(2)
            ind = li  # an enclosing block (if / for / with / class): keep looking outward
    return "<module>"


def line_texts(df: pd.DataFrame, roots: list[Path], captured_ns: int = 0) -> list[str]:
    """The text of each (file, line, function) row of a :func:`analysis.source_lines` frame, or
    :data:`NOT_READABLE`; each file read at most once. A line that is not inside the recorded function (the file
    changed since the capture) says so instead of showing another line's text; the text of a file modified
    after ``captured_ns`` (the trace's creation time, 0 = unknown) is prefixed :data:`EDITED`."""
    cache: dict[str, list[str] | None] = {}
    edited: dict[str, bool] = {}
    out = []
    for file, line, func in zip(df["file"], df["line"], df["function"]):
        if file not in cache:
            path = source_file(str(file), roots)
            try:
                cache[file] = path.read_text(encoding="utf-8", errors="replace").splitlines() if path else None
                edited[file] = bool(path and captured_ns and path.stat().st_mtime_ns > captured_ns)
            except OSError:
                cache[file] = None
        lines = cache[file]
        if lines is None or not 0 < line <= len(lines):
            out.append(NOT_READABLE)
            continue
        func = str(func)
        inside = enclosing_function(lines, int(line))
        own = _DEF.match(lines[line - 1])  # a frame at its function's own def line is that function's
        lambda_like = func.startswith("<") and func != "<module>"  # lambdas, comprehensions: unchecked
        if lambda_like or inside == func or (own and own.group(2) == func):
            out.append((EDITED if edited.get(file) else "") + lines[line - 1].strip())
        else:
            out.append(f"(the file changed since the capture: line {line} is in {inside}, not {func})")
    return out


def source_roots(ctx: Ctx, trace) -> list[Path]:
    """Where the source view may read: the trace's folder, the served folder (what the user named) and the
    capture's recorded working directory (:func:`recorded_cwd`), in that order."""
    roots = [Path(trace.path).resolve().parent] if getattr(trace, "path", None) else []
    for extra in (Path(ctx.store.base), recorded_cwd(getattr(trace, "header", None))):
        if extra is not None and extra not in roots:
            roots.append(extra)
    return roots


def source_section(ctx: Ctx, state: ViewState):
    """The section's content: the chart of the top lines and the grid of every line with its text."""
    trace = ctx.store.trace(state.trace, state.rank)
    df = ctx.store.memo(state.trace, (state.rank, "source_lines"), lambda: analysis.source_lines(trace),
                        wait=ctx.wait_s)
    if df.empty:
        return note("no Python stacks in this trace: capture with with_stack=True (neuron-profile capture "
                    "--with-stack) to see device time per source line")
    df = df.head(TOP_LINES).copy()
    df.insert(3, "text", line_texts(df, source_roots(ctx, trace), int(trace.header.created_unix_ns)))
    index = ctx.store.timeline(state.trace, state.rank)
    host = trace.table("host_ops", ["start_ts", "duration_ns"])
    df.insert(0, "show", [_link(state, index.origin, host, int(r)) for r in df["example_op"]])
    fig = figures.source_lines_figure(df)
    fig.update_layout(title=None, margin={"t": 10})
    readable = int((df["text"] != NOT_READABLE).sum())
    return html.Div([
        note(f"{len(df)} source lines from the recorded stacks; {readable} with their text (files are read "
             "only where the trace names them: .py files under the served folder or the capture's working "
             "directory). "
             "Self: the line is the innermost frame; total: the line is anywhere in the stack."),
        graph(fig, id="src-bar"),
        data_table(df, id="src-table", page_size=15, analysis="source_lines", link_col="show",
                   hidden=("example_op",), labels={"text": "Source", "show": "Timeline"}, wrap=("text",))])


def _link(state: ViewState, origin: int, host: pd.DataFrame, row: int) -> str:
    if row < 0 or row not in host.index:
        return ""
    s = int(host.loc[row, "start_ts"])
    href = window_href(state, origin, s, s + int(host.loc[row, "duration_ns"]), sel=("host_ops", row), pad=0.5)
    return f"[longest op]({href})"


__all__ = ["source_section", "source_file", "source_roots", "recorded_cwd", "line_texts", "enclosing_function",
           "MAX_SOURCE_BYTES", "NOT_READABLE"]
