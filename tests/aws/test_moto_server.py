"""The moto fixture itself: reachable through AWS_ENDPOINT_URL, reset between tests."""

import subprocess
import sys


def _client_script(service: str, call: str) -> str:
    return f"import boto3; c = boto3.client('{service}'); print({call})"


def _client_output(aws_env, service: str, call: str) -> str:
    """What `call` on a boto3 client of `service` prints, run in a Python of its own with `aws_env`."""
    return subprocess.run(
        [sys.executable, "-c", _client_script(service, call)],
        env=aws_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_boto3_reaches_moto_through_the_standard_variables(aws_env):
    out = _client_output(
        aws_env, "s3", "c.create_bucket(Bucket='dtfbench-fixture') and len(c.list_buckets()['Buckets'])"
    )
    assert out.strip() == "1"


def test_reset_forgets_what_the_previous_test_made(aws_env):
    out = _client_output(aws_env, "s3", "len(c.list_buckets()['Buckets'])")
    assert out.strip() == "0"
