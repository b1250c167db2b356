"""How capture tells the user that something went wrong without stopping their program: one line on the
``neuron_profiler`` logger (printed to stderr as ``neuron_profiler: ...`` unless logging is configured)."""
from __future__ import annotations

import logging

__all__ = ["log", "notice"]

log = logging.getLogger("neuron_profiler")


def notice(message: str) -> None:
    """Report one problem as one line (WARNING on the ``neuron_profiler`` logger)."""
    log.warning("neuron_profiler: %s", " ".join(str(message).split()))
