"""Fixtures of the workload tests."""

import pytest
from workload_helpers import Tasks


@pytest.fixture
def tasks(tmp_path, live_processes):
    started = Tasks(tmp_path)
    yield started
    started.cleanup()
    assert not live_processes(started.marker), "processes left behind"
