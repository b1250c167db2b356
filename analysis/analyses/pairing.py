"""What a trace is of (model, program, run) and which traces belong together: the default partner of a
comparison and the keys that align two traces.

Everything comes from the trace itself:

- ``header.metadata["model"]`` / ``"model_parameters"`` / ``"script"``: written by capture (the outermost
  ``nn.Module`` with parameters, unwrapped from ``torch.compile`` / DDP / FSDP, and the program's file name);
  for other traces the model is read from the module names of the host ops (their outermost module, when it is
  not a wrapper), else unknown;
- the run (:func:`analysis.core.runs.run_key`): run id, Kineto group trace id or distributed job.

Two traces are *related* when they are two ranks or windows of one run, or two runs of one model (e.g. eager
vs ``torch.compile``; the same parameter count and program rank first). Traces of two known, different models
are never related; traces whose model is unknown on both sides are related only when they ran on the same
device kind and program (the best that can be said of two imported traces).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.runs import run_key, run_label

__all__ = ["TraceIdentity", "identity", "relation", "default_partner", "alignment_keys"]

#: outermost module names that wrap the model (its class is not in the module path)
WRAPPERS = frozenset({"OptimizedModule", "DistributedDataParallel", "DataParallel", "FullyShardedDataParallel",
                      "GraphModule", "FSDP"})
#: analysis.diff's keys
ALL_KEYS = ("op", "module", "shape")
#: share of distinct module names two traces must have in common for ``module`` to stay an alignment key
MODULE_OVERLAP_MIN = 0.5


@dataclass(frozen=True)
class TraceIdentity:
    """What a trace is of. ``model`` is "" when unknown; ``model_source`` says where it was read ("header",
    "modules" or "")."""

    model: str
    model_source: str
    parameters: int | None
    script: str
    run: str
    run_kind: str  # "run", "group", "distributed" or "trace" (stands alone)
    rank: int
    world_size: int
    window: int
    device_kinds: tuple[str, ...]

    def describe(self) -> str:
        """One line for titles and pickers: "GPT (12.6 M parameters) · run gpt_train_step · rank 0 of 2"."""
        parts = []
        if self.model:
            params = f" ({_count(self.parameters)} parameters)" if self.parameters else ""
            parts.append(self.model + params)
        elif self.script:
            parts.append(self.script)
        if self.run_kind != "trace":
            parts.append(f"run {self.run}")
        if self.world_size > 1:
            parts.append(f"rank {self.rank} of {self.world_size}")
        if self.window:
            parts.append(f"window {self.window}")
        return " · ".join(parts)


def _count(n: int | None) -> str:
    if not n:
        return "?"
    for div, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.3g} {unit}"
    return str(n)


def _module_root(trace) -> str:
    """The most frequent outermost module of the host ops when it is not a wrapper, else ""."""
    try:
        mods = trace.whole_table("host_ops", ["module"])["module"]
    except (KeyError, ValueError):
        return ""
    counts = mods.astype("category").value_counts()
    roots: dict[str, int] = {}
    for name, n in counts.items():
        if name and n:
            root = str(name).split(".", 1)[0]
            roots[root] = roots.get(root, 0) + int(n)
    if not roots:
        return ""
    best = max(roots.items(), key=lambda kv: kv[1])[0]
    return "" if best in WRAPPERS else best


def identity(trace, read_tables: bool = True) -> TraceIdentity:
    """The :class:`TraceIdentity` of a trace (memoised per trace). ``read_tables=False`` reads the header
    alone (the model is then unknown when the header does not name it): for listing many files."""
    return trace.memo(("identity", read_tables), lambda: _identity(trace, read_tables), shared=True)


def _identity(trace, read_tables: bool) -> TraceIdentity:
    h = trace.header
    meta = h.metadata
    model, source = meta.get("model", ""), "header"
    if not model and read_tables:
        model, source = _module_root(trace), "modules"
    try:
        params = int(meta.get("model_parameters", "")) if model and source == "header" else None
    except ValueError:
        params = None
    key = run_key(trace)
    return TraceIdentity(model=model, model_source=source if model else "", parameters=params,
                         script=meta.get("script", ""), run=run_label(key), run_kind=key[0], rank=int(h.rank),
                         world_size=int(h.world_size), window=int(h.window_index),
                         device_kinds=tuple(sorted({d.kind for d in h.devices})))


def relation(a, b) -> tuple[int, str]:
    """How closely ``b`` belongs with ``a``: (score, reason), higher first, score 0 = unrelated.

    5 another rank of the same run; 4 another window of the same run; 3 the same model with the same parameter
    count; 2 the same model; 1 model unknown on both sides, same device kind and program; 0 otherwise."""
    ha, hb = identity(a, read_tables=False), identity(b, read_tables=False)  # the run is in the header
    if ha.run_kind != "trace" and run_key(a) == run_key(b):
        if ha.rank != hb.rank:
            return 5, f"another rank of run {ha.run}"
        return 4, f"another window of run {ha.run}"
    ia, ib = identity(a), identity(b)  # the model: from the header, else the module names
    if ia.model and ib.model:
        if ia.model != ib.model:
            return 0, f"different models ({ia.model} vs {ib.model})"
        if ia.parameters and ia.parameters == ib.parameters:
            return 3, f"the same model ({ia.model}, {_count(ia.parameters)} parameters)"
        return 2, f"the same model ({ia.model})"
    if not ia.model and not ib.model and ia.device_kinds == ib.device_kinds and ia.script == ib.script:
        return 1, "model unknown on both sides; same device and program"
    return 0, "unrelated (model known on one side only)"


def default_partner(trace, candidates: Sequence) -> tuple[int | None, str]:
    """The position in ``candidates`` of the trace to compare ``trace`` with by default, and why: the most
    related one (:func:`relation`; ties: the same program, the same device kind, then the first listed).
    ``(None, reason)`` when none is related: a trace is never paired with an unrelated one, nor with itself."""
    ia = identity(trace, read_tables=False)
    best, best_key, why = None, None, "no other trace of the same run or model"
    for i, c in enumerate(candidates):
        if c is trace:
            continue
        score, reason = relation(trace, c)
        if score <= 0:
            continue
        ic = identity(c, read_tables=False)
        key = (score, ic.script == ia.script, ic.device_kinds == ia.device_kinds)
        if best_key is None or key > best_key:
            best, best_key, why = i, key, reason
    return best, why


def _module_names(trace) -> set[str]:
    try:
        mods = trace.whole_table("host_ops", ["module"])["module"]
    except (KeyError, ValueError):
        return set()
    return {str(m) for m in mods.astype("category").cat.categories if m}


def alignment_keys(a, b) -> tuple[tuple[str, ...], str]:
    """analysis.diff's keys to align ``a`` and ``b`` by default, and why: op alone when the two ran on different
    device kinds or their module names differ (eager vs ``torch.compile``, a DDP-wrapped model vs a bare one:
    fewer than half of the distinct module names in common), else op, module and shape."""
    ia, ib = identity(a, read_tables=False), identity(b, read_tables=False)
    if ia.device_kinds != ib.device_kinds:
        return ("op",), "different devices: aligned by op"
    ma, mb = _module_names(a), _module_names(b)
    if not ma or not mb:
        return ("op",), "module names missing on one side: aligned by op"
    overlap = len(ma & mb) / len(ma | mb)
    if overlap < MODULE_OVERLAP_MIN:
        return ("op",), f"module names differ ({overlap:.0%} in common): aligned by op"
    return ALL_KEYS, "same device and modules: aligned by op, module and shape"
