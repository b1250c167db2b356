"""Build of the optional C extension; everything else is declared in pyproject.toml.

``neuron_profiler.importers.kineto._fastextract`` runs the Kineto importer's per-event passes in C. It is
optional: without a compiler the install still succeeds and the importer uses its Python path (same result)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "neuron_profiler.importers.kineto._fastextract",
    sources=[f"neuron_profiler/importers/kineto/csrc/{f}.c"
             for f in ("fastextract", "encode", "objects", "strcache", "tokens", "scan", "factorize")],
    depends=[f"neuron_profiler/importers/kineto/csrc/{f}.h" for f in ("common", "tokens")],
    extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                        "-Wno-missing-field-initializers"],
    optional=True,
)])
