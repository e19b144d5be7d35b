"""Each DDP bucket is exchanged on its own as backward produces it: a model of several
buckets trains exactly as PyTorch's DDP."""

import torch

from harness import run_beside_ddp
import scenarios


def test_bucket_by_bucket_ssgd_matches_pytorch_ddp(tmp_path):
    ours, reference = run_beside_ddp(3, "ssgd_buckets", "plain_ddp_buckets", tmp_path)
    iterations = scenarios.SAMPLES // (8 * 3)
    for rank, (_, _, result) in enumerate(ours):
        assert result["iteration"] == iterations
        assert result["parts"] > 2 * iterations, f"rank {rank}: buckets were not exchanged one by one"
        assert torch.allclose(torch.tensor(result["params"]), reference, atol=1e-5), f"rank {rank}"
