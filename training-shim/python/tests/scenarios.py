"""Worker programs for the tests: `scenarios.py NAME OUT_DIR` runs one as this process's
rank (STAR_* environment) and writes its result to OUT_DIR/<rank>.json."""

import json
import os
import sys
import time

import torch
import torch.distributed as dist

import star.torch as st
from star.torch import _testing

SAMPLES, FEATURES = 480, 8
# Where the model and data live: "cpu", or "cuda" for the GPU tests (test_cuda.py).
DEVICE = os.environ.get("SCENARIO_DEVICE", "cpu")


def data():
    g = torch.Generator()
    g.manual_seed(0)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    y = ((x[:, 0] + 0.5 * x[:, 1]) > 0).long()
    return torch.utils.data.TensorDataset(x.to(DEVICE), y.to(DEVICE))


def make_model(seed=1):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    return model.to(DEVICE)


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu().tolist()


def full_loss(model, ds):
    with torch.no_grad():
        x, y = ds.tensors
        return float(torch.nn.functional.cross_entropy(model(x), y))


def train(model, ds, opt, sampler, epochs=1, on_step=None):
    """The loop a user writes; returns the indices drawn per step."""
    drawn = []
    for _ in range(epochs):
        for x, y in torch.utils.data.DataLoader(ds, batch_sampler=RecordingSampler(sampler, drawn)):
            with st.step() as s:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                loss.backward()
                s.loss = loss.item()
                if on_step:
                    on_step(len(drawn), s)
            opt.step()
            opt.zero_grad()
    return drawn


class RecordingSampler:
    def __init__(self, sampler, drawn):
        self.sampler, self.drawn = sampler, drawn

    def __iter__(self):
        for batch in self.sampler:
            self.drawn.append((st.iteration(), batch))
            yield batch

    def __len__(self):
        return len(self.sampler)


def ssgd():
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8, shuffle=False))
    return {"params": flat(model.module), "iteration": st.iteration()}


def plain_ddp():
    """PyTorch's own DDP over Gloo with the same data split, for comparison."""
    rank, n = int(os.environ["STAR_RANK"]), int(os.environ["STAR_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
                            rank=rank, world_size=n)
    ds = data()
    model = torch.nn.parallel.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x_all, y_all = ds.tensors
    b = 8
    for r in range(SAMPLES // (b * n)):
        lo = r * b * n + rank * b
        loss = torch.nn.functional.cross_entropy(model(x_all[lo:lo + b]), y_all[lo:lo + b])
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    return {"params": flat(model.module)}


def batches():
    """A decision gives workers 2, 3 and 5 samples from iteration 4 on (plain SGD)."""
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    drawn = train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=4, shuffle=True, seed=3))
    return {"params": flat(model.module), "drawn": drawn}


def switch():
    """ssgd -> fixed_k (k=2) -> groups -> ssgd, decided up front, with momentum."""
    ds = data()
    model = st.DistributedDataParallel(make_model())
    n = st.world_size()
    before = full_loss(model.module, ds)
    _testing.schedule(json.dumps({"epoch": 1, "apply_at_iteration": 4, "mode": "fixed_k", "k": 2,
                                  "groups": [list(range(n))]}))
    _testing.schedule(json.dumps({"epoch": 2, "apply_at_iteration": 14, "mode": "groups", "k": 1,
                                  "groups": [[0, 1], list(range(2, n))]}))
    _testing.schedule(json.dumps({"epoch": 3, "apply_at_iteration": 24, "mode": "ssgd", "k": n}))
    modes = set()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8), epochs=2,
          on_step=lambda i, s: modes.add(st.mode()))
    return {"params": flat(model.module), "iteration": st.iteration(), "mode": st.mode(),
            "modes": sorted(modes), "loss_before": before, "loss_after": full_loss(model.module, ds)}


def autocast_enabled():
    if DEVICE == "cuda":
        return torch.is_autocast_enabled()
    return torch.is_autocast_cpu_enabled()


def amp():
    """A decision turns AMP on for worker 1 from iteration 4; records, per step, whether
    autocast is on and the dtype the model's output has."""
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    autocast, dtypes = [], set()
    x = ds.tensors[0][:2]

    def record(i, s):
        autocast.append((s.iteration, autocast_enabled()))
        with torch.no_grad():
            dtypes.add((s.iteration >= 4, str(model.module(x).dtype)))

    train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8), on_step=record)
    return {"autocast": autocast, "dtypes": sorted(dtypes)}


def accuracy():
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def report(step, s):
        if st.rank() == 0 and step in (3, 7):
            st.report_accuracy(0.5 if step == 3 else 0.9)

    train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8), on_step=report)
    return {}


