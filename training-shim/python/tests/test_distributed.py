"""torch.distributed stays the script's: its own rank, barrier, all_reduce, broadcast and
DistributedSampler work beside STAR, whether init() makes the default group or the
script made it first (as under torchrun)."""

import pytest

from harness import expect_all_ok, free_port, run_workers


@pytest.mark.parametrize("scenario", ["distributed", "own_group"])
def test_the_scripts_collectives_work_beside_star(tmp_path, scenario):
    env = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    results = run_workers(3, scenario, tmp_path, env=env, script="user_scripts.py")
    expect_all_ok(results)
    for rank, (_, _, r) in enumerate(results):
        assert (r["rank"], r["size"]) == (rank, 3)
        assert r["seen_min"] == r["seen_max"] == 1, "DistributedSampler's shards cover the data once"
        assert r["broadcast"] == 17.0, "rank 1's tensor reached every worker"
        assert r["iteration"] == results[0][2]["iteration"] > 0
