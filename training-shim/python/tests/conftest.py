"""Fixtures shared by the star.torch tests."""

import os

import pytest

import star.torch as st


@pytest.fixture
def clean_env(monkeypatch):
    """No STAR_* variables and none of torchrun's that place a process; whatever the test
    initialised is shut down after it."""
    for name in list(os.environ):
        if name.startswith("STAR_") or name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            monkeypatch.delenv(name)
    yield monkeypatch
    st.shutdown()
