"""Links between imported Kineto events: launch flows (runtime call -> kernel), ``fwdbwd`` flows,
``framework_op`` (kernel -> the operator that launched it).

Kineto links events three ways, all used here:
* ``args.correlation`` shared by the runtime call and the kernel/memcpy/memset it launched;
* flow events (``ac2g`` / ``async_cpu_to_gpu`` / ``async`` and ``fwdbwd``) whose halves sit at the
  exact (pid, tid, ts) of the events they bind to (MTIA device events carry no correlation, only flows);
* ``External id`` shared by the ``cpu_op`` and the kernels it launched (older traces set the kernel's
  External id to the correlation instead; then the innermost operator enclosing the runtime call is used).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from neuron_profiler.importers.kineto_events import key_codes

_LAUNCH_FLOWS = frozenset({"ac2g", "async_cpu_to_gpu", "async"})


def _bind(halves: pd.DataFrame, events: pd.DataFrame) -> pd.Series:
    """Row of ``events`` (columns pidc, tidc, start_ts, row, prio) each flow half binds to (-1 none);
    ties at the same (pid, tid, ts) resolve to the lowest ``prio``."""
    if halves.empty or events.empty:
        return pd.Series(-1, index=halves.index, dtype=np.int64)
    m = halves.reset_index().merge(events, left_on=["pidc", "tidc", "ts"],
                                   right_on=["pidc", "tidc", "start_ts"], how="inner")
    m = m.sort_values(["index", "prio"], kind="stable").drop_duplicates("index")
    out = pd.Series(-1, index=halves.index, dtype=np.int64)
    out.loc[m["index"].to_numpy()] = m["row"].to_numpy()
    return out


def resolve_links(host: dict[str, np.ndarray], instr: dict[str, np.ndarray], flows: pd.DataFrame,
                  runtime_mask: np.ndarray, op_prio: np.ndarray) -> dict[str, Any]:
    """Compute the links between final rows.

    ``host``: host_ops in row order, arrays pid, tid, start_ts, duration_ns, correlation_id,
    external_id, sequence_number; ``instr``: instructions in row order, arrays pid, tid (raw Kineto),
    start_ts, correlation_id, external_id; ``flows``: flow halves (ph, cat, id, pid, tid, ts); pid / tid
    may be any hashable keys (the importer passes int64 codes). ``runtime_mask`` marks runtime/driver host
    rows, ``op_prio`` ranks operator host rows as launch owners (0 cpu_op .. 2, 9 = not an operator).

    Returns launch (src host rows, dst instruction rows), fwdbwd (src, dst host rows), framework_op per
    instruction, and counts of unresolved flow halves."""
    hp, ht, ip_, it, fp, ft = key_codes(host["pid"], host["tid"], instr["pid"], instr["tid"],
                                        flows["pid"].to_numpy(), flows["tid"].to_numpy())
    n_h, n_i = len(host["start_ts"]), len(instr["start_ts"])
    hrow = np.arange(n_h, dtype=np.int64)
    irow = np.arange(n_i, dtype=np.int64)
    h_corr = host["correlation_id"]
    i_corr = instr["correlation_id"]

    # 1. runtime call -> device event by correlation id
    launch_src = np.full(n_i, -1, dtype=np.int64)
    rt = pd.DataFrame({"corr": h_corr[runtime_mask], "row": hrow[runtime_mask]})
    rt = rt[rt["corr"] >= 0].drop_duplicates("corr")
    if len(rt) and n_i:
        s = pd.Series(rt["row"].to_numpy(), index=rt["corr"].to_numpy())
        launch_src = np.array(s.reindex(i_corr).fillna(-1), dtype=np.int64)
        launch_src[i_corr < 0] = -1

    # 2. flow events bound by (pid, tid, ts)
    fl = flows.assign(pidc=fp, tidc=ft)
    h_events = pd.DataFrame({"pidc": hp, "tidc": ht, "start_ts": host["start_ts"], "row": hrow})
    unresolved = {}
    launch_fl = fl[fl["cat"].isin(_LAUNCH_FLOWS)]
    if len(launch_fl) and n_i:
        s_half = launch_fl[launch_fl["ph"] == "s"]
        f_half = launch_fl[launch_fl["ph"] == "f"]
        s_ev = h_events.assign(prio=np.where(runtime_mask, 0, 1))
        i_events = pd.DataFrame({"pidc": ip_, "tidc": it, "start_ts": instr["start_ts"], "row": irow,
                                 "prio": 0})
        src = _bind(s_half, s_ev)
        dst = _bind(f_half, i_events)
        pairs = pd.DataFrame({"id": s_half["id"].to_numpy(), "src": src.to_numpy()}).query("src >= 0") \
            .drop_duplicates("id").merge(
            pd.DataFrame({"id": f_half["id"].to_numpy(), "dst": dst.to_numpy()}).query("dst >= 0"), on="id")
        missing = launch_src[pairs["dst"].to_numpy()] < 0
        launch_src[pairs["dst"].to_numpy()[missing]] = pairs["src"].to_numpy()[missing]
        unresolved["launch_flows_bound"] = str(len(pairs))
        unresolved["launch_flow_ids_unpaired"] = str(int((~launch_fl["id"].isin(pairs["id"])).sum()))

    fwd = fl[fl["cat"] == "fwdbwd"]
    fwd_src = fwd_dst = np.zeros(0, dtype=np.int64)
    if len(fwd) and n_h:
        seq = host["sequence_number"]
        # prefer operators with an autograd sequence number, then the outermost (longest) one
        prio = np.where(op_prio < 9, 0, 2) + np.where(seq >= 0, 0, 1)
        h_ev = h_events.assign(prio=prio * 10**12 - np.minimum(host["duration_ns"], 10**12 - 1))
        s_half, f_half = fwd[fwd["ph"] == "s"], fwd[fwd["ph"] == "f"]
        src, dst = _bind(s_half, h_ev), _bind(f_half, h_ev)
        pairs = pd.DataFrame({"id": s_half["id"].to_numpy(), "src": src.to_numpy()}).query("src >= 0") \
            .drop_duplicates("id").merge(
            pd.DataFrame({"id": f_half["id"].to_numpy(), "dst": dst.to_numpy()}).query("dst >= 0"), on="id")
        fwd_src, fwd_dst = pairs["src"].to_numpy(np.int64), pairs["dst"].to_numpy(np.int64)
        unresolved["fwdbwd_flows_bound"] = str(len(pairs))
        unresolved["fwdbwd_flow_ids_unpaired"] = str(int((~fwd["id"].isin(pairs["id"])).sum()))

    framework_op = _framework_ops(host, instr, launch_src, op_prio, hp, ht)
    has = launch_src >= 0
    return {"launch_src": launch_src[has], "launch_dst": irow[has], "fwd_src": fwd_src, "fwd_dst": fwd_dst,
            "framework_op": framework_op, "unresolved": unresolved}


def _framework_ops(host: dict[str, np.ndarray], instr: dict[str, np.ndarray], launch_src: np.ndarray,
                   op_prio: np.ndarray, hp: np.ndarray, ht: np.ndarray) -> np.ndarray:
    """Operator host row per instruction: same External id (cpu_op first), else the innermost operator
    on the launching thread that encloses the runtime call; -1 when neither exists."""
    n_i = len(instr["start_ts"])
    out = np.full(n_i, -1, dtype=np.int64)
    ext = host["external_id"]
    ops = pd.DataFrame({"ext": ext, "row": np.arange(len(ext)), "prio": op_prio})
    ops = ops[(ops["ext"] >= 0) & (ops["prio"] < 9)].sort_values(["prio", "row"], kind="stable") \
        .drop_duplicates("ext")
    i_ext = instr["external_id"]
    if len(ops) and n_i:
        s = pd.Series(ops["row"].to_numpy(), index=ops["ext"].to_numpy())
        out = np.array(s.reindex(i_ext).fillna(-1), dtype=np.int64)
        out[i_ext < 0] = -1
    todo = np.flatnonzero((out < 0) & (launch_src >= 0))
    if len(todo):
        enclosing = enclosing_operator(op_prio < 9, hp, ht, host["start_ts"], host["duration_ns"])
        out[todo] = enclosing[launch_src[todo]]
    return out


def enclosing_operator(is_op: np.ndarray, hp: np.ndarray, ht: np.ndarray, start: np.ndarray,
                       dur: np.ndarray) -> np.ndarray:
    """Per host row, the innermost operator row on the same thread that encloses it (-1 none).

    Rows are visited by (thread, start, longest first); a row's parent is the nearest earlier row of its
    thread that ends no earlier (what a stack sweep popping the rows that end before it yields), and its
    operator is the first operator on its parent chain. Both are found by pointer jumping: each round
    replaces a candidate that fails by that candidate's own candidate, which never skips a valid one."""
    n = len(start)
    if n == 0:
        return np.full(0, -1, dtype=np.int64)
    thread = hp * (int(ht.max()) + 1) + ht
    order = np.lexsort((-dur, start, thread))
    end = (start + dur)[order]
    th = thread[order]
    op = is_op[order]
    idx = np.arange(n, dtype=np.int64)
    parent = idx - 1
    parent[0] = -1
    parent[1:][th[1:] != th[:-1]] = -1
    todo = np.flatnonzero(parent >= 0)
    while len(todo):  # previous row of the thread with end >= own end
        p = parent[todo]
        bad = end[p] < end[todo]
        todo = todo[bad]
        parent[todo] = parent[p[bad]]
        todo = todo[parent[todo] >= 0]
    owner = parent.copy()
    todo = np.flatnonzero(owner >= 0)
    todo = todo[~op[owner[todo]]]
    while len(todo):  # first operator up the parent chain
        owner[todo] = owner[owner[todo]]
        todo = todo[owner[todo] >= 0]
        todo = todo[~op[owner[todo]]]
    res = np.full(n, -1, dtype=np.int64)
    has = owner >= 0
    res[order[has]] = order[owner[has]]
    return res
