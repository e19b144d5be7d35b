"""Gradient accumulation with no_sync(): STAR exchanges on the stepping micro-batch only,
and training equals PyTorch DDP's with the same accumulation."""

import torch

from harness import run_beside_ddp
import scenarios
import user_scripts


def test_no_sync_accumulation_matches_pytorch_ddp(tmp_path):
    ours, reference = run_beside_ddp(2, "accumulate", "plain_ddp_accumulate", tmp_path, script="user_scripts.py")
    batch = user_scripts.ACCUMULATE * user_scripts.MICRO
    for rank, (_, _, result) in enumerate(ours):
        assert result["iteration"] == scenarios.SAMPLES // (batch * 2), f"rank {rank}: one iteration per exchange"
        assert set(result["batches"]) == {batch}, f"rank {rank}: an iteration's batch is its micro-batches' sum"
        assert torch.allclose(torch.tensor(result["params"]), reference, atol=1e-5), f"rank {rank}"
