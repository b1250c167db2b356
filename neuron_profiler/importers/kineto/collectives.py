"""Collective operations from Kineto: NCCL/RCCL kernels (with the collective metadata Kineto copies from
``record_param_comms``) and ``record_param_comms`` host ops whose collective ran on no device kernel.

Bandwidths follow nccl-tests (``doc/PERFORMANCE.md``): ``algbw = S / t`` with S the larger of input and
output bytes (all_gather: total output; reduce_scatter: total input) and ``busbw = algbw * factor`` with
factor from ``neuron_profiler.collectives.bus_factor`` (2(n-1)/n all_reduce, (n-1)/n all_gather /
reduce_scatter / all_to_all, 1 for rooted and point-to-point ops, NaN unknown).
"""
from __future__ import annotations

import functools
import re
from itertools import compress, count
from typing import Any

import numpy as np

from neuron_profiler.collectives import bus_factor, normalize_collective
from neuron_profiler.hardware import dtype_size_bytes, normalize_dtype

_NCCL_KERNEL_OP = re.compile(r"^(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.I)
_ALGO = re.compile(r"_(RING|TREE|COLLNET_DIRECT|COLLNET_CHAIN|COLLNET|NVLS_TREE|NVLS|PAT)_", re.I)
_DTYPE_SUFFIX = re.compile(r"_(float|half|bfloat16|double|int8_t|uint8_t|int32_t|uint32_t|int64_t|uint64_t|"
                           r"f32|f16|bf16|f64|i8|u8|i32|u32|i64|u64)\b", re.I)

_NO_ARGS: dict[str, Any] = {}
_C_ALIASES = {"int8_t": "int8", "uint8_t": "uint8", "int32_t": "int32", "uint32_t": "uint32",
              "int64_t": "int64", "uint64_t": "uint64", "i8": "int8", "u8": "uint8", "i32": "int32",
              "u32": "uint32", "i64": "int64", "u64": "uint64", "f32": "float32", "f16": "float16",
              "bf16": "bfloat16", "f64": "float64"}


normalize_operation = normalize_collective  # the project's one canonical naming


@functools.lru_cache(maxsize=4096)
def kernel_operation(kernel_name: str) -> tuple[str, str, str]:
    """(operation, algorithm, dtype) parsed from an NCCL/RCCL kernel name, e.g.
    ``ncclKernel_AllReduce_RING_LL_Sum_float`` -> ("all_reduce", "ring", "float32"); ("", "", "") if not one."""
    m = _NCCL_KERNEL_OP.match(kernel_name)
    if not m:
        return "", "", ""
    algo = _ALGO.search(kernel_name)
    dt = _DTYPE_SUFFIX.search(kernel_name.split("(")[0])
    dtype = ""
    if dt:
        raw = dt.group(1).lower()
        dtype = normalize_dtype(_C_ALIASES.get(raw, raw)) or _C_ALIASES.get(raw, raw)
    return normalize_operation(m.group(1)), algo.group(1).lower() if algo else "", dtype


_LIMIT = 2**62  # larger counts are not counts (and would not fit the trace's 64-bit columns once multiplied)


def _int(v: Any) -> int:
    """An args value that should be a count: an int (or a float / numeric string) within +-2**62, else -1."""
    if type(v) is float and v == v and abs(v) < _LIMIT:
        v = int(v)
    elif type(v) is str and v.strip().lstrip("-").isdigit() and len(v) < 20:
        try:  # isdigit() also holds for "²" and "--5", which int() refuses
            v = int(v)
        except ValueError:
            return -1
    return v if type(v) is int and -_LIMIT < v < _LIMIT else -1


def _size(n: int, esize: int) -> int:
    b = n * esize
    return b if 0 <= b < _LIMIT else 0


def _ranks(v: Any) -> str:
    if isinstance(v, list):
        return ",".join(str(x) for x in v)
    if isinstance(v, str):
        return ",".join(re.findall(r"-?\d+", v)) + (",..." if "..." in v else "")
    return ""


def _text(v: Any) -> str:
    """An args value that should be a string (anything else: "" for None, else its JSON-ish text)."""
    return v if type(v) is str else ("" if v is None else str(v)[:200])


def _meta_row(a: dict[str, Any], fallback_op: str) -> dict[str, Any]:
    op = normalize_operation(_text(a["Collective name"])) if "Collective name" in a else fallback_op
    dtype_raw = _text(a.get("dtype", ""))
    dtype = normalize_dtype(dtype_raw) or (str(dtype_raw).lower() if dtype_raw else "")
    esize = dtype_size_bytes(dtype) if dtype else 0
    n_in, n_out = max(_int(a.get("In msg nelems")), 0), max(_int(a.get("Out msg nelems")), 0)
    in_b = _int(a.get("In msg size")) if "In msg size" in a else _size(n_in, esize)
    out_b = _int(a.get("Out msg size")) if "Out msg size" in a else _size(n_out, esize)
    pg = _text(a.get("Process Group Name", ""))
    desc = _text(a.get("Process Group Description", ""))
    return {"operation": op, "process_group": f"{pg}" + (f" ({desc})" if desc and desc != pg else ""),
            "replica_group": _ranks(a.get("Process Group Ranks")), "group_size": _int(a.get("Group size")),
            "sequence_number": _int(a.get("Seq")), "input_size": max(in_b, 0), "output_size": max(out_b, 0),
            "num_elements": max(n_in, n_out), "dtype": dtype}


def _nccl_rows(names: np.ndarray) -> set[int]:
    """Rows whose kernel name is an NCCL collective's, each distinct name matched once (a dict over the names:
    their hashes are cached, where a factorize would hash every character of long kernel names)."""
    values = names.tolist()
    is_nccl = {n: bool(_NCCL_KERNEL_OP.match(str(n))) for n in set(values)}
    return set(compress(count(), map(is_nccl.__getitem__, values)))


def collective_rows(instr_names: np.ndarray, instr_args: dict[int, dict[str, Any]], instr_track: np.ndarray,
                    instr_start: np.ndarray, instr_dur: np.ndarray, framework_op: np.ndarray,
                    host_names: np.ndarray, host_args: dict[int, dict[str, Any]], host_track: np.ndarray,
                    host_start: np.ndarray, host_dur: np.ndarray, world_size: int) -> dict[str, Any]:
    """Column dict of the ``collectives`` table (see module doc); rows in start order.

    ``instr_args`` / ``host_args``: args of the instruction / host rows that carry collective metadata
    (row -> Kineto args)."""
    rows: list[dict[str, Any]] = []
    used_host: set[int] = set()
    for i in sorted(_nccl_rows(instr_names) | set(instr_args)):  # NCCL kernels, rows with metadata
        name, a = instr_names[i], instr_args.get(i, _NO_ARGS)
        has_meta = "Collective name" in a
        if not has_meta and not _NCCL_KERNEL_OP.match(name):
            continue
        k_op, algo, k_dtype = kernel_operation(name)
        fop = int(framework_op[i])
        meta_src = a
        if not has_meta and fop >= 0 and "Collective name" in host_args.get(fop, _NO_ARGS):
            meta_src = host_args[fop]  # kernel without metadata: use its record_param_comms
        if "Collective name" in meta_src:
            r = _meta_row(meta_src, k_op)
        else:
            r = {"operation": k_op, "process_group": "", "replica_group": "", "group_size": -1,
                 "sequence_number": -1, "input_size": 0, "output_size": 0, "num_elements": 0, "dtype": k_dtype}
        if not r["operation"]:
            r["operation"] = k_op
        if fop >= 0:
            used_host.add(fop)
        r.update(track=int(instr_track[i]), start_ts=int(instr_start[i]), duration_ns=int(instr_dur[i]),
                 algorithm=algo, framework_op=fop, instruction=i)
        rows.append(r)
    for h, a in sorted(host_args.items()):
        if h in used_host or host_names[h] != "record_param_comms" or "Collective name" not in a:
            continue
        r = _meta_row(a, "")
        if not r["operation"]:
            continue  # "wait" and friends
        r.update(track=int(host_track[h]), start_ts=int(host_start[h]), duration_ns=int(host_dur[h]),
                 algorithm="", framework_op=h, instruction=-1)
        rows.append(r)
    rows.sort(key=lambda r: r["start_ts"])
    cols = {k: [r[k] for r in rows] for k in ("track", "start_ts", "duration_ns", "operation", "algorithm",
                                             "process_group", "replica_group", "group_size", "sequence_number",
                                             "input_size", "output_size", "num_elements", "dtype",
                                             "framework_op", "instruction")}
    algbw, ops, sizes = [], [], []
    for r in rows:
        size = max(r["input_size"], r["output_size"])
        t = r["duration_ns"] * 1e-9
        algbw.append(size / t if size and t > 0 else 0.0)
        ops.append(r["operation"])
        sizes.append(r["group_size"] if r["group_size"] > 0 else world_size)
    busbw = list(np.asarray(algbw, dtype=float) * bus_factor(np.asarray(ops, dtype=object),
                                                             np.asarray(sizes, dtype=float))) if rows else []
    cols["algorithm_bandwidth"] = algbw
    cols["bus_bandwidth"] = busbw
    return cols
