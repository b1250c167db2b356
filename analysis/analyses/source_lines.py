"""Device time per Python source line, from the stacks recorded with the host ops (``with_stack=True``).

A host op's stack is its Python frames, outermost first, one ``file(line): function`` per line. The device
time of an op (as :func:`analysis.hot_ops` attributes it, ``by="stack"``) counts as *self* time of the
innermost source line's (frames that are not ``file(line): function``, such as built-in methods and
``nn.Module: X`` entries, are skipped) and as *total* time of every distinct line in its stack, so the lines'
self times add up to the device time of all ops with a stack, and a line's total is the time spent under it.
A stack without any source line counts as the row "(no source line)" (line -1).
"""
from __future__ import annotations

import re

import pandas as pd

from ..registry import Column, register
from .hot_ops import hot_ops

FRAME = re.compile(r"^(?P<file>.*)\((?P<line>\d+)\): ?(?P<function>.*)$")
#: the row of stacks without any ``file(line): function`` frame (only built-ins, ``nn.Module: X`` entries)
NO_LINE = "(no source line)"

SOURCE_LINE_SPEC = (
    Column("file", "", "File", "source file as recorded in the stack"),
    Column("line", "count", "Line", "line number in the file"),
    Column("function", "", "Function", "the function the line is in"),
    Column("self_ns", "ns", "Device time (self)", "device time of the ops whose innermost frame is this line"),
    Column("total_ns", "ns", "Device time (total)",
           "device time of the ops with this line anywhere in their stack (each op once)"),
    Column("calls", "count", "Calls", "host ops whose innermost frame is this line (with device work)"),
    Column("share_percent", "percent", "Share", "self time over the device time of all ops with a stack"),
    Column("example_op", "", "Longest op", "row id of the longest host op whose innermost frame is this line, "
                                          "-1 when none"),
)
SOURCE_LINE_COLUMNS = [c.name for c in SOURCE_LINE_SPEC]


def parse_frame(frame: str) -> tuple[str, int, str]:
    """``("file", line, "function")`` of one ``file(line): function`` stack line; line -1 when unparsable."""
    m = FRAME.match(frame.strip())
    if m is None:
        return frame.strip(), -1, ""
    return m["file"], int(m["line"]), m["function"]


@register("source_lines", columns=SOURCE_LINE_SPEC, figure="source_lines_figure")
def source_lines(trace) -> pd.DataFrame:
    """One row per source line found in the recorded stacks, by total then self device time (see the module
    doc). Columns: file, line, function, self_ns, total_ns (ns), calls, share_percent, example_op. Empty
    when no host op has a stack."""
    empty = pd.DataFrame({c: pd.Series(dtype="object" if c in ("file", "function") else
                                       "float64" if c in ("self_ns", "total_ns", "share_percent") else "int64")
                          for c in SOURCE_LINE_COLUMNS})
    st = trace.table("host_ops", ["stack"])["stack"]
    names = st.cat.categories if isinstance(st.dtype, pd.CategoricalDtype) else st.unique()
    if not any(str(x).strip() for x in names):  # no stack recorded: skip the device-time attribution
        return empty
    by_stack = hot_ops(trace, by="stack")
    keys = [str(k) for k in by_stack.index]
    if not any(k.strip() for k in keys):
        return empty
    self_t: dict[str, float] = {}
    total_t: dict[str, float] = {}
    calls: dict[str, int] = {}
    for key, t, n in zip(keys, by_stack["device_time_self_ns"].fillna(0.0), by_stack["calls"]):
        if not key.strip():  # ops without a stack
            continue
        frames = [f.strip() for f in key.split("\n") if FRAME.match(f.strip())] or [NO_LINE]
        inner = frames[-1]
        self_t[inner] = self_t.get(inner, 0.0) + float(t)
        calls[inner] = calls.get(inner, 0) + int(n)
        for f in dict.fromkeys(frames):
            total_t[f] = total_t.get(f, 0.0) + float(t)
    all_t = sum(self_t.values())
    examples = _longest_op_per_line(trace)
    rows = []
    for frame, tot in total_t.items():
        file, line, func = parse_frame(frame)
        s = self_t.get(frame, 0.0)
        rows.append((file, line, func, s, tot, calls.get(frame, 0), 100.0 * s / all_t if all_t else 0.0,
                     examples.get(frame, -1)))
    out = pd.DataFrame(rows, columns=SOURCE_LINE_COLUMNS).astype(empty.dtypes.to_dict())
    return out.sort_values(["total_ns", "self_ns", "file", "line"], ascending=[False, False, True, True],
                           kind="stable").reset_index(drop=True)


def _innermost_line(stack: str) -> str:
    frames = [f.strip() for f in stack.split("\n") if FRAME.match(f.strip())]
    return frames[-1] if frames else NO_LINE


def _longest_op_per_line(trace) -> dict[str, int]:
    """{innermost frame: row id of the longest host op with that innermost frame}."""
    ho = trace.table("host_ops", ["stack", "duration_ns"])
    st = ho["stack"].astype(str)
    ok = st.str.strip() != ""
    if not ok.any():
        return {}
    inner = st[ok].map(_innermost_line)
    best = ho.loc[ok, "duration_ns"].groupby(inner.to_numpy()).idxmax()
    return {str(k): int(v) for k, v in best.items()}


__all__ = ["source_lines", "parse_frame", "NO_LINE", "SOURCE_LINE_SPEC", "SOURCE_LINE_COLUMNS"]
