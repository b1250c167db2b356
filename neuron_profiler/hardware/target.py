"""The Neuron targets of the hardware table as one type: ``Target``.

Its values are the keys of ``hardware_table.json``'s ``"neuron"`` section (a test holds the two equal). It
subclasses ``str``, so ``Target.TRN2 == "trn2"`` and every accessor keyed by a target name takes either;
code that receives a target from a user (a CLI option, ``NeuronConfig``, a function's argument) turns it into a
``Target`` once with ``Target.parse`` and passes the ``Target`` on.
"""
from __future__ import annotations

from enum import Enum

__all__ = ["Target", "UnknownTargetError"]


class UnknownTargetError(ValueError):
    """A target name that is not a key of the hardware table (a ``ValueError``: the CLIs print it as one line)."""


class Target(str, Enum):
    """A Neuron chip of the hardware table; the value is its key there."""

    TRN1 = "trn1"
    INF2 = "inf2"
    TRN2 = "trn2"
    TRN3 = "trn3"

    def __str__(self) -> str:  # "trn2", as in file names, trace headers and messages
        return self.value

    @classmethod
    def parse(cls, value: str | Target) -> Target:
        """``value`` as a ``Target`` (surrounding blanks and case ignored); ``UnknownTargetError`` naming the
        known targets otherwise."""
        if isinstance(value, cls):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            known = ", ".join(t.value for t in cls)
            raise UnknownTargetError(f"unknown Neuron target {value!r}; valid targets: {known}") from None
