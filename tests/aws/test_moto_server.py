"""The moto fixture itself: reachable through AWS_ENDPOINT_URL, reset between tests."""

import subprocess
import sys


def _client_script(service: str, call: str) -> str:
    return f"import boto3; c = boto3.client('{service}'); print({call})"


def test_boto3_reaches_moto_through_the_standard_variables(aws_env):
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _client_script("s3", "c.create_bucket(Bucket='dtfbench-fixture') and len(c.list_buckets()['Buckets'])"),
        ],
        env=aws_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "1"


def test_reset_forgets_what_the_previous_test_made(aws_env):
    out = subprocess.run(
        [sys.executable, "-c", _client_script("s3", "len(c.list_buckets()['Buckets'])")],
        env=aws_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "0"
