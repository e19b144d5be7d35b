"""star.torch.Pipeline: a torch.nn.Sequential cut into stages, one process each, gives the
gradients of the whole model, with or without the loop's warm-up depths, alone or as
replicas; its reports carry the stage's pipeline costs."""

import pytest
import torch

from harness import FakeController, expect_all_ok, run_workers
import scenarios
import star.torch as st
from star.errors import ConfigError
from star.torch._pipeline import split_layers


def reference(replicas, micro_batches):
    """The whole model trained in one process on what every replica's steps covered."""
    model = scenarios.make_pipeline_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x_all, y_all = scenarios.data().tensors
    batch = scenarios.PIPE_MICRO * micro_batches
    losses = []
    for step in range(scenarios.PIPE_STEPS):
        lo = step * replicas * batch
        loss = torch.nn.functional.cross_entropy(model(x_all[lo:lo + replicas * batch]), y_all[lo:lo + replicas * batch])
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    return torch.tensor(scenarios.flat(model)), losses


def run(tmp_path, stages, replicas, micro_batches, controller=None):
    results = run_workers(stages * replicas, "pipeline", tmp_path, controller=controller,
                          env={"STAR_PIPELINE_STAGES": str(stages), "STAR_MICRO_BATCHES": str(micro_batches)})
    expect_all_ok(results)
    return [r[2] for r in results]


def check(results, stages, replicas, micro_batches):
    want, losses = reference(replicas, micro_batches)
    for replica in range(replicas):
        mine = results[replica * stages:(replica + 1) * stages]
        assert [r["stage"] for r in mine] == list(range(stages))
        got = torch.tensor([v for r in mine for v in r["params"]])
        assert torch.allclose(got, want, atol=1e-5), f"replica {replica}"
        assert all(r["iteration"] == scenarios.PIPE_STEPS for r in mine)
        assert all(loss is None for r in mine[:-1] for loss in r["losses"])
    if replicas == 1:
        assert results[-1]["losses"] == pytest.approx(losses, abs=1e-5)


def test_three_stages_give_the_whole_models_gradients(tmp_path):
    check(run(tmp_path, 3, 1, 4), 3, 1, 4)


def test_two_replicas_of_two_stages_average_each_stage(tmp_path):
    check(run(tmp_path, 2, 2, 4), 2, 2, 4)


def test_the_loops_depths_change_the_schedule_not_the_gradients(tmp_path):
    # Answered to the first reports (after iteration 2): the depths from iteration 3 on.
    decision = {"epoch": 1, "apply_at_iteration": 3, "mode": "ssgd", "k": 3, "groups": [], "workers": [],
                "warmup": [4, 4, 1], "predicted_iteration_seconds": 0.1}
    controller = FakeController(lambda report: decision if report["iteration"] == 2 else None)
    try:
        results = run(tmp_path, 3, 1, 4, controller=controller)
    finally:
        controller.close()
    check(results, 3, 1, 4)
    assert [r["warmups"] for r in results] == [[3, 3, 3, 4], [2, 2, 2, 4], [1, 1, 1, 1]]
    pipelines = [r["pipeline"] for r in controller.reports if "pipeline" in r]
    assert pipelines, "the stages report their pipeline costs"
    for p in pipelines:
        peers = [link["peer"] for link in p["links"]]
        assert peers == {0: [1], 1: [0, 2], 2: [1]}[p["stage"]]
        assert p["forward_seconds"] > 0 and p["backward_seconds"] > 0


def test_a_model_that_does_not_split_is_refused_naming_the_field():
    two = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    with pytest.raises(ConfigError, match="module: 2 layers cannot make 3 stages"):
        split_layers(two, 3)
    with pytest.raises(ConfigError, match="balance: must add up to the module's 2 layers, got 3"):
        split_layers(two, 2, balance=[1, 2])
    with pytest.raises(ConfigError, match="balance: must be 2 layer counts"):
        split_layers(two, 2, balance=[2, 0])
    with pytest.raises(ConfigError, match="module: must be a torch.nn.Sequential"):
        split_layers(torch.nn.Linear(2, 2), 1)
    assert [len(s) for s in split_layers(scenarios.make_pipeline_model(), 2)] == [3, 2]


def test_a_lone_stage_trains_and_refuses_bad_shapes_naming_them(clean_env):
    st.init(rank=0, world_size=1)
    model, loss_fn = scenarios.make_pipeline_model(), torch.nn.functional.cross_entropy
    example = torch.zeros(6, scenarios.FEATURES)
    with pytest.raises(ConfigError, match=r"micro_batches: must be >= stages \(2\), got 1"):
        st.Pipeline(model, example_input=example, loss_fn=loss_fn, stages=2, micro_batches=1)
    with pytest.raises(ConfigError, match="stages: must divide the job's 1 workers, got 2"):
        st.Pipeline(model, example_input=example, loss_fn=loss_fn, stages=2, micro_batches=2)
    pipe = st.Pipeline(model, example_input=example, loss_fn=loss_fn, stages=1, micro_batches=2)
    with pytest.raises(ConfigError, match=r"inputs: stage 0 needs 12 rows \(2 micro-batches of 6\), got 5"):
        pipe.step(torch.zeros(5, scenarios.FEATURES), torch.zeros(5, dtype=torch.long))
    x, y = scenarios.data().tensors
    loss = pipe.step(x[:12], y[:12])
    want = loss_fn(scenarios.make_pipeline_model()(x[:12]), y[:12]).item()
    assert loss == pytest.approx(want, abs=1e-6)
    assert st.iteration() == 1
