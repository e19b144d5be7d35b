#!/usr/bin/python3
"""What mixed precision buys one worker: the time of one training iteration (forward,
backward, SGD step) in float32 against autocast, for examples/pytorch's Fashion-MNIST CNN
and a wider multilayer perceptron, at several batch sizes, on the CPU or a CUDA device.

    /usr/bin/python3 bench/python/amp_speed.py [--device cpu|cuda] [--batches 64,256,1024]
        [--iterations 30] [--repeats 5] [--threads 1]

Precisions: fp32; bf16 autocast (CPU and CUDA; what star.torch turns on); fp16 autocast
with PyTorch's GradScaler (CUDA only; what the C++ shim's DynamicLossScaler does).
Prints, per model and batch, each precision's milliseconds per iteration (median of the
repeats, with min-max) and its speed-up over fp32. Precisions alternate within a repeat
so drift hits all alike.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# The CNN is the example script's, which imports star.torch: one on PYTHONPATH or installed,
# else the build's package.
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))
sys.path.append(os.path.join(ROOT, "build", "python"))
from train_fmnist import Net  # noqa: E402


def mlp():
    """784 -> 4096 -> 4096 -> 10: bound by matrix products, where lower precision pays."""
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 4096), torch.nn.ReLU(),
                               torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10))


MODELS = {"cnn": Net, "mlp": mlp}


def precisions(device):
    return ["fp32", "bf16", "fp16"] if device == "cuda" else ["fp32", "bf16"]


def time_iterations(model, opt, x, y, precision, iterations, device):
    """Seconds per iteration over `iterations`, after 3 warm-up ones."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = None
    if precision == "fp16":  # torch.amp.GradScaler since PyTorch 2.3
        scaler = torch.amp.GradScaler("cuda") if hasattr(torch.amp, "GradScaler") else torch.cuda.amp.GradScaler()
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for i in range(3 + iterations):
        if i == 3:
            sync()
            t0 = time.perf_counter()
        with torch.autocast(device_type=device, dtype=dtype or torch.bfloat16, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)
    sync()
    return (time.perf_counter() - t0) / iterations


def measure(name, batch, args):
    torch.manual_seed(0)
    model = MODELS[name]().to(args.device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 1, 28, 28, device=args.device)
    y = torch.randint(0, 10, (batch,), device=args.device)
    runs = {p: [] for p in precisions(args.device)}
    for _ in range(args.repeats):
        for p in runs:
            runs[p].append(time_iterations(model, opt, x, y, p, args.iterations, args.device))
    return runs


def main():
    p = argparse.ArgumentParser(description="float32 against autocast, per training iteration")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--batches", default="64,256,1024")
    p.add_argument("--models", default="cnn,mlp")
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1, help="CPU threads (torch.set_num_threads)")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error("--device cuda: torch sees no CUDA device")
    try:
        batches = [int(b) for b in args.batches.split(",")]
        models = args.models.split(",")
        unknown = [m for m in models if m not in MODELS]
        if unknown or min(batches) < 1:
            raise ValueError(f"unknown model {unknown}" if unknown else "a batch below 1")
    except ValueError as e:
        p.error(f"--batches/--models: {e}")
    torch.set_num_threads(args.threads)
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {args.threads} thread(s)"
    print(f"{where}; torch {torch.__version__}; {args.iterations} iterations x {args.repeats} repeats", flush=True)
    for name in models:
        for batch in batches:
            runs = measure(name, batch, args)
            base = statistics.median(runs["fp32"])
            cells = []
            for prec, times in runs.items():
                ms = [1e3 * t for t in times]
                cells.append(f"{prec} {statistics.median(ms):.3f} ms ({min(ms):.3f}-{max(ms):.3f})"
                             + ("" if prec == "fp32" else f" x{base / statistics.median(times):.2f}"))
            print(f"{name} batch {batch}: " + "; ".join(cells), flush=True)


if __name__ == "__main__":
    main()
