"""Import torch.profiler / Kineto Chrome-trace JSON(.gz) files (see ``api`` for the public functions).

Modules: ``read`` (gunzip, memory check, the stdlib parse of the fallback), ``decode`` (msgspec into typed
events), ``exact`` (timestamps exact to the ns), ``events`` / ``extract`` / ``args`` (columns), ``build`` /
``tracks`` / ``links`` / ``collectives`` / ``counters`` / ``stacks`` (the tables), ``roundtrip`` (our own Chrome
export's ``neuronProfiler`` key).
"""
from neuron_profiler.importers.kineto.api import (
                                                  default_output_path,
                                                  dir_writable,
                                                  import_directory,
                                                  import_kineto,
                                                  is_kineto_file,
                                                  load_kineto_builder,
)

__all__ = ["import_kineto", "import_directory", "load_kineto_builder", "default_output_path", "is_kineto_file",
           "dir_writable"]
