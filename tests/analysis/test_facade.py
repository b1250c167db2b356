"""The public API is written out (no generated methods, no namespace filled from a list) and agrees with the
registry: every registered analysis is importable from ``analysis`` by name, has its Trace / TraceSet method when
its record names one, and every analysis method has its registry entry."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

import analysis
from analysis import methods, registry

REPO = Path(__file__).resolve().parents[2]
SUBJECT_CLASS = {"trace": analysis.Trace, "pair": analysis.Trace, "traces": analysis.TraceSet}
MIXIN = {"trace": methods.TraceAnalyses, "pair": methods.TraceAnalyses, "traces": methods.TraceSetAnalyses}
#: methods of the mixins that are not registered analyses themselves (each a documented alias)
ALIASES = {"collectives": "collectives_across_ranks"}  # TraceSet.collectives() = collectives_across_ranks


def test_every_registered_analysis_is_exported_by_name():
    for name, spec in registry.REGISTRY.items():
        assert name in analysis.__all__, name
        assert getattr(analysis, name) is spec.wrapper, name


def test_every_registered_method_is_written_out_on_its_class():
    for name, spec in registry.REGISTRY.items():
        if not spec.method:
            continue
        cls = MIXIN[spec.subject]
        assert spec.method in vars(cls), f"{cls.__name__} has no method {spec.method} for analysis {name}"
        assert hasattr(SUBJECT_CLASS[spec.subject], spec.method)


def test_every_method_has_its_registry_entry():
    by_method = {(MIXIN[s.subject], s.method): s for s in registry.REGISTRY.values() if s.method}
    for cls in (methods.TraceAnalyses, methods.TraceSetAnalyses):
        for meth, fn in vars(cls).items():
            if meth.startswith("_") or not callable(fn):
                continue
            key = (cls, ALIASES.get(meth, meth))
            assert key in by_method, f"{cls.__name__}.{meth} calls no registered analysis"
            assert inspect.getdoc(fn), f"{cls.__name__}.{meth} has no docstring"


@pytest.mark.parametrize("name", sorted(n for n, s in registry.REGISTRY.items() if s.method))
def test_method_parameters_are_the_functions_keywords(name):
    """A method takes the function's parameters after the subject, with the same defaults (a method may leave
    out table-only parameters such as ``activity=``/``hta_rounding=``, but adds none)."""
    spec = registry.REGISTRY[name]
    fn = inspect.signature(spec.func).parameters
    meth = inspect.signature(getattr(MIXIN[spec.subject], spec.method)).parameters
    fn_rest = list(fn)[1:] if spec.subject != "pair" else list(fn)[2:]
    meth_rest = list(meth)[1:] if spec.subject != "pair" else list(meth)[2:]
    assert set(meth_rest) <= set(fn_rest), (name, meth_rest, fn_rest)
    for p in meth_rest:
        assert meth[p].default == fn[p].default or meth[p].default is fn[p].default, (name, p)


def test_a_method_gives_the_functions_result():
    t = analysis.load(REPO / "sample_traces" / "gpt_train_step.nprof")
    assert t.hot_ops(by="module").equals(analysis.hot_ops(t, by="module"))
    assert t.summary().equals(analysis.summary(t))
    assert t.collective_stats().equals(analysis.collectives(t))


def test_no_generated_api():
    """No setattr-generated method and no namespace filled with globals().update in analysis/."""
    for path in (REPO / "analysis").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr":
                raise AssertionError(f"{path}:{node.lineno}: setattr")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update" \
                    and isinstance(node.func.value, ast.Call) and getattr(node.func.value.func, "id", "") == "globals":
                raise AssertionError(f"{path}:{node.lineno}: globals().update")
