"""What the AWS tests share: provision-aws.yml and teardown-aws.yml run against the moto server,
EC2 read back with boto3, and the life of a cluster shared by several tests.

Runs against moto skip the SSH wait (moto's addresses are real-looking public ones: never
connected to), the node configuration and the placement group (moto 5.2 has none): ``MOTO_VARS``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pytest
from moto_server import SECRET_ACCESS_KEY
from playbook_harness import run_playbook

ROOT = Path(__file__).resolve().parents[2]
PROVISION = "provision-aws.yml"
TEARDOWN = "teardown-aws.yml"
SSH_CIDR = "203.0.113.7/32"
CLUSTER_TAG = "dtfbench-cluster"
# A run against moto: no SSH to moto's addresses, no node configuration, no placement group.
MOTO_VARS = {"aws_wait_for_ssh": False, "configure_nodes": False, "placement_group": False}


def playbook(playbook_name: str, env: dict, extra: dict | None = None, *verbosity: str):
    """ansible-playbook from the project root; (returncode, stdout+stderr)."""
    variables = dict(MOTO_VARS, **(extra or {}))
    result = run_playbook(playbook_name, *verbosity, "-e", json.dumps(variables), env=env)
    return result.returncode, result.output


def recap(output: str) -> dict:
    match = re.search(r"localhost\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", output)
    assert match, output[-3000:]
    return dict(zip(("ok", "changed", "unreachable", "failed"), map(int, match.groups())))


def ec2_client(env: dict):
    return boto3.client(
        "ec2",
        endpoint_url=env["AWS_ENDPOINT_URL"],
        region_name=env["AWS_REGION"],
        aws_access_key_id=env.get("AWS_ACCESS_KEY_ID", "AKIADTFBENCHTESTING1"),
        aws_secret_access_key=env.get("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY),
    )


def instances(env: dict, cluster: str | None = None, states=("pending", "running")) -> list[dict]:
    filters = [{"Name": "instance-state-name", "Values": list(states)}]
    if cluster:
        filters.append({"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]})
    pages = ec2_client(env).get_paginator("describe_instances").paginate(Filters=filters)
    return [i for page in pages for r in page["Reservations"] for i in r["Instances"]]


def cluster_vars(tmp_path: Path, name: str = "study", **extra) -> dict:
    return dict(
        {
            "cluster_name": name,
            "instance_type": "p2.xlarge",
            "instance_count": 2,
            "ssh_cidr": SSH_CIDR,
            "output_dir": str(tmp_path / name),
        },
        **extra,
    )


def tags_of(instance: dict) -> dict:
    return {t["Key"]: t["Value"] for t in instance.get("Tags", [])}


def lines(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def moto_env(ansible_env: dict, server) -> dict:
    """ansible-playbook's environment pointed at the moto `server`: none of the caller's AWS_*."""
    env = {k: v for k, v in ansible_env.items() if not k.startswith("AWS_")}
    env.update(server.env)
    return env


def leftovers(env: dict) -> dict:
    """Everything in the region a cluster could have left, but the account's defaults."""
    ec2 = ec2_client(env)
    return {
        "instances": [i["InstanceId"] for i in instances(env, states=("pending", "running", "stopping", "stopped"))],
        "vpcs": [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")],
        "security_groups": [
            g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"] if g["GroupName"] != "default"
        ],
        "key_pairs": [k["KeyName"] for k in ec2.describe_key_pairs()["KeyPairs"]],
        "launch_templates": [t["LaunchTemplateName"] for t in ec2.describe_launch_templates()["LaunchTemplates"]],
        "internet_gateways": [
            g["InternetGatewayId"]
            for g in ec2.describe_internet_gateways()["InternetGateways"]
            if any(t["Key"] == CLUSTER_TAG for t in g.get("Tags", []))
        ],
    }


NOTHING = {
    "instances": [],
    "vpcs": [],
    "security_groups": [],
    "key_pairs": [],
    "launch_templates": [],
    "internet_gateways": [],
}


class Lifecycle(dict):
    """What one step of the shared cluster's life left: its playbook run and what was read back
    right after it (moto is reset before every other test, so everything is read at once)."""

    def step(self, name: str) -> dict:
        if name not in self:
            pytest.fail(f"the cluster's step {name!r} did not run: {self.get('stopped', '?')} failed before it")
        return self[name]

    def run(self, name: str, *args, ok: bool = True) -> dict:
        """One step: `playbook(*args)`, recorded under `name`; a failure stops the life there
        (the caller returns), unless `ok` is False (a step expected to fail)."""
        rc, output = playbook(*args)
        self[name] = {"rc": rc, "output": output}
        if ok and rc != 0:
            self["stopped"] = name
        return self[name]
