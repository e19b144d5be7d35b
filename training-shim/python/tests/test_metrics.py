"""A script's worker serves the same star_worker_* metrics as the C++ trainer."""

import os
import re
import urllib.request

import pytest
import torch

import star.torch as st
from harness import free_port
import scenarios


@pytest.fixture
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("STAR_"):
            monkeypatch.delenv(name)
    yield monkeypatch
    st.shutdown()


def sample(text, name):
    """The value of the sample `name` (any labels) in Prometheus text, or None."""
    m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    return float(m.group(1)) if m else None


def test_a_workers_metrics_count_its_iterations_and_show_its_batch(clean_env):
    port = free_port()
    clean_env.setenv("STAR_NODE_NAME", "node-a")  # as the operator sets it (downward API)
    st.init(rank=0, world_size=1, job="default/py", metrics_address=f"127.0.0.1:{port}")
    ds = scenarios.data()
    model = st.DistributedDataParallel(scenarios.make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scenarios.train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=16))
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    steps = scenarios.SAMPLES // 16
    assert sample(text, "star_worker_iterations_total") == steps, text
    assert sample(text, "star_worker_local_batch_size") == 16, text
    assert sample(text, "star_worker_amp_enabled") == 0, text
    for histogram in ("iteration", "compute", "communication", "wait"):
        assert sample(text, f"star_worker_{histogram}_seconds_count") == steps, histogram
    labels = 'namespace="default",node="node-a",trainingjob="py",worker="0"'
    assert f"star_worker_iterations_total{{{labels}}} {steps}" in text, text
    assert not re.search(r'[{,]job="', text), text
