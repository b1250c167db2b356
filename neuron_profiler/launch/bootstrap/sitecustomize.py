"""Bootstrap for ``neuron-profile capture``: starts profiling in every Python process of the command.

Any other ``sitecustomize`` further down ``sys.path`` is still executed.
"""
import importlib.machinery
import importlib.util
import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _mod = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_mod)

from neuron_profiler.launch.runner import start_from_env  # noqa: E402

start_from_env()
