"""Worker programs written the way users write theirs, for the tests: DataLoader worker
processes, gradient accumulation with no_sync(), the script's own torch.distributed
calls, Adam across mode switches. `user_scripts.py NAME OUT_DIR` runs one as this
process's rank and writes its result to OUT_DIR/<rank>.json (as scenarios.py)."""

import json
import os
import warnings

import torch
import torch.distributed as dist

import star.torch as st
from star.torch import _testing
import scenarios
from scenarios import FEATURES, flat, full_loss, make_model

LOADER_SAMPLES = 640  # 40 rounds of 16


def loader_data():
    """(features, label, sample index): the index says which samples a batch holds."""
    g = torch.Generator()
    g.manual_seed(0)
    x = torch.randn(LOADER_SAMPLES, FEATURES, generator=g)
    y = ((x[:, 0] + 0.5 * x[:, 1]) > 0).long()
    return torch.utils.data.TensorDataset(x, y, torch.arange(LOADER_SAMPLES))


def loader_decisions(prefetched):
    """Two batch changes for 2 workers, each scheduled mid-epoch (at iteration `at`) to
    apply past what the data loader has drawn: {iteration scheduled: decision}."""
    def decision(epoch, at, b0):
        return {"epoch": epoch, "apply_at_iteration": at + prefetched + 3, "mode": "ssgd", "k": 2,
                "workers": [{"worker": 0, "batch": b0}, {"worker": 1, "batch": 16 - b0}]}
    return {3: decision(1, 3, 5), 30: decision(2, 30, 12), 52: decision(3, 52, 8)}


def loader():
    """Two epochs through a DataLoader with LOADER_WORKERS worker processes (prefetch 3 each,
    LOADER_PERSISTENT workers kept), with batch changes mid-epoch; records every step's
    sample indices and any warning."""
    workers = int(os.environ["LOADER_WORKERS"])
    persistent = os.environ.get("LOADER_PERSISTENT") == "1"
    ds = loader_data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sampler = st.AdaptiveBatchSampler(ds, batch_size=8, seed=5)
    extra = {"prefetch_factor": 3, "persistent_workers": persistent} if workers else {}
    data = torch.utils.data.DataLoader(ds, batch_sampler=sampler, num_workers=workers, **extra)
    schedule = loader_decisions(workers * 3)
    steps = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            for x, y, idx in data:
                with st.step() as s:
                    if s.iteration in schedule:
                        _testing.schedule(json.dumps(schedule[s.iteration]))
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                steps.append([s.iteration, s.batch, idx.tolist()])
                opt.step()
                opt.zero_grad()
    return {"steps": steps, "warnings": [str(w.message) for w in caught if "star.torch" in str(w.message)],
            "schedule": {str(k): v for k, v in schedule.items()}}


ACCUMULATE, MICRO = 4, 2  # micro-batches per iteration, samples per micro-batch


def accumulate():
    """Gradient accumulation: ACCUMULATE micro-batches per iteration, the first ones under
    no_sync(), the loss scaled by 1/ACCUMULATE, as DDP users write it."""
    from scenarios import data
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sampler = st.AdaptiveBatchSampler(ds, batch_size=ACCUMULATE * MICRO, shuffle=False,
                                      accumulation_steps=ACCUMULATE)
    sizes = []
    for i, (x, y) in enumerate(torch.utils.data.DataLoader(ds, batch_sampler=sampler)):
        last = (i + 1) % ACCUMULATE == 0
        with st.step() as s:
            if last:
                loss = torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATE
                loss.backward()
            else:
                with model.no_sync():
                    (torch.nn.functional.cross_entropy(model(x), y) / ACCUMULATE).backward()
        if last:
            sizes.append(s.batch)
            opt.step()
            opt.zero_grad()
    return {"params": flat(model.module), "iteration": st.iteration(), "batches": sizes}


