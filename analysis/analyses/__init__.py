"""The analyses: pure functions ``trace -> DataFrame`` with documented columns, each registered in
:mod:`analysis.registry` (metadata: columns, units, labels, figure). Import the public names from
:mod:`analysis` (each imported there by name; the ``Trace`` methods are in :mod:`analysis.methods`); these
modules hold the implementations and their column specs."""
