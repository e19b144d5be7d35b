"""AdaptiveBatchSampler under a DataLoader that draws ahead (worker processes,
prefetching, persistent workers): every batch has the size in force at its iteration,
no sample is drawn twice in an epoch, and decisions apply at their iteration."""

import pytest

from harness import FakeController, expect_all_ok, run_workers
import user_scripts


def batch_in_force(schedule, worker, iteration):
    batch = 8
    for d in sorted(schedule.values(), key=lambda d: d["apply_at_iteration"]):
        if d["apply_at_iteration"] <= iteration:
            batch = d["workers"][worker]["batch"]
    return batch


@pytest.mark.parametrize("workers,persistent", [(0, False), (2, False), (4, True)])
def test_batches_follow_decisions_with_loader_workers(tmp_path, workers, persistent):
    controller = FakeController()
    try:
        results = run_workers(2, "loader", tmp_path, controller=controller, script="user_scripts.py",
                              env={"LOADER_WORKERS": str(workers), "LOADER_PERSISTENT": "1" if persistent else "0"})
    finally:
        controller.close()
    expect_all_ok(results)
    rounds = user_scripts.LOADER_SAMPLES // 16
    schedule = results[0][2]["schedule"]
    by_epoch = [[], []]
    for w, (_, _, r) in enumerate(results):
        assert not r["warnings"], f"worker {w}: {r['warnings']}"
        steps = r["steps"]
        assert [s[0] for s in steps] == list(range(2 * rounds)), f"worker {w}: one step per iteration"
        for iteration, batch, idx in steps:
            assert len(idx) == batch == batch_in_force(schedule, w, iteration), f"worker {w} iteration {iteration}"
            by_epoch[iteration // rounds].extend(idx)
    for e, seen in enumerate(by_epoch):
        assert len(seen) == len(set(seen)) == user_scripts.LOADER_SAMPLES, f"epoch {e}: every sample once"
    ahead = [r.get("lookahead", 0) for r in controller.reports]
    if workers:
        assert max(ahead) >= workers, "reports carry how far the loader draws ahead"
    else:
        assert max(ahead) == 0
