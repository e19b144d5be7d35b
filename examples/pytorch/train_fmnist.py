#!/usr/bin/python3
"""Fashion-MNIST with PyTorch DistributedDataParallel, adopted by STAR in a few lines.

Run by `star local examples/pytorch/fmnist-job.yaml` on this machine, or as the
container command of the TrainingJob in fmnist-job.yaml on a cluster: either sets the
STAR_* environment that star.torch.init() reads. Launched by torchrun (one process per
GPU, examples/gpu/fmnist-gpu-job.yaml) it reads torchrun's; with neither it trains alone.
The job's global batch and iteration limit (spec.training) come from the environment
unless --batch-size / --max-iterations give them (a disagreeing batch is refused). Every
line marked `# STAR` is what adopting STAR takes; the rest is an ordinary DDP script.
"""

import argparse
import gzip
import os
import struct
import time

import torch
import torch.nn.functional as F

import star.torch as st  # STAR

DATA_DIR = "/usr/share/datasets/fashion-mnist"  # Debian's dataset-fashion-mnist


def load_idx(path):
    """An IDX file (images or labels) as a tensor."""
    with gzip.open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        dims = [struct.unpack(">I", f.read(4))[0] for _ in range(magic & 0xFF)]
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
    return data.reshape(dims)


def fashion_mnist(split, data_dir):
    prefix = "train" if split == "train" else "t10k"
    images = load_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte.gz"))
    labels = load_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte.gz"))
    x = (images.float() / 255.0 - 0.2860) / 0.3530  # the training set's mean and std
    return torch.utils.data.TensorDataset(x.unsqueeze(1), labels.long())


class Net(torch.nn.Module):
    """A small CNN: two 3x3 convolutions with pooling, then two dense layers."""

    def __init__(self):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = torch.nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = torch.nn.Linear(64 * 7 * 7, 128)
        self.fc2 = torch.nn.Linear(128, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@torch.no_grad()
def evaluate(model, test, samples):
    model.eval()
    x, y = test.tensors
    x, y = x[:samples], y[:samples]
    correct = sum(int((model(x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
                  for i in range(0, len(y), 1000))
    model.train()
    return correct / len(y)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch-size", type=int, default=None,
                   help="per-worker batch (default: the job's global batch / workers, else 64)")
    p.add_argument("--lr", type=float, default=0.02, help="SGD learning rate (default 0.02)")
    p.add_argument("--epochs", type=int, default=20, help="passes over the data (default 20)")
    p.add_argument("--max-iterations", type=int, default=None,
                   help="stop after this many (default: the job's maxIterations; 0: no limit)")
    p.add_argument("--eval-every", type=int, default=50, help="iterations between evaluations (rank 0)")
    p.add_argument("--eval-samples", type=int, default=2000, help="test images per evaluation")
    p.add_argument("--threads", type=int, default=1, help="PyTorch threads (default 1)")
    p.add_argument("--data-dir", default=os.environ.get("FASHION_MNIST_DIR", DATA_DIR))
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    st.init()  # STAR: the job's rank, peers and controller (STAR_* or torchrun's environment)
    # One GPU per process where there are GPUs (init() made LOCAL_RANK's the current one).
    device = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cpu")
    if args.batch_size is None and st.global_batch() is None:
        args.batch_size = 64
    if args.max_iterations is None:
        args.max_iterations = st.max_iterations() or 0  # STAR: the job's iteration limit
    train, test = fashion_mnist("train", args.data_dir), fashion_mnist("test", args.data_dir)
    model = st.DistributedDataParallel(Net().to(device))  # STAR: gradients go through STAR's engine
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    # STAR: per-worker batches; batch_size None = the job's global batch / workers
    sampler = st.AdaptiveBatchSampler(train, batch_size=args.batch_size)
    loader = torch.utils.data.DataLoader(train, batch_sampler=sampler)
    test = torch.utils.data.TensorDataset(*(t.to(device) for t in test.tensors))

    start, step = time.monotonic(), 0
    for epoch in range(args.epochs):
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            with st.step() as s:  # STAR: timed; autocast when STAR turns AMP on here
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                s.loss = loss.item()
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step % args.eval_every == 0 and st.rank() == 0:
                accuracy = evaluate(model.module, test, args.eval_samples)
                st.report_accuracy(accuracy)  # STAR: the job's accuracy curve and TTA
                print(f"step {step} iteration {st.iteration()} epoch {epoch} loss {loss.item():.4f} "
                      f"accuracy {accuracy:.3f} mode {st.mode()} {time.monotonic() - start:.1f}s", flush=True)
            if args.max_iterations and st.iteration() >= args.max_iterations:
                break
        if args.max_iterations and st.iteration() >= args.max_iterations:
            break
    st.shutdown()  # STAR


if __name__ == "__main__":
    main()
