"""Import Neuron Explorer output: a Parquet profile directory (schema 7.4.0) or a JSON export.

Built from the published schema (aws-neuron-sdk ``profile-schema-reference.rst``, schema 7.4.0 / SDK 2.31.0)
with fixtures written from it: no real Explorer output was available. Where each table and field goes:
``mapping.MAPPING`` (and ``docs/importers.md``).

- ``load_parquet_profile(dir)`` / ``load_json_export(file)``: an in-memory ``TraceBuilder``;
- ``convert_explorer_parquet(dir, builder=None)``: the earlier API (kept for the hardware runtime);
- ``read_explorer_table(dir, table)``: one raw table as a DataFrame.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from neuron_profiler.importers.neuron_explorer.convert import PRODUCER, build_profile

__all__ = ["load_parquet_profile", "load_json_export", "convert_explorer_parquet", "read_explorer_table",
           "PRODUCER"]

PARQUET_FORMAT = "neuron-explorer-parquet"
JSON_FORMAT = "neuron-explorer-json"


def load_parquet_profile(path: str | os.PathLike, *, run_id: str = "", builder: Any = None) -> Any:
    """Convert the Explorer Parquet profile at (or the one profile below) ``path``."""
    from neuron_profiler.importers.neuron_explorer.parquet import profile_dir, read_tables

    d = profile_dir(path)
    return build_profile(read_tables(d), source=str(d), source_format=PARQUET_FORMAT, run_id=run_id,
                         builder=builder)


def load_json_export(path: str | os.PathLike, *, run_id: str = "") -> Any:
    """Convert a Neuron Explorer JSON export (``json_export`` says which shapes are read)."""
    from neuron_profiler.importers.neuron_explorer.json_export import read_export

    tables, extra = read_export(Path(path))
    return build_profile(tables, source=str(path), source_format=JSON_FORMAT, run_id=run_id,
                         extra_metadata=extra)


def convert_explorer_parquet(profile_dir: str | os.PathLike, builder: Any = None) -> Any:
    """Add a Neuron Explorer Parquet profile's events to ``builder`` (a new one when None); returns it."""
    return load_parquet_profile(profile_dir, builder=builder)


def read_explorer_table(profile_dir: str | os.PathLike, table: str) -> Any:
    """One Explorer table (``<table>.parquet`` or its parts) as a DataFrame; None when absent."""
    from neuron_profiler.importers.neuron_explorer.parquet import read_table

    return read_table(profile_dir, table)
