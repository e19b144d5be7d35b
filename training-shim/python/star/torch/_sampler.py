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
    is batch_size x world_size). shuffle with seed (+ the epoch) the same on every worker;
    set_epoch(e) as with DistributedSampler, else each pass over it is the next epoch."""

    def __init__(self, dataset, batch_size, shuffle=True, seed=0):
        rt = _runtime.require("AdaptiveBatchSampler")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"batch_size: must be an integer >= 1, got {batch_size!r}")
        self.size = dataset if isinstance(dataset, int) else len(dataset)
        self.global_batch = batch_size * rt.config.world_size
        self.steps = self.size // self.global_batch
        if self.steps < 1:
            raise ConfigError(f"batch_size: a global batch of {self.global_batch} ({batch_size} x "
                              f"{rt.config.world_size} workers) is larger than the dataset ({self.size})")
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
