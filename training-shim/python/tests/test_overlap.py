"""Each DDP bucket is exchanged on its own as backward produces it: a model of several
buckets trains exactly as PyTorch's DDP."""

import torch

from harness import expect_all_ok, free_port, run_workers
import scenarios


def test_bucket_by_bucket_ssgd_matches_pytorch_ddp(tmp_path):
    (tmp_path / "star").mkdir()
    (tmp_path / "ddp").mkdir()
    ours = run_workers(3, "ssgd_buckets", tmp_path / "star")
    expect_all_ok(ours)
    theirs = run_workers(3, "plain_ddp_buckets", tmp_path / "ddp", env={"DDP_PORT": str(free_port())})
    expect_all_ok(theirs)
    reference = torch.tensor(theirs[0][2]["params"])
    iterations = scenarios.SAMPLES // (8 * 3)
    for rank, (_, _, result) in enumerate(ours):
        assert result["iteration"] == iterations
        assert result["parts"] > 2 * iterations, f"rank {rank}: buckets were not exchanged one by one"
        assert torch.allclose(torch.tensor(result["params"]), reference, atol=1e-5), f"rank {rank}"
