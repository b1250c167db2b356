"""Names of the trace tables and of the columns the analyses read (the trace format's names, in one place)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from neuron_profiler.trace.columns import columns_of

__all__ = ["row_positions", "TABLE_NAMES", "ANALYSIS_COLUMNS", "WINDOW_COLUMNS", "TIMED_TABLES", "columns_of_table",
           "MATRIX_ENGINES", "COPY_ENGINES", "NON_COMPUTE_ENGINES"]

TABLE_NAMES = ("tracks", "host_ops", "instructions", "dma", "collectives", "counters", "flows", "allocations")
#: tables whose rows are intervals (``start_ts`` + ``duration_ns``)
TIMED_TABLES = ("host_ops", "instructions", "dma", "collectives")
#: The columns the analyses read, per table (tables not listed: all columns). ``Trace.analysis_table`` loads
#: only these (the reader decodes only the requested columns); ``Trace.table`` / the properties load all.
ANALYSIS_COLUMNS = {"instructions": ("track", "start_ts", "duration_ns", "engine", "opcode", "name", "framework_op",
                                     "correlation_id", "raw_flops", "hbm_read_bytes", "hbm_write_bytes", "dtype",
                                     "tensor_instruction_type")}
#: columns a window restriction needs, per table
WINDOW_COLUMNS: dict[str, tuple[str, ...]] = {t: ("start_ts", "duration_ns") for t in (*TIMED_TABLES, "allocations")}
WINDOW_COLUMNS.update(counters=("ts",), flows=("src_table", "src_row", "dst_table", "dst_row"))

#: engines of matrix work (Neuron Tensor engine; FLOPs there are "model FLOPs")
MATRIX_ENGINES = ("Tensor", "TensorMatrix")
#: GPU copy engines (memcpy / memset rows carry their own byte counts)
COPY_ENGINES = ("Memcpy", "Memset")
#: engines whose rows are neither compute nor data movement of an op (syncs, semaphores)
NON_COMPUTE_ENGINES = ("Memcpy", "Memset", "Sync")


def columns_of_table(name: str) -> list[str]:
    """Every column of table ``name`` in the trace format."""
    return list(columns_of(name))


def row_positions(index: pd.Index, ids: np.ndarray) -> np.ndarray:
    """Positions in ``index`` of the row ids ``ids`` (-1 where absent). Whole tables have a RangeIndex of
    row ids, where this is arithmetic instead of a hash lookup per row."""
    ids = np.asarray(ids, dtype=np.int64)
    n = len(index)
    if isinstance(index, pd.RangeIndex) and index.step == 1:
        start = index.start
    elif n and index.dtype.kind == "i" and index[-1] - index[0] == n - 1 and index.is_unique \
            and index.is_monotonic_increasing:
        start = int(index[0])  # consecutive ids: the same arithmetic
    else:
        return index.get_indexer(ids)
    pos = ids - start  # the one array returned; out-of-range ids set to -1 in place
    pos[(pos < 0) | (pos >= n)] = -1
    return pos
