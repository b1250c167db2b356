"""Profiling a program without changing its code: ``neuron-profile capture -- python train.py`` (``cli``) starts
the command with a ``sitecustomize`` bootstrap that profiles every Python process of it (``runner``)."""
