"""Names of trace events that one part of the project writes and another reads (a leaf module: it imports
nothing, so capture, which writes them, and the simulated runtime, which reads them, both depend on it rather
than on each other)."""
from __future__ import annotations

__all__ = ["SYNC_PREFIX", "DRY_RUN_CALL_PREFIX"]

#: Name prefix of the host ranges that mark a synchronisation point (``neuron::sync Tensor.cpu``): written by
#: :mod:`neuron_profiler.capture.sync`, read by the simulated runtime to project where the host waits.
SYNC_PREFIX = "neuron::sync "

#: Name prefix of the host range around a call that capture runs as the device would in a meta dry run
#: (``neuron::dry_run linear``: autocast's casts and the op, the fused attention kernel): written by
#: :mod:`neuron_profiler.capture.dryrun`; the simulated runtime costs it as the program's call of that op, with
#: the casts and the op inside it nested, as CPU autocast records them.
DRY_RUN_CALL_PREFIX = "neuron::dry_run "
