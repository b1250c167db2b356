"""Start/stop notifications from the stock ``torch.profiler.profile``, and which capture session a profiler
belongs to.

``torch.profiler`` offers no callback when a window becomes active, so ``install()`` wraps
``_KinetoProfile.prepare_trace`` / ``start_trace`` / ``stop_trace`` once. The wrappers act only for profilers
whose ``experimental_config`` has a capture session (``NeuronProfiler`` attaches one to its ``NeuronConfig``
with ``session_for``); anything else is untouched. A failure inside capture is reported as one line
(``capture.report``) and never breaks the profiled program.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from neuron_profiler.capture.report import notice

__all__ = ["install", "session_for", "session_of"]

S = TypeVar("S")
_installed = False
_sessions: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def session_for(config: Any, create: Callable[[], S]) -> S:
    """The capture session of ``config``, made with ``create()`` the first time (one session per config, shared
    by every ``NeuronProfiler`` of that config, so window indices never repeat)."""
    s = _sessions.get(config)
    if s is None:
        s = _sessions[config] = create()
    return s


def session_of(prof: Any) -> Any:
    """The capture session of ``prof.experimental_config``, or None."""
    cfg = getattr(prof, "experimental_config", None)
    try:
        return _sessions.get(cfg) if cfg is not None else None
    except TypeError:  # an experimental_config that cannot be weakly referenced is never ours
        return None


def _guarded(what: str, fn: Callable[[Any], None], prof: Any) -> None:
    try:
        fn(prof)
    except Exception as exc:  # noqa: BLE001 - never break the user's program; say what failed
        notice(f"capture {what} failed ({exc!r}); the program goes on, this window may lack capture data")


def install() -> None:
    """Wrap ``torch.profiler.profiler._KinetoProfile.prepare_trace`` / ``start_trace`` / ``stop_trace``
    (idempotent)."""
    global _installed
    if _installed:
        return
    from torch.profiler import profiler as tp

    cls = tp._KinetoProfile
    orig_prepare, orig_start, orig_stop = cls.prepare_trace, cls.start_trace, cls.stop_trace

    def prepare_trace(self: Any) -> None:
        s = session_of(self)
        if s is not None:
            _guarded("set-up", s.on_prepare, self)
        orig_prepare(self)

    def start_trace(self: Any) -> None:
        orig_start(self)
        s = session_of(self)
        if s is not None:
            _guarded("start", s.on_start, self)

    def stop_trace(self: Any) -> None:
        s = session_of(self)
        try:
            if s is not None:
                _guarded("stop", s.on_stop, self)
        finally:
            orig_stop(self)

    for new, orig in ((prepare_trace, orig_prepare), (start_trace, orig_start), (stop_trace, orig_stop)):
        new.__wrapped__ = orig  # type: ignore[attr-defined]
        new.__name__ = orig.__name__
        new.__qualname__ = orig.__qualname__
        new.__doc__ = orig.__doc__
    cls.prepare_trace = prepare_trace  # type: ignore[method-assign]
    cls.start_trace = start_trace  # type: ignore[method-assign]
    cls.stop_trace = stop_trace  # type: ignore[method-assign]
    _installed = True
