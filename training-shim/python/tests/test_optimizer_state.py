"""Optimizer state (Adam's moments, SGD's momentum) survives mode switches: kept when the
workers' states agree, re-synchronised (averaged) when workers that trained apart merge."""

import torch

from harness import expect_all_ok, free_port, run_workers


def test_moments_survive_switches_and_resynchronise_on_merge(tmp_path):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    results = run_workers(3, "adam_switch", tmp_path, env=env, script="user_scripts.py")
    expect_all_ok(results)
    end = [[torch.tensor(s) for s in r["end"]] for _, _, r in results]
    for rank, (_, _, r) in enumerate(results):
        for name, before, after in zip(("Adam", "SGD"), r["before_switch"], r["after_switch"]):
            assert before, f"rank {rank}: {name} has state before the switch"
            assert torch.allclose(torch.tensor(after), torch.tensor(before)), \
                f"rank {rank}: {name}'s state is kept across ssgd -> groups"
        for opt in range(2):
            assert torch.allclose(end[rank][opt], end[0][opt], atol=1e-6), \
                f"rank {rank}: optimizer {opt}'s state agrees after the merge"
        assert r["mode"] == "ssgd"
        assert torch.allclose(torch.tensor(r["params"]), torch.tensor(results[0][2]["params"]), atol=1e-6)
        assert r["loss_after"] < r["loss_before"]
