"""star.torch.AdaptiveBatchSampler: per-worker batches from the job's decisions (BOA).

Every worker walks the same shuffled order of the dataset; each round of the job takes
one global batch from it (the sum of the batches in force that round, which a decision
may change), and worker i takes its share (its batch, after the shares of workers
0..i-1). No sample is drawn twice in an epoch unless its rounds need more samples than
the dataset has (then the order wraps around). An epoch is len(dataset) // global batch rounds on every
worker; a fixed-k child, whose rounds follow its parent's, draws fewer batches and ends
its epoch with the others."""

import torch

from star.errors import ConfigError
from star.torch import _runtime


class AdaptiveBatchSampler(torch.utils.data.Sampler):
    """A batch_sampler for DataLoader: `DataLoader(dataset, batch_sampler=sampler)`.
    batch_size is this worker's batch until a decision changes it (the job's global batch
    is batch_size x world_size); left out, it is the job's global batch (STAR_GLOBAL_BATCH)
    / world_size. A batch_size whose global batch is not the job's is refused (ConfigError
    naming both). shuffle with seed (+ the epoch) the same on every worker;
    set_epoch(e) as with DistributedSampler, else each pass over it is the next epoch."""

    def __init__(self, dataset, batch_size=None, shuffle=True, seed=0):
        rt = _runtime.require("AdaptiveBatchSampler")
        workers = rt.config.world_size
        if batch_size is None:
            batch_size = _batch_from_job(rt.settings.global_batch, workers)
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size: must be an integer >= 1, got {batch_size!r}")
        check_global_batch(rt.settings.global_batch, batch_size, workers)
        self.size = dataset if isinstance(dataset, int) else len(dataset)
        self.global_batch = batch_size * workers
        self.steps = self.size // self.global_batch
        if self.steps < 1:
            raise ConfigError(f"batch_size: a global batch of {self.global_batch} ({batch_size} x "
                              f"{workers} workers) is larger than the dataset ({self.size})")
        rt.default_batch = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.steps

    def __iter__(self):
        rt = _runtime.require("AdaptiveBatchSampler")
        if self.shuffle:
            g = torch.Generator()
            g.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.size, generator=g).tolist()
        else:
            order = list(range(self.size))
        self.epoch += 1
        me = rt.config.worker
        start = _runtime.iteration()
        taken, counted = 0, 0  # samples the epoch's rounds before `counted` took
        for drawn in range(self.steps):
            it = _runtime.iteration() if rt.engine is not None else start + drawn
            round_ = it - start
            if round_ >= self.steps:
                return
            while counted < round_:  # rounds since the last draw (a fixed-k child skips some)
                taken += sum(rt.batches_at(start + counted))
                counted += 1
            batches = rt.batches_at(it)
            first = taken + sum(batches[:me])
            rt.drawn_batch = batches[me]
            yield [order[(first + j) % self.size] for j in range(batches[me])]


def _batch_from_job(global_batch, workers):
    """batch_size when the script gives none: the job's global batch shared equally."""
    if global_batch is None:
        raise ConfigError("batch_size: not given, and the job sets no global batch (STAR_GLOBAL_BATCH)")
    if global_batch % workers:
        raise ConfigError(f"spec.training.globalBatchSize {global_batch} (STAR_GLOBAL_BATCH) does not divide "
                          f"equally among {workers} workers; give batch_size, or a multiple of {workers}")
    return global_batch // workers


def check_global_batch(global_batch, batch_size, workers):
    """ConfigError when the script's global batch (batch_size x workers) is not the job's
    (STAR_GLOBAL_BATCH; None: the job sets none, nothing to check)."""
    if global_batch is not None and batch_size * workers != global_batch:
        raise ConfigError(f"the script's global batch {batch_size * workers} (batch_size {batch_size} x "
                          f"{workers} workers) disagrees with spec.training.globalBatchSize {global_batch} "
                          "(STAR_GLOBAL_BATCH)")
