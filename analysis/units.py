"""Human-readable values for views (explorer cards, terminal report); analyses keep raw SI units."""
from __future__ import annotations

import math

_SCALE = {"ns": (1e6, "ms"), "bytes": (2**20, "MiB"), "bytes/s": (1e9, "GB/s"), "FLOP/s": (1e12, "TFLOP/s"),
          "FLOP": (1e9, "GFLOP")}


def format_value(value, unit: str) -> str:
    """``value`` in ``unit`` (as in :func:`analysis.summary`'s unit column) for display: ns as ms, bytes as
    MiB, rates in GB/s or TFLOP/s, counts with separators, percent with 3 significant digits; NaN as n/a."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if unit in _SCALE and abs(float(value)) >= _SCALE[unit][0] / 1000:
        div, u = _SCALE[unit]
        return f"{float(value) / div:.4g} {u}"
    if unit == "count":
        return f"{float(value):,.0f}"
    if unit in ("percent", "%"):
        return f"{float(value):.3g} %"
    return f"{float(value):.4g} {unit}".strip()
