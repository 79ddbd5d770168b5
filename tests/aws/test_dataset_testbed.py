"""The dataset role over real SSH: moto S3 -> each test-bed host's local SSD -> a real-data run.

A moto server listens on the controller's address on the test bed's public bridge (the
only address the namespaced hosts reach). A generated ImageNet-format TFRecord set is
uploaded to it; the role syncs it onto both hosts' own /mnt/local_ssd with credentials
passed as variables (they must never appear in the output); a second run changes
nothing; then run-benchmark.yml trains on it (data=real) across the two hosts.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

import boto3
import pytest
from moto_server import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, MotoServer
from playbook_harness import extra_vars, run_playbook, small_run
from testbed_fixtures import testbed_factory  # noqa: F401

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

BUCKET = "dtfbench-testbed-data"
DATA_DIR = "/mnt/local_ssd/imagenet"
PLAYBOOK = """\
- name: Put the data set on the TF nodes
  hosts: tf_nodes
  gather_facts: false
  roles:
    - role: dataset
"""


def recap(stdout: str) -> dict[str, dict[str, int]]:
    found = {}
    for host, counts in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", stdout, re.M):
        found[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counts)}
    return found


def md5s(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.md5(p.read_bytes()).hexdigest()
        for p in sorted(directory.iterdir())
        if not p.name.startswith(".")
    }


def test_dataset_role_syncs_to_every_host_and_a_run_reads_it(testbed_factory, ansible_env, tmp_path):
    bed = testbed_factory(hosts=2)
    source = tmp_path / "source"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "dtfbench",
            "tfrecords",
            "--output_dir",
            str(source),
            "--shards",
            "4",
            "--validation_shards",
            "1",
            "--images_per_shard",
            "16",
            "--image_size",
            "32",
        ],
        check=True,
        capture_output=True,
        env=dict(ansible_env),
    )
    # The shards: dataset_include (train-*, validation-*) leaves the SHA256SUMS beside them in S3.
    expected = {name: digest for name, digest in md5s(source).items() if name != "SHA256SUMS"}
    assert len(expected) == 5

    moto = MotoServer(tmp_path / "moto.log", host=bed.state["controller_ip"]).start()
    try:
        s3 = boto3.session.Session(
            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY, region_name=REGION
        ).client("s3", endpoint_url=moto.endpoint)
        s3.create_bucket(Bucket=BUCKET)
        for path in source.iterdir():
            s3.upload_file(str(path), BUCKET, f"imagenet/{path.name}")

        extra = tmp_path / "dataset-vars.json"
        extra.write_text(
            json.dumps(
                {
                    "data": "real",
                    "dataset_source": f"s3://{BUCKET}/imagenet",
                    "dataset_dir": DATA_DIR,
                    "dataset_s3_endpoint_url": moto.endpoint,
                    "dataset_s3_region": REGION,
                    "dataset_aws_access_key_id": ACCESS_KEY_ID,
                    "dataset_aws_secret_access_key": SECRET_ACCESS_KEY,
                }
            )
        )
        playbook = tmp_path / "dataset.yml"
        playbook.write_text(PLAYBOOK)
        env = {k: v for k, v in ansible_env.items() if not k.startswith("AWS_")}

        def sync():
            return run_playbook(playbook, "-i", bed.inventory, "-e", f"@{extra}", env=env, timeout=300)

        first = sync()
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
        assert SECRET_ACCESS_KEY not in first.stdout + first.stderr
        counts = recap(first.stdout)
        assert set(counts) == {"node01", "node02"} and all(c["changed"] >= 2 for c in counts.values()), counts
        assert "5 downloaded" in first.stdout
        for node in ("node01", "node02"):
            synced = bed.local_ssd(node) / "imagenet"
            assert md5s(synced) == expected, node
            assert not list(synced.glob(".*partial"))

        second = sync()
        assert second.returncode == 0, second.stdout[-4000:]
        assert SECRET_ACCESS_KEY not in second.stdout + second.stderr
        assert all(c["changed"] == 0 for c in recap(second.stdout).values()), second.stdout[-3000:]
        assert "5 already complete" in second.stdout
    finally:
        moto.stop()

    # A real-data run across both hosts, each reading its own copy.
    sweep_id = f"pytest-dataset-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    run = bed.play(
        "run-benchmark.yml",
        *extra_vars(system="testbed", gpus=2, num_ps=1, data="real", data_dir=DATA_DIR),
        # No link probe (test_network_testbed's): this run is about the data each node reads.
        *extra_vars(network_probe="false"),
        *small_run(),
        *extra_vars(sweep_id=sweep_id, results_db=db),
        timeout=480,
    )
    assert run.returncode == 0, run.stdout[-5000:] + run.stderr[-2000:]
    runs = store.runs(store.connect(db))
    assert len(runs) == 1
    stored = runs[0]
    assert stored["status"] == "ok", stored["reason"]
    assert stored["data"] == "real" and stored["num_workers"] == 2
    for result in stored["worker_results"]:
        assert result["status"] == "ok" and result["config"]["data_dir"] == DATA_DIR
    # Each node's raw read rate of its own copy, measured before the run, stored with it.
    assert sorted(stored["data_read"]) == ["node01", "node02"]
    assert all(m["bytes"] > 0 and m["mb_per_s"] > 0 and m["data_dir"] == DATA_DIR for m in stored["data_read"].values())
    assert stored["data_read_mb_per_s"] == min(m["mb_per_s"] for m in stored["data_read"].values())
    bed.down()
    assert bed.leftovers() == []
