"""Dask for the cross-rank analyses (``engine="dask"``): a client, and one task per trace file.

Dask is optional (``pip install 'neuron-profiler[dask]'``) and imported only here, only when asked for.
``scheduler`` is where the tasks run:

- ``None``: a ``distributed.LocalCluster`` on this machine, ``workers`` processes (default 2) of one thread
  each, bound to 127.0.0.1 (its status page on a free port), closed when the call returns;
- ``"tcp://host:8786"``: the scheduler of a running cluster (``dask scheduler`` / ``dask worker``); the trace
  files must be readable by the workers at the same paths (a shared filesystem) and the workers need this
  package installed;
- a ``distributed.Client``: used as is (and left open), to reuse one cluster across calls.
"""
from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["client", "local_cluster", "map_files", "DEFAULT_WORKERS", "WORKER_ENV"]

DEFAULT_WORKERS = 2
#: environment of the LocalCluster's workers (see :func:`local_cluster`)
WORKER_ENV = {"MALLOC_TRIM_THRESHOLD_": str(64 << 20)}
#: seconds to wait for a scheduler address to answer
CONNECT_TIMEOUT_S = 10


def _distributed():
    try:
        import distributed
    except ImportError:
        raise ImportError("engine='dask' needs Dask: pip install 'neuron-profiler[dask]' "
                          "(dask[distributed])") from None
    return distributed


@contextlib.contextmanager
def client(scheduler: Any = None, workers: int | None = None) -> Iterator[Any]:
    """A ``distributed.Client`` for ``scheduler`` (see the module docstring). Raises ``ValueError`` (one line)
    when the address is malformed or nothing answers there, ``ImportError`` when Dask is not installed."""
    dd = _distributed()
    if isinstance(scheduler, dd.Client):
        if workers is not None:
            raise ValueError("workers is for the LocalCluster; a given Client already has its workers")
        yield scheduler
        return
    if scheduler is None:
        with local_cluster(workers) as cluster, dd.Client(cluster) as c:
            yield c
        return
    if not isinstance(scheduler, str):
        raise ValueError(f"scheduler must be an address such as 'tcp://host:8786' or a distributed.Client, "
                         f"got {type(scheduler).__name__}")
    if workers is not None:
        raise ValueError("workers is for the LocalCluster; a scheduler address already has its workers")
    try:
        c = dd.Client(scheduler, timeout=CONNECT_TIMEOUT_S)
    except (OSError, ValueError, TypeError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ValueError(f"cannot connect to the Dask scheduler at {scheduler!r}: {reason}") from None
    try:
        yield c
    finally:
        c.close()


def local_cluster(workers: int | None = None) -> Any:
    """The ``distributed.LocalCluster`` of ``scheduler=None``: ``workers`` (default 2) single-thread worker
    processes on 127.0.0.1. Their glibc returns freed memory to the system above 64 MiB only
    (``MALLOC_TRIM_THRESHOLD_``; Dask's own 64 KiB default made every rank's reduction twice as slow, page
    faults on memory just returned, for the same peak)."""
    dd = _distributed()
    n = DEFAULT_WORKERS if workers is None else int(workers)
    if n < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    return dd.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR, env=WORKER_ENV)


def map_files(fn: Callable[..., Any], items: Sequence[tuple], *, scheduler: Any = None, workers: int | None = None,
              progress: bool = False, **kw: Any) -> list[Any]:
    """``[fn(*item, **kw) for item in items]``, one Dask task per item (each item names a trace file), results
    in order. Only the results travel back, each as soon as its task is done: its future is then dropped, so
    the worker frees the result instead of holding every rank's until the last one (memory that grows with the
    number of ranks). A task's exception is raised here."""
    if not items:
        return []
    with client(scheduler, workers) as c:
        dd = _distributed()
        futures = c.map(fn, *zip(*items), pure=False, **kw)
        n = len(futures)
        position = {f.key: i for i, f in enumerate(futures)}
        done = dd.as_completed(futures, with_results=True)
        del futures
        out: list[Any] = [None] * n
        for i, (future, result) in enumerate(done, 1):
            out[position[future.key]] = result
            del future, result
            if progress and (i % max(1, n // 10) == 0 or i == n):
                print(f"cross-rank (dask): {i}/{n} ranks reduced", file=sys.stderr)
        return out
