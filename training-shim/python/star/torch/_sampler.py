"""star.torch.AdaptiveBatchSampler: per-worker batches from the job's decisions (BOA).

Every worker walks the same shuffled order of the dataset; each round of the job (one
iteration) takes one global batch from it (the sum of the batches in force that round,
which a decision may change), and worker i takes its share (its batch, after the shares
of workers 0..i-1). No sample is drawn twice in an epoch unless its rounds need more
samples than the dataset has (then the order wraps around). An epoch is
len(dataset) // global batch rounds on every worker.

A DataLoader with worker processes draws batches ahead of training (num_workers x
prefetch_factor of them), so the sampler numbers its draws itself: draw j of an epoch is
round start + j, whatever iteration the engine is at when it is drawn, and its size is
the one in force at that round as far as the decisions received say. How far ahead it
has drawn goes out with the worker's reports (`lookahead`), and the controller schedules
batch decisions at least that far ahead, so a decision is known before the batch of its
iteration is drawn. A fixed-k child, whose engine skips rounds with its parent, skips
them here too (draws never lag the engine) and ends its epoch with the others.

With gradient accumulation (accumulation_steps A > 1), each round's share is drawn as A
micro-batches (sizes as equal as they can be); the iteration's batch is their sum."""

import torch

from star.errors import ConfigError
from star.torch import _runtime


class AdaptiveBatchSampler(torch.utils.data.Sampler):
    """A batch_sampler for DataLoader: `DataLoader(dataset, batch_sampler=sampler)`, with
    any num_workers, prefetch_factor and persistent_workers. batch_size is this worker's
    batch until a decision changes it (the job's global batch is batch_size x
    world_size); left out, it is the job's global batch (STAR_GLOBAL_BATCH) / world_size.
    A batch_size whose global batch is not the job's is refused (ConfigError naming
    both). shuffle with seed (+ the epoch) the same on every worker; set_epoch(e) as with
    DistributedSampler, else each pass over it is the next epoch. accumulation_steps: the
    micro-batches per iteration when the script accumulates gradients (no_sync())."""

    def __init__(self, dataset, batch_size=None, shuffle=True, seed=0, accumulation_steps=1):
        rt = _runtime.require("AdaptiveBatchSampler")
        workers = rt.config.world_size
        self.size = _dataset_size(dataset)
        if batch_size is None:
            batch_size = _batch_from_job(rt.settings.global_batch, workers)
        _check_count("batch_size", batch_size)
        _check_count("accumulation_steps", accumulation_steps)
        if accumulation_steps > batch_size:
            raise ConfigError(f"accumulation_steps: {accumulation_steps} micro-batches cannot split a batch "
                              f"of {batch_size}")
        check_global_batch(rt.settings.global_batch, batch_size, workers)
        self.global_batch = batch_size * workers
        self.steps = self.size // self.global_batch
        if self.steps < 1:
            raise ConfigError(f"batch_size: a global batch of {self.global_batch} ({batch_size} x "
                              f"{workers} workers) is larger than the dataset ({self.size})")
        rt.default_batch = batch_size
        self.accumulation_steps = accumulation_steps
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch):
        self.epoch = epoch

    def __len__(self):
        return self.steps * self.accumulation_steps

    def __iter__(self):
        rt = _runtime.require("AdaptiveBatchSampler")
        order = self._order()
        self.epoch += 1
        me = rt.config.worker
        start = _runtime.iteration()
        taken, counted = 0, 0  # samples the epoch's rounds before `counted` took
        it = start - 1
        for _ in range(self.steps):
            # The next round, or the engine's iteration if it skipped ahead (a fixed-k child).
            it = max(it + 1, _runtime.iteration())
            round_ = it - start
            if round_ >= self.steps:
                return
            while counted < round_:
                taken += sum(rt.batches_at(start + counted))
                counted += 1
            batches = rt.batches_at(it)
            rt.note_drawn(it, batches[me])
            first = taken + sum(batches[:me])
            share = [order[(first + j) % self.size] for j in range(batches[me])]
            yield from _split(share, self.accumulation_steps)

    def _order(self):
        if not self.shuffle:
            return list(range(self.size))
        g = torch.Generator()
        g.manual_seed(self.seed + self.epoch)
        return torch.randperm(self.size, generator=g).tolist()


def _split(share, parts):
    """`share` as `parts` consecutive micro-batches, sizes differing by at most one."""
    base, extra = divmod(len(share), parts)
    at = 0
    for p in range(parts):
        n = base + (1 if p < extra else 0)
        yield share[at:at + n]
        at += n


def _dataset_size(dataset):
    """len(dataset) (or dataset itself, an int). ConfigError for a dataset without one."""
    if isinstance(dataset, int) and not isinstance(dataset, bool):
        return dataset
    if isinstance(dataset, torch.utils.data.IterableDataset) or not hasattr(dataset, "__len__"):
        raise ConfigError(f"dataset: AdaptiveBatchSampler needs a map-style dataset with a length (indexable, "
                          f"len()); {type(dataset).__name__} is iterable: give the DataLoader its own batch_size, "
                          "or wrap the data in a map-style Dataset")
    return len(dataset)


def _check_count(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name}: must be an integer >= 1, got {value!r}")


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
