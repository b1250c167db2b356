"""Typed column access over Explorer tables (pandas frames from Parquet or JSON): exact int64 ns, missing
fields and nulls become a stated default, never a float round trip."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

try:
    import orjson

    def _dumps(v: Any) -> str:
        return orjson.dumps(v, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY, default=str).decode()
except ImportError:  # pragma: no cover - orjson is a core dependency
    import json

    def _dumps(v: Any) -> str:
        return json.dumps(v, separators=(",", ":"), default=str)


def _is_null(x: Any) -> bool:
    return x is None or (isinstance(x, float) and x != x) or x is pd.NA or x is pd.NaT


def text(df: pd.DataFrame, name: str, default: str = "") -> np.ndarray:
    """Column as an object array of str (lists joined with '/', nulls -> ``default``)."""
    n = len(df)
    if name not in df.columns:
        out = np.empty(n, dtype=object)
        out[:] = default
        return out
    vals = df[name].tolist()
    return np.asarray([default if _is_null(v) else _as_text(v) for v in vals] + [None], dtype=object)[:-1]


def _as_text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, np.ndarray)):
        return "/".join(_as_text(x) for x in v)
    if isinstance(v, (float, np.floating)) and float(v).is_integer():
        return str(int(v))
    return str(v)


def integer(df: pd.DataFrame, name: str, default: int = 0) -> np.ndarray:
    """Column as int64 (exact for integer columns; floats truncated; nulls and non-numbers -> ``default``)."""
    n = len(df)
    if name not in df.columns:
        return np.full(n, default, dtype=np.int64)
    s = df[name]
    if s.dtype.kind in "iub" and not s.hasnans:
        return s.to_numpy(np.int64)
    if isinstance(s.dtype, pd.api.extensions.ExtensionDtype) and s.dtype.kind in "iu":
        return s.fillna(default).to_numpy(np.int64)
    out = np.full(n, default, dtype=np.int64)
    for i, v in enumerate(s.tolist()):
        if isinstance(v, (bool, np.bool_)):
            out[i] = int(v)
        elif isinstance(v, (int, np.integer)):
            if -2**63 <= int(v) < 2**63:
                out[i] = int(v)
        elif isinstance(v, (float, np.floating)) and v == v and abs(v) < 9.2e18:
            out[i] = int(v)
        elif isinstance(v, str):
            try:
                out[i] = int(v)
            except ValueError:
                try:
                    f = float(v)
                    if f == f and abs(f) < 9.2e18:
                        out[i] = int(f)
                except ValueError:
                    pass
    return out


def number(df: pd.DataFrame, name: str, default: float = 0.0) -> np.ndarray:
    """Column as float64 (nulls and non-numbers -> ``default``)."""
    if name not in df.columns:
        return np.full(len(df), default, dtype=np.float64)
    return pd.to_numeric(df[name], errors="coerce").fillna(default).to_numpy(np.float64)


def durations(df: pd.DataFrame, start: str = "start_ts") -> np.ndarray:
    """``duration_ns``, else ``end_ts - start``; negative values become 0."""
    if "duration_ns" in df.columns:
        d = integer(df, "duration_ns")
    elif "end_ts" in df.columns:
        d = integer(df, "end_ts") - integer(df, start)
    else:
        d = np.zeros(len(df), dtype=np.int64)
    return np.maximum(d, 0)


def args_json(df: pd.DataFrame, fields: list[str]) -> np.ndarray:
    """Per row, a JSON object of ``fields`` (those present), leaving out nulls and empty strings; "" when
    nothing is left. Values keep their JSON types (ints stay exact)."""
    present = [f for f in fields if f in df.columns]
    n = len(df)
    out = np.full(n, "", dtype=object)
    if not present or not n:
        return out
    cols = [df[f].tolist() for f in present]
    memo: dict[tuple, str] = {}
    for i, vals in enumerate(zip(*cols)):
        d = {k: _plain(v) for k, v in zip(present, vals) if not (_is_null(v) or (isinstance(v, str) and not v))}
        if not d:
            continue
        key = tuple(d.items()) if all(isinstance(v, (int, str, float, bool)) for v in d.values()) else None
        if key is not None and key in memo:
            out[i] = memo[key]
            continue
        t = _dumps(d)
        if key is not None and len(memo) < 100_000:
            memo[key] = t
        out[i] = t
    return out


def _plain(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    return v
