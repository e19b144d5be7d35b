#!/usr/bin/python3
"""Compute per sample after batch changes, with glibc's heap defaults and with freed
memory kept in the heap (what star::shim::RetainFreedHeap sets in star-fmnist).

    /usr/bin/python3 bench/python/heap_probe.py [--batches 64,73,64,76,90,75,57,82,83,94,111]
        [--iterations 6] [--threads 1]

One process per setting, each training star-fmnist's CNN (the same layers, in PyTorch)
on random data through the batch sizes in turn, the way batch adaptation moves a
worker's batch. The settings are glibc's own environment variables, read at start:
  default   nothing set
  retained  MALLOC_MMAP_THRESHOLD_=32 MiB, MALLOC_TRIM_THRESHOLD_=1 GiB (RetainFreedHeap)
  trim-only MALLOC_TRIM_THRESHOLD_=1 GiB alone, which also pins the mmap threshold at its
            128 KiB start: every activation is mapped and unmapped each iteration
Prints, per batch size and setting, milliseconds per sample of forward, backward and
SGD step: the median of the iterations after the first two at that size, and the first
iteration's. Where page faults are cheap the settings barely differ; where they are slow
(some virtual machines) the default's cost at some sizes is several times the rest.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

SETTINGS = {
    "default": {},
    "retained": {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
    "trim-only": {"MALLOC_TRIM_THRESHOLD_": str(1 << 30)},
}


def measure(batches, iterations, threads):
    """Runs in the child: milliseconds per sample for each iteration at each batch size."""
    import time

    import torch
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    layers = torch.nn.ModuleDict({
        "conv1": torch.nn.Conv2d(1, 32, 3, padding=1),
        "conv2": torch.nn.Conv2d(32, 64, 3, padding=1),
        "fc1": torch.nn.Conv2d(64, 128, 7),
        "fc2": torch.nn.Conv2d(128, 10, 1),
    })

    def forward(x):
        x = F.max_pool2d(F.relu(layers["conv1"](x)), 2)
        x = F.max_pool2d(F.relu(layers["conv2"](x)), 2)
        return layers["fc2"](F.relu(layers["fc1"](x))).flatten(1)

    opt = torch.optim.SGD(layers.parameters(), lr=0.01)
    out = []
    for b in batches:
        per_sample = []
        for _ in range(iterations):
            x = torch.randn(b, 1, 28, 28)
            y = torch.randint(0, 10, (b,))
            start = time.perf_counter()
            opt.zero_grad()
            F.cross_entropy(forward(x), y).backward()
            opt.step()
            per_sample.append((time.perf_counter() - start) / b * 1000)
        out.append(per_sample)
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", default="64,73,64,76,90,75,57,82,83,94,111")
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    try:
        batches = [int(b) for b in a.batches.split(",")]
    except ValueError:
        sys.exit("heap_probe: --batches: must be comma-separated integers, got " + a.batches)
    if any(b < 1 for b in batches) or a.iterations < 3 or a.threads < 1:
        sys.exit("heap_probe: --batches must be >= 1, --iterations >= 3, --threads >= 1")
    if a.child:
        print(json.dumps(measure(batches, a.iterations, a.threads)))
        return
    results = {}
    for name, env in SETTINGS.items():
        print(f"heap_probe: {name} ...", file=sys.stderr, flush=True)
        child = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                "--batches", a.batches, "--iterations", str(a.iterations),
                                "--threads", str(a.threads)],
                               env={**os.environ, **env}, capture_output=True, text=True,
                               check=True, timeout=600)
        results[name] = json.loads(child.stdout)
    print("| batch | " + " | ".join(f"{n} ms/sample (first)" for n in SETTINGS) + " |")
    print("|---" * (len(SETTINGS) + 1) + "|")
    for i, b in enumerate(batches):
        cells = [f"{statistics.median(results[n][i][2:]):.2f} ({results[n][i][0]:.2f})"
                 for n in SETTINGS]
        print(f"| {b} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
