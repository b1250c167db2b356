"""Trace -> one Parquet file per table (needs pyarrow: `pip install neuron-profiler[parquet]`)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from neuron_profiler.trace import TABLES, read_trace


def export_parquet(src: str | os.PathLike, out_dir: str | os.PathLike) -> list[Path]:
    """Write each table of ``src`` to ``out_dir/<table>.parquet`` and the header to ``header.json``.

    Columns keep the trace's names and units (int64 ns, bytes); string columns are dictionary-encoded."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise RuntimeError("Parquet export needs pyarrow: pip install 'neuron-profiler[parquet]'") from None
    from google.protobuf.json_format import MessageToDict

    tf = read_trace(src)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for t in TABLES:
        p = out / f"{t}.parquet"
        tf.table(t).reset_index().to_parquet(p, index=False)
        written.append(p)
    hp = out / "header.json"
    hp.write_text(json.dumps(MessageToDict(tf.header, preserving_proto_field_name=True), indent=1))
    written.append(hp)
    tf.close()
    return written
