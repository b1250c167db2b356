"""Start/stop notifications from the stock ``torch.profiler.profile``.

``torch.profiler`` offers no callback when a window becomes active, so ``install()`` wraps
``_KinetoProfile.start_trace`` / ``stop_trace`` once. The wrappers act only for profilers whose
``experimental_config`` carries a capture session (a ``NeuronConfig``); anything else is untouched. A failure
inside capture is reported as a warning and never breaks the profiled program.
"""
from __future__ import annotations

import warnings
from typing import Any

_installed = False


def session_of(prof: Any) -> Any:
    """The capture session attached to ``prof.experimental_config``, or None."""
    return getattr(getattr(prof, "experimental_config", None), "_neuron_session", None)


def install() -> None:
    """Wrap ``torch.profiler.profiler._KinetoProfile.start_trace`` / ``stop_trace`` (idempotent)."""
    global _installed
    if _installed:
        return
    from torch.profiler import profiler as tp

    cls = tp._KinetoProfile
    orig_start, orig_stop = cls.start_trace, cls.stop_trace

    def start_trace(self: Any) -> None:
        orig_start(self)
        s = session_of(self)
        if s is not None:
            try:
                s.on_start(self)
            except Exception as exc:  # never break the user's program
                warnings.warn(f"neuron_profiler: capture start failed: {exc!r}", RuntimeWarning, stacklevel=2)

    def stop_trace(self: Any) -> None:
        s = session_of(self)
        try:
            if s is not None:
                try:
                    s.on_stop(self)
                except Exception as exc:
                    warnings.warn(f"neuron_profiler: capture stop failed: {exc!r}", RuntimeWarning, stacklevel=2)
        finally:
            orig_stop(self)

    start_trace.__wrapped__ = orig_start  # type: ignore[attr-defined]
    stop_trace.__wrapped__ = orig_stop  # type: ignore[attr-defined]
    cls.start_trace = start_trace  # type: ignore[method-assign]
    cls.stop_trace = stop_trace  # type: ignore[method-assign]
    _installed = True
