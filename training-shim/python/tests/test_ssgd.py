"""One SSGD step is plain DDP's all-reduce; per-worker batches weight the average."""

import torch

from harness import FakeController, expect_all_ok, run_beside_ddp, run_workers
import scenarios


def test_ssgd_matches_pytorch_ddp(tmp_path):
    ours, reference = run_beside_ddp(3, "ssgd", "plain_ddp", tmp_path)
    for rank, (_, _, result) in enumerate(ours):
        assert result["iteration"] == scenarios.SAMPLES // (8 * 3)
        assert torch.allclose(torch.tensor(result["params"]), reference, atol=1e-5), f"rank {rank}"


def test_unequal_batches_give_the_global_batch_gradient(tmp_path):
    sizes = {0: 2, 1: 3, 2: 5}
    decision = {"epoch": 1, "apply_at_iteration": 4, "mode": "ssgd", "k": 3, "groups": [],
                "workers": [{"worker": w, "amp": False, "batch": b} for w, b in sizes.items()]}
    controller = FakeController(lambda report: decision)
    try:
        results = run_workers(3, "batches", tmp_path, controller=controller)
    finally:
        controller.close()
    expect_all_ok(results)
    drawn = [r[2]["drawn"] for r in results]
    assert len({len(d) for d in drawn}) == 1, "every worker runs the same number of steps"
    for w, size in sizes.items():
        assert all(len(idx) == (size if it >= 4 else 4) for it, idx in drawn[w]), f"worker {w}"
    epoch = [i for w in range(3) for _, idx in drawn[w] for i in idx]
    assert len(set(epoch)) == len(epoch), "no sample is drawn twice in the epoch, before or after the change"
    # One process training on the union of every step's samples, mean loss over them.
    ds = scenarios.data()
    model = scenarios.make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    x_all, y_all = ds.tensors
    for step in range(len(drawn[0])):
        idx = [i for w in range(3) for i in drawn[w][step][1]]
        assert len(set(idx)) == len(idx), "workers' shares of a step are disjoint"
        torch.nn.functional.cross_entropy(model(x_all[idx]), y_all[idx]).backward()
        opt.step()
        opt.zero_grad()
    reference = torch.tensor(scenarios.flat(model))
    for w in range(3):
        assert torch.allclose(torch.tensor(results[w][2]["params"]), reference, atol=1e-5), f"worker {w}"
