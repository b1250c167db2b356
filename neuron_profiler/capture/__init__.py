"""Capture inside a profiled process: host ops from torch.profiler, collective metadata, module hierarchy, host
counters, the PrivateUse1 "neuron" registration, the capture session and the window trace files.
(``neuron-profile capture``, which starts programs profiled, is ``neuron_profiler.launch``.)"""
