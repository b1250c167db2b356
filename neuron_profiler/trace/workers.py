"""Worker-thread submission that still works while the interpreter shuts down.

Traces are often written from ``atexit`` hooks (the whole-program capture exports its last window there),
when ``ThreadPoolExecutor.submit`` refuses new work; the reader and writer then run the job inline.
"""
from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any


def submit(pool: ThreadPoolExecutor, fn: Callable[..., Any], *args: Any) -> Future:
    """``pool.submit(fn, *args)``, or a future already holding ``fn(*args)`` when the pool refuses work."""
    try:
        return pool.submit(fn, *args)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        fut: Future = Future()
        try:
            fut.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - delivered through the future like a worker's error
            fut.set_exception(e)
        return fut
