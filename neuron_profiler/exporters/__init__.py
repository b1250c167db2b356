"""Exports of a trace to other formats (Chrome trace JSON, Parquet). Each reads through `read_trace`."""
