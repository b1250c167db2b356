"""Importers of other tools' traces into the ``.nprof`` format, one sub-package per source format:
``kineto`` (torch.profiler / Kineto / Chrome JSON) and ``neuron_explorer`` (Neuron Explorer Parquet profiles
and JSON exports). ``source`` detects what a path holds and opens it (the one entry point of
``neuron-trace import``, ``analysis.load`` and the explorer); ``cache`` keeps converted copies in the
user's cache directory; ``output`` writes to a temporary name and renames when complete."""
from neuron_profiler.importers.kineto import import_directory, import_kineto, load_kineto_builder
from neuron_profiler.importers.source import (
                                              DIRECTORY,
                                              EXPLORER_JSON,
                                              EXPLORER_PARQUET,
                                              KINETO_JSON,
                                              NPROF,
                                              OpenedSource,
                                              detect_source,
                                              import_source,
                                              is_trace_source,
                                              list_sources,
                                              load_source,
                                              open_source,
)

__all__ = ["import_kineto", "import_directory", "load_kineto_builder", "detect_source", "open_source",
           "load_source", "import_source", "is_trace_source", "list_sources", "OpenedSource", "NPROF",
           "KINETO_JSON", "EXPLORER_JSON", "EXPLORER_PARQUET", "DIRECTORY"]
