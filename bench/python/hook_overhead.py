#!/usr/bin/python3
"""The star.torch communication hook's per-iteration overhead against PyTorch's own
DistributedDataParallel over Gloo: the same model (examples/pytorch's Fashion-MNIST CNN),
the same batches, the same number of worker processes on loopback, one thread each.

    /usr/bin/python3 bench/python/hook_overhead.py [--build build] [--workers 2]
        [--iterations 150] [--repeats 3] [--device cpu|cuda] [--backend gloo|nccl]

With --device cuda the model and batches live on the GPU (every worker on device
rank % count): PyTorch's DDP all-reduces them over Gloo, star.torch stages them through
host memory to its engine, whose all-reduces run over --backend (nccl: on the device;
NCCL takes one worker per GPU).

Prints each run's mean iteration time (forward, backward with the exchange, optimizer
step; the slowest worker's) and its CPU time per iteration (the process's, all threads;
the mean over workers; robust to other load on the machine), and the overheads: median
of the repeats, with min-max. Runs alternate between the two so drift hits both alike.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def worker(kind, iterations, warmup, device):
    """One worker process: trains and prints its mean iteration time (seconds) as JSON."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
    from train_fmnist import Net
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rank, n = int(os.environ["STAR_RANK"]), int(os.environ["STAR_WORLD_SIZE"])
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    if kind == "star":
        import star.torch as st
        st.init()
        model = st.DistributedDataParallel(Net().to(device))
        step = st.step
    else:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
                                rank=rank, world_size=n)
        model = torch.nn.parallel.DistributedDataParallel(Net().to(device))

        class NoStep:
            def __enter__(self):
                return self

            def __exit__(self, *a):
                return False
        step = NoStep
    opt = torch.optim.SGD(model.parameters(), lr=0.02, momentum=0.9)
    g = torch.Generator()
    g.manual_seed(rank)
    x = torch.randn(64, 1, 28, 28, generator=g).to(device)
    y = torch.randint(0, 10, (64,), generator=g).to(device)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    times = []
    for i in range(warmup + iterations):
        if i == warmup:
            cpu0 = time.process_time()
        t0 = time.perf_counter()
        with step():
            F.cross_entropy(model(x), y).backward()
        opt.step()
        opt.zero_grad()
        sync()
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    cpu = (time.process_time() - cpu0) / iterations
    if kind == "star":
        st.shutdown()
    else:
        dist.destroy_process_group()
    print(json.dumps({"mean": statistics.fmean(times), "cpu": cpu}))


def run(kind, args):
    port, ddp_port = free_port(), free_port()
    procs = []
    for rank in range(args.workers):
        env = dict(os.environ, STAR_RANK=str(rank), STAR_WORLD_SIZE=str(args.workers),
                   STAR_STORE_URL=f"http://127.0.0.1:{port}", STAR_HOST_STORE="1" if rank == 0 else "0",
                   DDP_PORT=str(ddp_port), OMP_NUM_THREADS="1", STAR_BACKEND=args.backend,
                   PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", kind, "--device", args.device,
                                       "--iterations", str(args.iterations)],
                                      env=env, stdout=subprocess.PIPE, text=True))
    means, cpus = [], []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        if p.returncode != 0:
            sys.exit(f"hook_overhead: a {kind} worker failed ({p.returncode})")
        result = json.loads(out.strip().splitlines()[-1])
        means.append(result["mean"])
        cpus.append(result["cpu"])
    return max(means), statistics.fmean(cpus)


def main():
    p = argparse.ArgumentParser(description="star.torch hook overhead against plain DDP")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                   help="star.torch's backend (nccl needs --device cuda)")
    p.add_argument("--worker", choices=["ddp", "star"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.backend == "nccl" and args.device != "cuda":
        p.error("--backend nccl: needs --device cuda")
    if args.worker:
        return worker(args.worker, args.iterations, args.warmup, args.device)
    runs = {"ddp": [], "star": []}
    for r in range(args.repeats):
        for kind in ("ddp", "star"):
            runs[kind].append(run(kind, args))
        print(f"repeat {r + 1}/{args.repeats}: " + ", ".join(
            f"{name} {1e3 * runs[k][-1][0]:.2f} ms/iteration ({1e3 * runs[k][-1][1]:.2f} ms CPU)"
            for k, name in (("ddp", "plain DDP"), ("star", "star.torch"))), flush=True)
    print(f"\n{args.workers} workers on {args.device}, star.torch over {args.backend}, "
          f"Fashion-MNIST CNN, batch 64, 1 thread each, "
          f"{args.iterations} iterations after {args.warmup} warm-up, {args.repeats} repeats")

    def line(label, values, unit="ms"):
        v = [1e3 * x for x in values]
        return f"{label}: {statistics.median(v):.2f} {unit} ({min(v):.2f}-{max(v):.2f})"
    for i, what in ((0, "wall time per iteration"), (1, "CPU time per iteration")):
        ddp = [x[i] for x in runs["ddp"]]
        ours = [x[i] for x in runs["star"]]
        overhead = [100 * (o / d - 1) for o, d in zip(ours, ddp)]
        print(what)
        print("  " + line("plain DDP (Gloo all-reduce)", ddp))
        print("  " + line(f"star.torch (engine, SSGD, {args.backend})", ours))
        print(f"  overhead: {statistics.median(overhead):+.1f}% "
              f"({min(overhead):+.1f}% to {max(overhead):+.1f}%)")


if __name__ == "__main__":
    main()
