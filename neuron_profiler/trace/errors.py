"""The one exception family of the trace format. Messages say what was expected, what was found and where."""
from __future__ import annotations


class TraceFormatError(ValueError):
    """A file or stream could not be read or written as a Neuron trace."""


class NotATraceError(TraceFormatError):
    """The input is not a trace at all (wrong magic bytes, not JSON, not a profiler trace...)."""


class UnsupportedVersionError(TraceFormatError):
    """The file's format major version is newer than this reader supports."""


class TruncatedTraceError(TraceFormatError):
    """The file ends before a required part (the header) is complete."""


class CorruptTraceError(TraceFormatError):
    """A checksum, length or encoded value is wrong."""
