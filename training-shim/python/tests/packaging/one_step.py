"""Trains one step with the star package installed in SITE (argv[1]), on this python's
torch, as one process alone; exits non-zero with the reason on any difference."""

import os
import sys

import torch

import star
import star.torch as st


def alone():
    """No job in the environment: init() then runs as one process alone."""
    for name in list(os.environ):
        if name.startswith(("STAR_", "TORCHELASTIC_")) or name in (
                "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            del os.environ[name]


def main(site):
    installed = os.path.realpath(os.path.dirname(star.__file__))
    if not installed.startswith(os.path.realpath(site) + os.sep):
        sys.exit(f"star imported from {installed}, not from the installed {site}")
    module = [f for f in os.listdir(installed) if f.startswith("_star") and f.endswith(".so")]
    if not module:
        sys.exit(f"no compiled star._star in {installed}: {sorted(os.listdir(installed))}")
    torch.manual_seed(0)
    alone()
    st.init()
    model = st.DistributedDataParallel(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = [p.detach().clone() for p in model.parameters()]
    with st.step():
        optimizer.zero_grad()
        loss = model(torch.ones(8, 4)).pow(2).mean()
        loss.backward()
        optimizer.step()
    changed = any(not torch.equal(b, p.detach()) for b, p in zip(before, model.parameters()))
    world, iteration = st.world_size(), st.iteration()
    st.shutdown()
    if not changed:
        sys.exit("the training step left the parameters unchanged")
    if world != 1 or iteration != 1:
        sys.exit(f"world size {world} and iteration {iteration}, expected 1 and 1")
    print(f"one_step: torch {torch.__version__}, star from {installed}: one step trained")


if __name__ == "__main__":
    main(sys.argv[1])
