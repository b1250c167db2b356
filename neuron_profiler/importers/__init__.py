"""Importers of other profilers' traces into the ``.nprof`` format (Kineto / torch.profiler JSON)."""
from neuron_profiler.importers.kineto import import_directory, import_kineto, load_kineto_builder

__all__ = ["import_kineto", "import_directory", "load_kineto_builder"]
