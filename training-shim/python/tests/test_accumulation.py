"""Gradient accumulation with no_sync(): STAR exchanges on the stepping micro-batch only,
and training equals PyTorch DDP's with the same accumulation."""

import torch

from harness import expect_all_ok, free_port, run_workers
import scenarios
import user_scripts


def test_no_sync_accumulation_matches_pytorch_ddp(tmp_path):
    (tmp_path / "star").mkdir()
    (tmp_path / "ddp").mkdir()
    ours = run_workers(2, "accumulate", tmp_path / "star", script="user_scripts.py")
    expect_all_ok(ours)
    theirs = run_workers(2, "plain_ddp_accumulate", tmp_path / "ddp", script="user_scripts.py",
                         env={"DDP_PORT": str(free_port())})
    expect_all_ok(theirs)
    reference = torch.tensor(theirs[0][2]["params"])
    batch = user_scripts.ACCUMULATE * user_scripts.MICRO
    for rank, (_, _, result) in enumerate(ours):
        assert result["iteration"] == scenarios.SAMPLES // (batch * 2), f"rank {rank}: one iteration per exchange"
        assert set(result["batches"]) == {batch}, f"rank {rank}: an iteration's batch is its micro-batches' sum"
        assert torch.allclose(torch.tensor(result["params"]), reference, atol=1e-5), f"rank {rank}"
