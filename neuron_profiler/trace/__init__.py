"""The trace format: one writer (`TraceWriter`, `TraceBuilder`), one reader (`read_trace`).

Everything else in the project reads and writes traces through this package.
"""
from neuron_profiler.trace.builder import TraceBuilder, write_trace
from neuron_profiler.trace.columns import FORMAT_MAJOR, FORMAT_MINOR, FORMAT_VERSION, TABLES, TIME_COLUMNS
from neuron_profiler.trace.errors import (
                                          CorruptTraceError,
                                          NotATraceError,
                                          TraceFormatError,
                                          TruncatedTraceError,
                                          UnsupportedVersionError,
)
from neuron_profiler.trace.header import make_header, simulated_by, simulation_note
from neuron_profiler.trace.reader import TraceFile, read_trace
from neuron_profiler.trace.writer import TraceWriter

#: File extension of traces written by this project.
TRACE_SUFFIX = ".nprof"

__all__ = ["TraceBuilder", "TraceWriter", "TraceFile", "read_trace", "write_trace", "make_header", "simulated_by",
           "simulation_note",
           "TraceFormatError", "NotATraceError", "UnsupportedVersionError", "TruncatedTraceError",
           "CorruptTraceError", "TABLES", "TIME_COLUMNS", "FORMAT_VERSION", "FORMAT_MAJOR", "FORMAT_MINOR",
           "TRACE_SUFFIX"]