def kill():
    """Worker 2 dies at its 5th step; the others must raise PeerError, not hang."""
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def die(step, s):
        if st.rank() == 2 and step == 5:
            os._exit(3)

    t0 = time.monotonic()
    try:
        train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8), epochs=3, on_step=die)
    except st.StarError as e:
        return {"error": type(e).__name__, "message": str(e), "seconds": time.monotonic() - t0}
    return {"error": None}


def torchrun():
    """SSGD launched by torchrun (no STAR_* variables), and the default group the script
    may use beside STAR: an all-reduce of the ranks over it."""
    ds = data()
    model = st.DistributedDataParallel(make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    before = full_loss(model.module, ds)
    train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8, shuffle=False))
    ranks = torch.tensor([float(st.rank())])
    dist.all_reduce(ranks)
    return {"params": flat(model.module), "iteration": st.iteration(), "rank": st.rank(),
            "world_size": st.world_size(), "local_rank": st.local_rank(), "rank_sum": ranks.item(),
            "loss_before": before, "loss_after": full_loss(model.module, ds)}


def make_deep_model():
    """Several DDP buckets (over 1 MB, the first bucket's cap) at bucket_cap_mb=0.01 (STAR exchanges each)."""
    torch.manual_seed(2)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 2)).to(DEVICE)


def ssgd_buckets():
    ds = data()
    model = st.DistributedDataParallel(make_deep_model(), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=8, shuffle=False))
    exchanger = getattr(model, "_star_exchanger", None)
    return {"params": flat(model.module), "iteration": st.iteration(),
            "parts": exchanger.parts if exchanger else 0}


def plain_ddp_buckets():
    """plain_ddp's training with ssgd_buckets's model."""
    rank, n = int(os.environ["STAR_RANK"]), int(os.environ["STAR_WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
                            rank=rank, world_size=n)
    ds = data()
    model = torch.nn.parallel.DistributedDataParallel(make_deep_model(), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x_all, y_all = ds.tensors
    b = 8
    for r in range(SAMPLES // (b * n)):
        lo = r * b * n + rank * b
        torch.nn.functional.cross_entropy(model(x_all[lo:lo + b]), y_all[lo:lo + b]).backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    return {"params": flat(model.module)}


PIPE_MICRO, PIPE_STEPS = 6, 4  # rows per micro-batch; SGD steps


def make_pipeline_model(seed=3):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 16), torch.nn.ReLU(), torch.nn.Linear(16, 12),
                               torch.nn.Tanh(), torch.nn.Linear(12, 2)).to(DEVICE)


def pipeline():
    """PIPE_STEPS SGD steps of this process's stage (STAR_PIPELINE_STAGES,
    STAR_MICRO_BATCHES), each replica on its own rows; its parameters and losses."""
    x_all, y_all = data().tensors
    pipe = st.Pipeline(make_pipeline_model(), example_input=x_all[:PIPE_MICRO],
                       loss_fn=torch.nn.functional.cross_entropy)
    replicas, replica = st.world_size() // pipe.stages, st.rank() // pipe.stages
    opt = torch.optim.SGD(pipe.parameters(), lr=0.1)
    batch = PIPE_MICRO * pipe.micro_batches
    losses, warmups = [], []
    for step in range(PIPE_STEPS):
        lo = (step * replicas + replica) * batch
        losses.append(pipe.step(x_all[lo:lo + batch], y_all[lo:lo + batch]))
        warmups.append(pipe.warmup)
        opt.step()
        opt.zero_grad()
    return {"stage": pipe.stage, "params": flat(pipe.module), "losses": losses, "warmups": warmups,
            "iteration": st.iteration()}


def main(functions=None, own_group=()):
    """Runs the worker program argv[1] (a function of `functions`: this module's by
    default) and writes its result to argv[2]/<rank>.json. STAR is initialised first,
    except for the plain_* programs (PyTorch's DDP alone) and those in `own_group` (they
    make torch.distributed's group before star.torch.init())."""
    name, out_dir = sys.argv[1], sys.argv[2]
    rank = os.environ.get("STAR_RANK", os.environ.get("RANK", "0"))
    if DEVICE == "cuda":  # one device per worker where there are several
        torch.cuda.set_device(int(rank) % torch.cuda.device_count())
    if not name.startswith("plain_") and name not in own_group:
        st.init()
    result = (functions or globals())[name]()
    try:
        st.shutdown()
    except st.StarError as e:
        result["shutdown_error"] = f"{type(e).__name__}: {e}"
    with open(os.path.join(out_dir, f"{rank}.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
