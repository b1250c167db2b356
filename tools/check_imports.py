"""Check the package rules of the one-way flow (capture -> trace file -> analysis -> views) on every import of
every module, at module level or inside a function:

    python tools/check_imports.py          # prints each violation as path:line and exits 1, else "ok"

The rules (docs/architecture.md): capture never imports analysis or explorer; analysis never imports Dash,
torch, the explorer or the simulator; the runtime never imports capture; nothing in neuron_profiler imports
the explorer; the trace format imports none of capture, runtime, analysis or explorer; the explorer uses only
analysis's public API (``analysis``, ``analysis.figures``, ``analysis.registry``, ``analysis.units``), not
``analysis.core`` or ``analysis.analyses``. Imports through ``importlib`` strings are not seen.
"""
from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("analysis", "explorer", "neuron_profiler", "schemas")

#: (importing package prefix, forbidden imported prefixes, why)
RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("neuron_profiler.capture", ("analysis", "explorer"), "capture never imports analysis or explorer"),
    ("analysis", ("dash", "dash_ag_grid", "dash_mantine_components", "torch", "explorer",
                  "neuron_profiler.runtime", "neuron_profiler.capture"),
     "analysis never imports Dash, torch, the explorer, the simulator or capture"),
    ("neuron_profiler.runtime", ("neuron_profiler.capture",), "the runtime never imports capture"),
    ("neuron_profiler", ("explorer",), "neuron_profiler never imports the explorer"),
    ("neuron_profiler.trace", ("neuron_profiler.capture", "neuron_profiler.runtime", "analysis", "explorer"),
     "the trace format imports no producer and no consumer"),
    ("explorer", ("analysis.core", "analysis.analyses"), "the explorer uses analysis's public API only"),
)


def module_name(path: Path, root: Path = REPO) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = rel.parts[:-1] if path.name == "__init__.py" else rel.parts
    return ".".join(parts)


def imports(path: Path, root: Path = REPO) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative imports resolved; for
    ``from pkg import name`` both ``pkg`` and ``pkg.name`` (the name may be a submodule)."""
    mod = module_name(path, root)
    package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for a in node.names:
                yield node.lineno, f"{target}.{a.name}"


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def violations(root: Path = REPO) -> list[str]:
    out = []
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            mod = module_name(path, root)
            seen = set()
            for line, target in imports(path, root):
                for owner, banned, why in RULES:
                    if _under(mod, owner) and any(_under(target, b) for b in banned) and (line, why) not in seen:
                        seen.add((line, why))
                        out.append(f"{path.relative_to(root)}:{line}: imports {target}: {why}")
    return out


def main() -> int:
    bad = violations()
    for v in bad:
        print(v)
    print("import rules: ok" if not bad else f"import rules: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
