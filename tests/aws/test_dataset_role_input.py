"""The dataset role refuses bad input with one clear error, before any disk or bucket is touched."""

from __future__ import annotations

import functools
import json
import sys

import pytest
from moto_server import SECRET_ACCESS_KEY
from playbook_harness import extra_vars, run_playbook

pytestmark = pytest.mark.ansible

PLAYBOOK = """\
- name: Dataset role on this machine
  hosts: localhost
  gather_facts: false
  roles:
    - role: dataset
"""


def _play(ansible_env, tmp_path, **variables):
    playbook = tmp_path / "dataset.yml"
    playbook.write_text(PLAYBOOK)
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps({"dataset_mount_point": str(tmp_path / "ssd"), **variables}))
    env = {k: v for k, v in ansible_env.items() if not k.startswith("AWS_")}
    return run_playbook(
        playbook,
        *("-i", "localhost,", "-c", "local", "-e", f"@{extra}"),
        *extra_vars(ansible_python_interpreter=sys.executable),
        env=env,
        timeout=120,
    )


@pytest.fixture
def play(ansible_env, tmp_path):
    """The dataset role on this machine with this test's environment and tmp_path: play(**variables)."""
    return functools.partial(_play, ansible_env, tmp_path)


@pytest.mark.parametrize(
    "variables, message",
    [
        ({"data": "real"}, "real data was requested (data=real) but dataset_source is empty"),
        ({"data": "both"}, "set -e dataset_source=s3://BUCKET/PREFIX"),
        ({"dataset_source": "my-bucket/imagenet"}, "dataset_source=my-bucket/imagenet is not an S3 location"),
        ({"dataset_source": "s3://Bad_Bucket/x"}, "is not an S3 location"),
        ({"dataset_source": "s3://bucket/x", "dataset_dir": "relative/dir"}, "must be absolute paths"),
        ({"dataset_source": "s3://bucket/x", "dataset_workers": 0}, "dataset_workers=0 must be at least 1"),
        (
            {"dataset_source": "s3://bucket/x", "dataset_s3_endpoint_url": "localhost:5000"},
            "must be an http:// or https:// URL",
        ),
        ({"dataset_source": "s3://bucket/x", "dataset_filesystem": "ntfs"}, "dataset_filesystem"),
    ],
)
def test_bad_input_is_one_clear_error_before_anything(play, tmp_path, variables, message):
    done = play(**variables)
    assert done.returncode != 0
    assert message in done.stdout, done.stdout[-3000:]
    assert not (tmp_path / "ssd").exists()


def test_half_a_credential_pair_is_refused_without_printing_it(play, tmp_path):
    done = play(dataset_source="s3://bucket/x", dataset_aws_secret_access_key=SECRET_ACCESS_KEY)
    assert done.returncode != 0
    assert "censored" in done.stdout and SECRET_ACCESS_KEY not in done.stdout + done.stderr
    assert not (tmp_path / "ssd").exists()


def test_no_source_and_synthetic_data_does_nothing(play, tmp_path):
    done = play()
    assert done.returncode == 0, done.stdout[-3000:]
    assert "changed=0" in done.stdout and not (tmp_path / "ssd").exists()


def test_an_unreachable_endpoint_fails_with_the_reason(play):
    done = play(
        dataset_source="s3://bucket/x",
        dataset_s3_endpoint_url="http://127.0.0.1:9",
        dataset_aws_access_key_id="AKIAX",
        dataset_aws_secret_access_key=SECRET_ACCESS_KEY,
        dataset_s3_region="us-east-1",
    )
    assert done.returncode != 0
    assert "dataset sync of s3://bucket/x" in done.stdout and "failed" in done.stdout, done.stdout[-3000:]
    assert SECRET_ACCESS_KEY not in done.stdout + done.stderr
