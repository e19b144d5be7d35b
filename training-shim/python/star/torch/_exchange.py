"""The DDP communication hook of star.torch.DistributedDataParallel: hands the gradient
buckets of a backward pass to STAR's engine and resolves DDP's futures with the averaged
gradients."""

import torch

from star.errors import StateError


def hook(rt, bucket):
    """DDP communication hook: collects the buckets of one backward pass; the last one
    exchanges them all at once through the engine (without the GIL) and resolves every
    bucket's future with the averaged gradient."""
    model = rt.model
    future = torch.futures.Future()
    model._star_buckets.append((bucket, future))
    if not bucket.is_last():
        return future
    buckets, model._star_buckets = model._star_buckets, []
    step = rt.step
    if step is None:
        for _, f in buckets:
            f.set_exception(StateError("star.torch: backward() ran outside `with star.torch.step():`; "
                                       "STAR exchanges gradients only inside a step"))
        return future
    state = model._star_state
    grad = torch.from_numpy(model._star_grad)
    with torch.no_grad():
        for b, _ in buckets:
            for p, g in zip(b.parameters(), b.gradients()):
                grad[state.grad_slice(p)].copy_(g.reshape(-1))
    try:
        step.exchange(model._star_grad)
    except Exception as e:  # noqa: BLE001 - handed to every waiting future
        for _, f in buckets:
            f.set_exception(e)
        return future
    with torch.no_grad():
        for b, f in buckets:
            for p, g in zip(b.parameters(), b.gradients()):
                g.copy_(grad[state.grad_slice(p)].view_as(g))
            f.set_result(b.buffer())
    return future
