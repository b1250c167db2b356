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

from neuron_profiler.importers.kineto.events import factorize, key_codes
from neuron_profiler.importers.kineto.extract import FLOW_CATS, FLOW_PHASES

#: flows["cat"] code -> whether it is a launch flow (a table lookup: np.isin costs ~20-90 us on any input)
_IS_LAUNCH = np.asarray([c in ("ac2g", "async_cpu_to_gpu", "async") for c in FLOW_CATS], dtype=bool)
_FWD_CODE = FLOW_CATS.index("fwdbwd")
_S, _F = FLOW_PHASES.index("s"), FLOW_PHASES.index("f")


def lookup(keys: np.ndarray, values: np.ndarray, queries: np.ndarray, default: int = -1) -> np.ndarray:
    """``values`` of the first row whose key equals each query (``default`` where none): a hash-free join
    (sort + binary search), a few numpy calls whatever the size."""
    out = np.full(len(queries), default, dtype=np.int64)
    if not len(keys) or not len(queries):
        return out
    if (keys[1:] > keys[:-1]).all():  # already sorted without repeats (e.g. row numbers): nothing to sort
        uk, uv = keys, values
    else:
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        first = np.ones(len(sk), dtype=bool)
        first[1:] = sk[1:] != sk[:-1]
        uk, uv = sk[first], values[order][first]
    pos = np.minimum(np.searchsorted(uk, queries), len(uk) - 1)
    hit = uk[pos] == queries
    out[hit] = uv[pos[hit]]
    return out


