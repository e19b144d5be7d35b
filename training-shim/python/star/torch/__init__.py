"""STAR for PyTorch scripts: a DistributedDataParallel whose gradients go through STAR's
sync engine, per-worker batches and mixed precision from the job's decisions, and the
job's accuracy curve.

    import star.torch as st
    st.init()                                  # STAR_* or torchrun's environment, or none
    model = st.DistributedDataParallel(model)  # gradients go through STAR's engine
    sampler = st.AdaptiveBatchSampler(dataset, batch_size=64)
    for x, y in torch.utils.data.DataLoader(dataset, batch_sampler=sampler):
        with st.step():                        # times the iteration; autocast when AMP is on
            loss = loss_fn(model(x), y)
            loss.backward()
        optimizer.step(); optimizer.zero_grad()
        if step % 50 == 0 and st.rank() == 0:
            st.report_accuracy(evaluate(model))
    st.shutdown()

A pipeline-parallel job's process runs its stage of a torch.nn.Sequential instead:
star.torch.Pipeline (its docstring shows the loop).
"""

from star.errors import ConfigError, PeerError, StarError, StateError
from star.torch._ddp import DistributedDataParallel
from star.torch._pipeline import Pipeline
from star.torch._runtime import (global_batch, init, is_initialized, iteration, local_rank,
                                 max_iterations, mode, rank, report_accuracy, shutdown, world_size)
from star.torch._sampler import AdaptiveBatchSampler
from star.torch._step import step

__all__ = [
    "AdaptiveBatchSampler", "ConfigError", "DistributedDataParallel", "PeerError", "Pipeline", "StarError",
    "StateError", "global_batch", "init", "is_initialized", "iteration", "local_rank",
    "max_iterations", "mode", "rank", "report_accuracy", "shutdown", "step", "world_size",
]