def plain_ddp_accumulate():
    """accumulate()'s training with PyTorch's own DDP over Gloo."""
    from scenarios import SAMPLES, data
    rank, n = int(os.environ["STAR_RANK"]), int(os.environ["STAR_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
                            rank=rank, world_size=n)
    x_all, y_all = data().tensors
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    b = ACCUMULATE * MICRO
    for r in range(SAMPLES // (b * n)):
        for m in range(ACCUMULATE):
            lo = r * b * n + rank * b + m * MICRO
            loss = torch.nn.functional.cross_entropy(model(x_all[lo:lo + MICRO]), y_all[lo:lo + MICRO])
            if m < ACCUMULATE - 1:
                with model.no_sync():
                    (loss / ACCUMULATE).backward()
            else:
                (loss / ACCUMULATE).backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    return {"params": flat(model.module)}


def distributed():
    """The script's own torch.distributed beside STAR: rank, barrier, all_reduce,
    broadcast, and a DistributedSampler for its evaluation data."""
    from scenarios import data
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in torch.utils.data.DataLoader(ds, batch_sampler=st.AdaptiveBatchSampler(ds, batch_size=8)):
        with st.step():
            torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        if st.iteration() % 5 == 0:
            dist.barrier()
    seen = torch.zeros(len(ds))
    for idx in torch.utils.data.DistributedSampler(range(len(ds)), shuffle=False):
        seen[idx] += 1
    dist.all_reduce(seen)
    token = torch.tensor([float(dist.get_rank() * 10 + 7)])
    dist.broadcast(token, src=1)
    return {"rank": dist.get_rank(), "size": dist.get_world_size(), "seen_min": seen.min().item(),
            "seen_max": seen.max().item(), "broadcast": token.item(), "iteration": st.iteration()}


def own_group():
    """A script that makes the default group itself before star.torch.init(), as under
    torchrun."""
    dist.init_process_group("gloo", init_method="env://", rank=int(os.environ["STAR_RANK"]),
                            world_size=int(os.environ["STAR_WORLD_SIZE"]))
    st.init()
    return distributed()


def optimizer_state(opt):
    """Every state tensor of `opt`, flattened in parameter order."""
    parts = [v.detach().reshape(-1).double() for g in opt.param_groups for p in g["params"]
             for _, v in sorted(opt.state.get(p, {}).items()) if isinstance(v, torch.Tensor)]
    return torch.cat(parts).tolist() if parts else []


def adam_switch():
    """Adam and SGD with momentum over two halves of one model across ssgd -> groups ->
    ssgd: records each optimizer's state just before and just after the first switch,
    and at the end."""
    from scenarios import data
    ds = data()
    model = st.DistributedDataParallel(make_model())
    n = st.world_size()
    _testing.schedule(json.dumps({"epoch": 1, "apply_at_iteration": 6, "mode": "groups", "k": 1,
                                  "groups": [[0], list(range(1, n))]}))
    _testing.schedule(json.dumps({"epoch": 2, "apply_at_iteration": 16, "mode": "ssgd", "k": n}))
    layers = list(model.module)
    adam = torch.optim.Adam(layers[0].parameters(), lr=0.01)
    sgd = torch.optim.SGD(layers[2].parameters(), lr=0.1, momentum=0.9)
    before = full_loss(model.module, ds)
    seen = {}
    for _ in range(2):
        sampler = st.AdaptiveBatchSampler(ds, batch_size=8, seed=1)
        for x, y in torch.utils.data.DataLoader(ds, batch_sampler=sampler):
            with st.step() as s:
                if s.iteration == 6:  # the switch was applied as step 6 began
                    seen["after"] = [optimizer_state(adam), optimizer_state(sgd)]
                torch.nn.functional.cross_entropy(model(x), y).backward()
            adam.step()
            sgd.step()
            adam.zero_grad()
            sgd.zero_grad()
            if s.iteration == 5:  # the last update before the switch
                seen["before"] = [optimizer_state(adam), optimizer_state(sgd)]
    return {"before_switch": seen["before"], "after_switch": seen["after"], "end": [optimizer_state(adam), optimizer_state(sgd)],
            "params": flat(model.module), "mode": st.mode(), "loss_before": before,
            "loss_after": full_loss(model.module, ds)}


if __name__ == "__main__":
    scenarios.main(globals(), own_group=("own_group",))
