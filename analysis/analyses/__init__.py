"""The analyses: pure functions ``trace -> DataFrame`` with documented columns, each registered in
:mod:`analysis.registry` (which generates the ``Trace`` methods and ``analysis.__all__``). Import the public
names from :mod:`analysis`; these modules hold the implementations and their column specs."""
