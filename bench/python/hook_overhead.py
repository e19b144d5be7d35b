#!/usr/bin/python3
"""The star.torch communication hook's per-iteration overhead against PyTorch's own
DistributedDataParallel on the same backend (Gloo): the same model, the same batches, the
same number of worker processes on loopback, one thread each. Every cell (model x
workers) runs plain DDP and star.torch (SSGD) back to back, --repeats times, alternating
which goes first, so each repeat is a pair measured under the same load.

    /usr/bin/python3 bench/python/hook_overhead.py [--build build] [--models mlp,cnn]
        [--workers 2,4] [--iterations 40] [--warmup 5] [--repeats 5]
        [--device cpu|cuda] [--backend gloo|nccl]

Models: cnn is examples/pytorch's Fashion-MNIST CNN (0.42 M parameters), mlp a
784-512-512-10 perceptron (0.67 M), batch 64. With --device cuda the model and batches
live on the GPU (every worker on device rank % count): PyTorch's DDP all-reduces them over
Gloo, star.torch stages them through host memory to its engine, whose all-reduces run over
--backend (nccl: on the device; NCCL takes one worker per GPU).

Prints each run's mean iteration time (forward, backward with the exchange, optimizer
step; the slowest worker's) and its CPU time per iteration (the process's, all threads;
the mean over workers), and per cell the paired overheads: median over the repeats, with
min-max.
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


def make_model(name):
    import torch
    if name == "mlp":
        return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 512), torch.nn.ReLU(),
                                   torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
    from train_fmnist import Net
    return Net()


def worker(kind, model_name, iterations, warmup, device):
    """One worker process: trains and prints its mean iteration time (seconds) as JSON."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    torch.set_num_threads(1)
    torch.manual_seed(0)
    rank, n = int(os.environ["STAR_RANK"]), int(os.environ["STAR_WORLD_SIZE"])
    if device == "cuda":
        torch.cuda.set_device(rank % torch.cuda.device_count())
    if kind == "star":
        import star.torch as st
        st.init()
        model = st.DistributedDataParallel(make_model(model_name).to(device))
        step = st.step
    else:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['DDP_PORT']}",
                                rank=rank, world_size=n)
        model = torch.nn.parallel.DistributedDataParallel(make_model(model_name).to(device))

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


def run(kind, model, workers, args):
    """One run of `kind` (ddp, star): (the slowest worker's mean wall time, the mean CPU
    time) per iteration, in seconds."""
    port, ddp_port = free_port(), free_port()
    procs = []
    for rank in range(workers):
        env = dict(os.environ, STAR_RANK=str(rank), STAR_WORLD_SIZE=str(workers),
                   STAR_STORE_URL=f"http://127.0.0.1:{port}", STAR_HOST_STORE="1" if rank == 0 else "0",
                   DDP_PORT=str(ddp_port), OMP_NUM_THREADS="1", STAR_BACKEND=args.backend,
                   PYTHONPATH=os.path.join(os.path.abspath(args.build), "python"))
        procs.append(subprocess.Popen([sys.executable, __file__, "--worker", kind, "--models", model,
                                       "--device", args.device, "--iterations", str(args.iterations),
                                       "--warmup", str(args.warmup)],
                                      env=env, stdout=subprocess.PIPE, text=True))
    means, cpus = [], []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=600)
            if p.returncode != 0:
                sys.exit(f"hook_overhead: a {kind} worker failed ({p.returncode})")
            result = json.loads(out.strip().splitlines()[-1])
            means.append(result["mean"])
            cpus.append(result["cpu"])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return max(means), statistics.fmean(cpus)


def summary(label, values):
    v = [1e3 * x for x in values]
    return f"{label} {statistics.median(v):.2f} ms ({min(v):.2f}-{max(v):.2f})"


def overheads(ddp, ours):
    o = [100 * (b / a - 1) for a, b in zip(ddp, ours)]
    return f"{statistics.median(o):+.1f}% ({min(o):+.1f}% to {max(o):+.1f}%)"


def main():
    p = argparse.ArgumentParser(description="star.torch hook overhead against plain DDP")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--models", default="mlp,cnn", help="comma-separated: mlp, cnn")
    p.add_argument("--workers", default="2,4", help="comma-separated worker counts")
    p.add_argument("--iterations", type=int, default=40)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo",
                   help="star.torch's backend (nccl needs --device cuda)")
    p.add_argument("--worker", choices=["ddp", "star"], help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.backend == "nccl" and args.device != "cuda":
        p.error("--backend nccl: needs --device cuda")
    if args.worker:
        return worker(args.worker, args.models, args.iterations, args.warmup, args.device)
    models = args.models.split(",")
    if any(m not in ("mlp", "cnn") for m in models):
        p.error(f"--models: mlp or cnn, got {args.models}")
    counts = [int(w) for w in args.workers.split(",")]
    if any(w < 1 for w in counts) or args.repeats < 1:
        p.error("--workers and --repeats: must be >= 1")
    print(f"{args.device}, star.torch SSGD over {args.backend} against DDP over Gloo, batch 64, "
          f"1 thread per worker, {args.iterations} iterations after {args.warmup} warm-up, "
          f"{args.repeats} paired repeats", flush=True)
    table = []
    for model in models:
        for workers in counts:
            runs = {"ddp": [], "star": []}
            for r in range(args.repeats):
                order = ("ddp", "star") if r % 2 == 0 else ("star", "ddp")
                for kind in order:
                    runs[kind].append(run(kind, model, workers, args))
                print(f"{model} x{workers} repeat {r + 1}/{args.repeats}: " + ", ".join(
                    f"{name} {1e3 * runs[k][-1][0]:.2f} ms ({1e3 * runs[k][-1][1]:.2f} ms CPU)"
                    for k, name in (("ddp", "plain DDP"), ("star", "star.torch"))), flush=True)
            table.append((model, workers, runs))
    print("\n| model | workers | plain DDP wall | star.torch wall | wall overhead | CPU overhead |")
    print("|---|---|---|---|---|---|")
    for model, workers, runs in table:
        ddp, ours = runs["ddp"], runs["star"]
        print(f"| {model} | {workers} | {summary('', [x[0] for x in ddp])} | "
              f"{summary('', [x[0] for x in ours])} | "
              f"{overheads([x[0] for x in ddp], [x[0] for x in ours])} | "
              f"{overheads([x[1] for x in ddp], [x[1] for x in ours])} |")


if __name__ == "__main__":
    main()
