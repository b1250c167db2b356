"""Human-readable values for views (explorer cards, terminal report); analyses keep raw SI units."""
from __future__ import annotations

import math

#: per unit, (divisor, display unit) from the largest down: a value shows in the largest that keeps it >= 1
_SCALES = {
    "ns": ((1e9, "s"), (1e6, "ms"), (1e3, "µs"), (1.0, "ns")),
    "bytes": ((2.0**40, "TiB"), (2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B")),
    "bytes/s": ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s")),
    "FLOP/s": ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1.0, "FLOP/s")),
    "FLOP": ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1.0, "FLOP")),
}
#: the largest unit used (a 2 TB/s HBM reads better as 2,000 GB/s next to its peers; seconds stay seconds)
_MAX = {"bytes/s": "GB/s", "FLOP/s": "TFLOP/s"}


def format_value(value, unit: str) -> str:
    """``value`` in ``unit`` (as in :func:`analysis.summary`'s unit column) for display, 4 significant digits
    in the largest unit that keeps it >= 1: ns as ns/µs/ms/s, bytes as B/KiB/MiB/GiB (whole bytes below
    1 KiB), rates in MB/s-GB/s or GFLOP/s-TFLOP/s, FLOP as MFLOP-PFLOP, counts with separators, percent with
    3 significant digits; NaN as n/a."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    v = float(value)
    if unit in _SCALES:
        scales = _SCALES[unit]
        if unit in _MAX:
            scales = scales[[u for _, u in scales].index(_MAX[unit]):]
        for div, u in scales:
            if abs(v) >= div or div == scales[-1][0]:
                if div == 1.0 and unit in ("ns", "bytes", "FLOP"):
                    return f"{v:,.0f} {u}"
                return f"{v / div:.4g} {u}"
    if unit == "count":
        return f"{v:,.0f}" if v == int(v) else f"{v:,.4g}"
    if unit in ("percent", "%"):
        return f"{v:.3g} %"
    return f"{v:.4g} {unit}".strip()
