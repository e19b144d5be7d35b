"""STAR: straggler mitigation for data-parallel training.

`star.torch` is the package a PyTorch script adopts (init, DistributedDataParallel,
AdaptiveBatchSampler, step, report_accuracy, shutdown); `star.errors` its exceptions.
"""

__version__ = "0.1.0"
