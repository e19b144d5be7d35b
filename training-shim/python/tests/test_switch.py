"""Mode switches mid-run (fixed-k, groups, back to SSGD): training goes on, converges,
and every worker ends on the same parameters."""

import torch

from harness import expect_all_ok, run_workers


def expect_switched_and_converged(results):
    expect_all_ok(results)
    first = torch.tensor(results[0][2]["params"])
    for rank, (_, _, r) in enumerate(results):
        assert r["mode"] == "ssgd", f"rank {rank}"
        assert {"fixed_k", "groups", "ssgd"} <= set(r["modes"]), f"rank {rank}: {r['modes']}"
        assert r["iteration"] == results[0][2]["iteration"], f"rank {rank}"
        assert torch.allclose(torch.tensor(r["params"]), first, atol=1e-6), f"rank {rank}"
        assert r["loss_after"] < 0.6 * r["loss_before"], f"rank {rank}: {r['loss_before']} -> {r['loss_after']}"


def test_fixed_k_and_groups_switch_and_training_converges(tmp_path):
    expect_switched_and_converged(run_workers(4, "switch", tmp_path))
