"""A decision turns AMP on for one worker: its steps run under autocast, the others' not."""

from harness import FakeController, expect_all_ok, run_workers


def run_amp_decision(tmp_path, env=None):
    """Two workers; from iteration 4 worker 1 runs with AMP. Returns their results."""
    decision = {"epoch": 1, "apply_at_iteration": 4, "mode": "ssgd", "k": 2, "groups": [],
                "workers": [{"worker": 0, "amp": False, "batch": 8}, {"worker": 1, "amp": True, "batch": 8}]}
    controller = FakeController(lambda report: decision)
    try:
        results = run_workers(2, "amp", tmp_path, controller=controller, env=env)
    finally:
        controller.close()
    expect_all_ok(results)
    amp_reports = [r for r in controller.reports if r["worker"] == 1 and r["iteration"] > 6]
    assert amp_reports and all(r["amp"] for r in amp_reports), "worker 1's reports say AMP"
    return results


def expect_amp_on_worker_1_only(results):
    for worker, want in ((0, False), (1, True)):
        steps = results[worker][2]["autocast"]
        assert all(on is False for it, on in steps if it < 4), f"worker {worker} before the decision"
        after = [on for it, on in steps if it >= 4]
        assert after and all(on is want for on in after), f"worker {worker}: {steps}"
        # One output dtype before the decision and one after: [after the decision?, dtype].
        dtypes = results[worker][2]["dtypes"]
        after_dtype = "torch.bfloat16" if want else "torch.float32"
        assert dtypes == [[False, "torch.float32"], [True, after_dtype]], f"worker {worker}: {dtypes}"


def test_amp_toggles_per_worker(tmp_path):
    expect_amp_on_worker_1_only(run_amp_decision(tmp_path))
