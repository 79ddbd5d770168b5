"""Fixtures of the AWS tests: a moto server (EC2 and S3) on loopback for the session."""

from __future__ import annotations

import pytest
from moto_server import MotoServer


@pytest.fixture(scope="session")
def moto_session(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log").start()
    yield server
    server.stop()


@pytest.fixture
def moto(moto_session):
    """The session's moto server, emptied before the test: no resource of another test."""
    moto_session.reset()
    return moto_session


@pytest.fixture
def aws_env(ansible_env, moto) -> dict:
    """ansible-playbook's environment, pointed at moto through the standard variables."""
    env = {k: v for k, v in ansible_env.items() if not k.startswith("AWS_")}
    env.update(moto.env)
    return env
