"""Capture: host ops from torch.profiler, collective metadata, module hierarchy, host counters, the
PrivateUse1 "neuron" registration and the ``neuron-profile capture`` runner."""
