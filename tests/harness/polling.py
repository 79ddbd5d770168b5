"""Waiting for a condition in a test: poll it until it holds or the time is up."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(condition: Callable[[], object], timeout: float = 10.0, interval: float = 0.05) -> object:
    """Whether `condition()` came true within `timeout` seconds: True as soon as it does (polled
    every `interval` seconds), else what it gives once more when the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()
