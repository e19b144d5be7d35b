"""report_accuracy reaches the controller with the next report, time-stamped."""

from harness import FakeController, expect_all_ok, run_workers


def test_reported_accuracy_goes_out_with_the_next_report(tmp_path):
    controller = FakeController()
    try:
        results = run_workers(2, "accuracy", tmp_path, controller=controller)
    finally:
        controller.close()
    expect_all_ok(results)
    with_accuracy = [r for r in controller.reports if "accuracy" in r]
    assert [r["accuracy"] for r in with_accuracy] == [0.5, 0.9]
    assert all(r["worker"] == 0 for r in with_accuracy)
    times = [r["accuracy_time_seconds"] for r in with_accuracy]
    assert 0 <= times[0] < times[1]
    assert all(r["accuracy_time_seconds"] <= r["time_seconds"] for r in with_accuracy)
