"""The importer's compiled passes: the C extension ``_fastextract`` (built from ``csrc/``), or None.

None when the package was installed without a C compiler, or when ``NEURON_PROFILER_PURE_PYTHON`` is set (the
Python path is the oracle: to compare or to debug). Every caller has a Python path with the same results."""
from __future__ import annotations

import os
from types import ModuleType

compiled: ModuleType | None
try:
    if os.environ.get("NEURON_PROFILER_PURE_PYTHON"):
        raise ImportError
    import neuron_profiler.importers.kineto._fastextract as compiled
except ImportError:  # built without a C compiler: same results, slower
    compiled = None