def _pair_key(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One int64 key per (a, b) pair of int64 columns (equal exactly when both are equal). ``a`` is used as is
    when it is small non-negative codes (thread codes are) and the key cannot overflow, else factorized too;
    ``b`` (timestamps) is used as its offset from its minimum when that fits (no hashing), else factorized."""
    if not len(a):
        return np.zeros(0, dtype=np.int64)
    lo, hi = int(a.min()), int(a.max())
    b_lo = int(b.min())
    width = int(b.max()) - b_lo + 1
    if lo >= 0 and (hi + 1) * width < 2**62:
        return a * width + (b - b_lo)
    cb = factorize(b)[0]
    width = int(cb.max()) + 1
    ca = a if lo >= 0 and (hi + 1) * width < 2**62 else factorize(a)[0]
    return ca * width + cb


def _bind(h_thread: np.ndarray, h_ts: np.ndarray, e_thread: np.ndarray, e_ts: np.ndarray,
          e_prio: np.ndarray) -> np.ndarray:
    """Row of the event (thread code, start ts) each flow half binds to (-1 none); ties at the same
    (thread, ts) resolve to the lowest ``e_prio``, then the first row."""
    if not len(h_ts) or not len(e_ts):
        return np.full(len(h_ts), -1, dtype=np.int64)
    key = _pair_key(np.concatenate([e_thread, h_thread]), np.concatenate([e_ts, h_ts]))
    ek, hk = key[:len(e_ts)], key[len(e_ts):]
    order = np.lexsort((e_prio, ek))  # stable: equal (key, prio) stay in row order
    return lookup(ek[order], order.astype(np.int64), hk)


def _pairs(ids: np.ndarray, phase: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) row pairs of flow halves: each ``s`` half with a bound row (the first per id) is paired
    with every bound ``f`` half of the same id."""
    s = np.flatnonzero((phase == _S) & (rows >= 0))
    f = np.flatnonzero((phase == _F) & (rows >= 0))
    s_pos = lookup(ids[s], s.astype(np.int64), ids[f])
    ok = s_pos >= 0
    order = np.lexsort((f[ok], s_pos[ok]))  # in the order of the s halves, then of the f halves
    return rows[s_pos[ok][order]], rows[f[ok][order]]


def _unpaired(ids: np.ndarray, phase: np.ndarray, rows: np.ndarray) -> int:
    """Flow halves whose id has no bound ``s`` and bound ``f`` half."""
    if not len(ids):
        return 0
    codes, uniq = factorize(ids)
    bound = rows >= 0
    has_s = np.zeros(len(uniq), dtype=bool)
    has_f = np.zeros(len(uniq), dtype=bool)
    has_s[codes[bound & (phase == _S)]] = True
    has_f[codes[bound & (phase == _F)]] = True
    return int(len(ids) - (has_s & has_f)[codes].sum())


def resolve_links(host: dict[str, np.ndarray], instr: dict[str, np.ndarray], flows: dict[str, np.ndarray],
                  runtime_mask: np.ndarray, op_prio: np.ndarray) -> dict[str, Any]:
    """Compute the links between final rows.

    ``host``: host_ops in row order, arrays pid, tid, start_ts, duration_ns, correlation_id,
    external_id, sequence_number; ``instr``: instructions in row order, arrays pid, tid (raw Kineto),
    start_ts, correlation_id, external_id; ``flows``: flow halves (arrays ph / cat codes into
    ``extract.FLOW_PHASES`` / ``FLOW_CATS``, id, pid, tid, ts); pid / tid are int64 keys. ``runtime_mask``
    marks runtime/driver host rows, ``op_prio`` ranks operator host rows as launch owners (0 cpu_op .. 2,
    9 = not an operator).

    Returns launch (src host rows, dst instruction rows), fwdbwd (src, dst host rows), framework_op per
    instruction, and counts of unresolved flow halves."""
    hp, ht, ip_, it, fp, ft = key_codes(host["pid"], host["tid"], instr["pid"], instr["tid"],
                                        np.asarray(flows["pid"]), np.asarray(flows["tid"]))
    width = int(max(ht.max(initial=0), it.max(initial=0), ft.max(initial=0))) + 1
    h_th, i_th, f_th = hp * width + ht, ip_ * width + it, fp * width + ft
    n_h, n_i = len(host["start_ts"]), len(instr["start_ts"])
    hrow = np.arange(n_h, dtype=np.int64)
    h_corr, i_corr = host["correlation_id"], instr["correlation_id"]

    # 1. runtime call -> device event by correlation id
    rt = runtime_mask & (h_corr >= 0)
    launch_src = lookup(h_corr[rt], hrow[rt], i_corr)
    launch_src[i_corr < 0] = -1

    # 2. flow events bound by (pid, tid, ts)
    unresolved: dict[str, str] = {}
    f_cat, f_ph, f_id, f_ts = flows["cat"], flows["ph"], np.asarray(flows["id"]), np.asarray(flows["ts"])
    is_launch = _IS_LAUNCH[f_cat]
    if is_launch.any() and n_i:
        sel = np.flatnonzero(is_launch)
        ph = f_ph[sel]
        rows = np.full(len(sel), -1, dtype=np.int64)
        s_half, f_half = ph == _S, ph == _F
        rows[s_half] = _bind(f_th[sel][s_half], f_ts[sel][s_half], h_th, host["start_ts"],
                             np.where(runtime_mask, 0, 1))
        rows[f_half] = _bind(f_th[sel][f_half], f_ts[sel][f_half], i_th, instr["start_ts"],
                             np.zeros(n_i, dtype=np.int64))
        src, dst = _pairs(f_id[sel], ph, rows)
        missing = launch_src[dst] < 0
        launch_src[dst[missing]] = src[missing]
        unresolved["launch_flows_bound"] = str(len(src))
        unresolved["launch_flow_ids_unpaired"] = str(_unpaired(f_id[sel], ph, rows))

    fwd_src = fwd_dst = np.zeros(0, dtype=np.int64)
    is_fwd = f_cat == _FWD_CODE
    if is_fwd.any() and n_h:
        sel = np.flatnonzero(is_fwd)
        seq = host["sequence_number"]
        # prefer operators with an autograd sequence number, then the outermost (longest) one
        prio = (np.where(op_prio < 9, 0, 2) + np.where(seq >= 0, 0, 1)) * 10**12 - \
            np.minimum(host["duration_ns"], 10**12 - 1)
        ph = f_ph[sel]
        rows = _bind(f_th[sel], f_ts[sel], h_th, host["start_ts"], prio)
        rows[(ph != _S) & (ph != _F)] = -1
        fwd_src, fwd_dst = _pairs(f_id[sel], ph, rows)
        unresolved["fwdbwd_flows_bound"] = str(len(fwd_src))
        unresolved["fwdbwd_flow_ids_unpaired"] = str(_unpaired(f_id[sel], ph, rows))

    framework_op = _framework_ops(host, instr, launch_src, op_prio, hp, ht)
    has = launch_src >= 0
    return {"launch_src": launch_src[has], "launch_dst": np.flatnonzero(has).astype(np.int64),
            "fwd_src": fwd_src, "fwd_dst": fwd_dst, "framework_op": framework_op, "unresolved": unresolved}


def _framework_ops(host: dict[str, np.ndarray], instr: dict[str, np.ndarray], launch_src: np.ndarray,
                   op_prio: np.ndarray, hp: np.ndarray, ht: np.ndarray) -> np.ndarray:
    """Operator host row per instruction: same External id (cpu_op first), else the innermost operator
    on the launching thread that encloses the runtime call; -1 when neither exists."""
    ext = host["external_id"]
    ops = np.flatnonzero((ext >= 0) & (op_prio < 9))
    # by priority, then row: the first per External id wins (rows increase: a stable radix sort of the priorities)
    ops = ops[np.argsort(op_prio[ops].astype(np.int16), kind="stable")]
    i_ext = instr["external_id"]
    out = lookup(ext[ops], ops.astype(np.int64), i_ext)
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
    order = _thread_order(thread, start, dur)
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


def _thread_order(thread: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """``np.lexsort((-dur, start, thread))``. Rows that already come by start, then longest first (the host
    table's order) need only a stable sort of their threads: a radix sort when the thread codes fit 16 bits
    (numpy's stable sort of int64 is a timsort, ~25 % of ``enclosing_operator`` on mtia_inference)."""
    s0, s1 = start[:-1], start[1:]
    if ((s1 > s0) | ((s1 == s0) & (dur[1:] <= dur[:-1]))).all():
        small = len(thread) and 0 <= int(thread.min()) and int(thread.max()) < 2**15
        return np.argsort(thread.astype(np.int16) if small else thread, kind="stable")
    return np.lexsort((-dur, start, thread))
