"""Results handed to callers are theirs: a notebook that edits a returned frame changes nothing else.

Under pandas copy-on-write (the default from pandas 3) a shallow copy costs O(columns) and any write to it
copies only what is written, so memoised frames of millions of rows are shared safely; numpy arrays taken
from them are read-only views. Older pandas without copy-on-write gets deep copies.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

__all__ = ["handout", "COPY_ON_WRITE"]


def _cow() -> bool:
    try:
        if int(pd.__version__.split(".", 1)[0]) >= 3:
            return True
        return bool(pd.get_option("mode.copy_on_write"))
    except (ValueError, KeyError, pd.errors.OptionError):
        return False


COPY_ON_WRITE = _cow()


def handout(obj: Any) -> Any:
    """A copy of a memoised result that the caller may change freely: DataFrames and Series shallow under
    copy-on-write (deep otherwise), numpy arrays as read-only views, tuples / lists / dicts element-wise;
    anything else (numbers, strings, protobuf messages, traces) as is."""
    if isinstance(obj, (pd.DataFrame, pd.Series)):
        return obj.copy(deep=not COPY_ON_WRITE)
    if isinstance(obj, np.ndarray):
        v = obj.view()
        v.flags.writeable = False
        return v
    if isinstance(obj, tuple) and not hasattr(obj, "_fields"):
        return tuple(handout(x) for x in obj)
    if isinstance(obj, list):
        return [handout(x) for x in obj]
    if isinstance(obj, dict):
        return {k: handout(v) for k, v in obj.items()}
    return obj
