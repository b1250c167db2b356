"""Regenerate `neuron_trace_pb2.py`/`.pyi` from `neuron_trace.proto` (needs grpcio-tools==1.85.1).

Usage: python -m schemas.regenerate [OUT_DIR]
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def regenerate(out_dir: Path = HERE) -> list[Path]:
    """Run protoc on the schema, writing the generated modules into `out_dir`; returns their paths."""
    import grpc_tools
    from grpc_tools import protoc  # dev dependency only

    well_known = Path(grpc_tools.__file__).parent / "_proto"
    out_dir.mkdir(parents=True, exist_ok=True)
    rc = protoc.main(["protoc", f"-I{HERE}", f"-I{well_known}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
                      str(HERE / "neuron_trace.proto")])
    if rc != 0:
        raise RuntimeError(f"protoc failed with exit code {rc}")
    return [out_dir / "neuron_trace_pb2.py", out_dir / "neuron_trace_pb2.pyi"]


if __name__ == "__main__":
    for p in regenerate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE):
        print(p)
