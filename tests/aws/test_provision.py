"""provision-aws.yml against moto: the cluster, its security, idempotence, cost guard, bad input.

Every run is the real playbook as a user would run it (``ansible-playbook provision-aws.yml``
from the project root), pointed at the moto server through AWS_ENDPOINT_URL; the assertions
read EC2 back with boto3. moto's instances have real-looking public addresses, so the runs
skip the SSH wait (``aws_wait_for_ssh=false``) and the node configuration
(``configure_nodes=false``), and moto 5.2 has no placement groups (``placement_group=false``).
"""

from __future__ import annotations

import json
import math
import re
import stat
import subprocess
from pathlib import Path

import pytest
from aws_cluster import (
    CLUSTER_TAG,
    PROVISION,
    ROOT,
    SSH_CIDR,
    TEARDOWN,
    Lifecycle,
    cluster_vars,
    ec2_client,
    instances,
    lines,
    moto_env,
    playbook,
    recap,
    tags_of,
)
from moto_server import SECRET_ACCESS_KEY


def plain(value):
    """ansible-inventory's JSON without its {"__ansible_unsafe": ...} wrappers."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def generate_key(directory: Path) -> Path:
    key = directory / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    return key.with_suffix(".pub")


# Credentials given as variables (none in the environment): test_no_secret_in_the_output.
VAR_SECRET = "dtfbench-var-secret-0b5e1c7d9a3f46e2"
VAR_CREDENTIALS = {"aws_access_key": "AKIADTFBENCHVARKEY01", "aws_secret_key": VAR_SECRET}
# The sweep the dollar guard prices by default (provision-aws.yml's sweep_* defaults).
DEFAULT_SWEEP = {
    "model": "inception3",
    "batch_size": 64,
    "num_ps": 1,
    "repetitions": 5,
    "warmup_steps": 10,
    "steps": 100,
}


def expected_cost():
    """The dollar guard's prediction for 2 x p2.xlarge and the default sweep (1 and 2 GPUs x 5)."""
    from dtfbench.forecast import cost_guard

    return cost_guard.estimate(cost_guard.planned_runs(DEFAULT_SWEEP, 2, 1), "p2.xlarge", 2, 1, setup_minutes=30)


def without_credentials(env: dict) -> dict:
    return {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}


@pytest.fixture(scope="module")
def study(moto_session, ansible_env, tmp_path_factory):
    """One 2 x p2.xlarge cluster's whole life, run once and read by three tests: each
    provision-aws.yml run costs half a minute or more, and the three asked for the same cluster.

    refused   the cost guard's refusal (max_cost_usd=1): nothing exists (test_cost_guard_...);
    launch    the same request raised to the figure it named, -v: the cluster (test_cost_guard_...,
              test_provision_is_secure_...);
    rerun     the same request again (test_provision_is_secure_...);
    shrink    one instance fewer, with credentials given as variables (none in the environment)
              at -vvv (test_provision_is_secure_..., test_no_secret_in_the_output);
    teardown  teardown-aws.yml with the same credentials at -vvv (test_no_secret_in_the_output).
    A step whose playbook fails stops the life there; the steps after it are missing.
    """
    moto_session.reset()
    env = moto_env(ansible_env, moto_session)
    quiet = without_credentials(env)
    tmp_path = tmp_path_factory.mktemp("study")
    out = tmp_path / "study"
    life = Lifecycle(tmp_path=tmp_path, out=out)
    ec2 = ec2_client(env)
    raised = math.ceil(expected_cost().cost_usd)
    run = life.run

    refused = run("refused", PROVISION, env, cluster_vars(tmp_path, max_cost_usd=1), ok=False)
    refused["instances"] = instances(env, states=("pending", "running", "shutting-down", "terminated", "stopped"))
    refused["vpcs"] = [v for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")]
    refused["groups"] = [g for g in ec2.describe_security_groups()["SecurityGroups"] if g["GroupName"] != "default"]
    refused["key_pairs"] = ec2.describe_key_pairs()["KeyPairs"]
    refused["out_exists"] = out.exists()

    launch = run("launch", PROVISION, env, cluster_vars(tmp_path, max_cost_usd=raised), "-v")
    if "stopped" in life:
        return life
    launch["running"] = running = instances(env, "study")
    group_ids = {g["GroupId"] for i in running for g in i["SecurityGroups"]}
    launch["group_ids"] = group_ids
    launch["groups"] = ec2.describe_security_groups(GroupIds=list(group_ids))["SecurityGroups"]
    subnet_ids = {i["SubnetId"] for i in running}
    launch["subnet_ids"] = subnet_ids
    launch["subnet"] = subnet = ec2.describe_subnets(SubnetIds=list(subnet_ids))["Subnets"][0]
    launch["vpc"] = ec2.describe_vpcs(VpcIds=[subnet["VpcId"]])["Vpcs"][0]
    launch["public"], launch["private"] = lines(out / "aws_public_ips.txt"), lines(out / "aws_private_ips.txt")
    pem = out / "study.pem"
    launch["pem_mode"], launch["pem_text"] = stat.S_IMODE(pem.stat().st_mode), pem.read_text()
    # The aws_ec2 inventory, read from moto by ansible-inventory.
    launch["listing"] = subprocess.run(
        ["ansible-inventory", "-i", str(out / "study.aws_ec2.yml"), "--list"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )

    rerun = run("rerun", PROVISION, env, cluster_vars(tmp_path, max_cost_usd=raised))
    if "stopped" in life:
        return life
    rerun["running"] = instances(env, "study")

    shrink = run(
        "shrink",
        PROVISION,
        quiet,
        cluster_vars(tmp_path, instance_count=1, max_cost_usd=raised, **VAR_CREDENTIALS),
        "-vvv",
    )
    if "stopped" in life:
        return life
    shrink["left"] = instances(env, "study")
    shrink["gone"] = instances(env, "study", states=("shutting-down", "terminated"))
    shrink["public"], shrink["private"] = lines(out / "aws_public_ips.txt"), lines(out / "aws_private_ips.txt")

    teardown = run(
        "teardown", TEARDOWN, quiet, {"cluster_name": "study", "output_dir": str(out), **VAR_CREDENTIALS}, "-vvv"
    )
    teardown["running"] = instances(env, "study")
    return life


def test_provision_is_secure_idempotent_and_shrinks(study):
    # The cluster of the module's `study` fixture: launched (the raised request of the cost
    # guard's test, -v), the same request again, then one instance fewer.
    out = study["out"]
    launch = study.step("launch")
    rc, output = launch["rc"], launch["output"]
    assert rc == 0, output[-4000:]

    running = launch["running"]
    assert len(running) == 2 and {i["InstanceType"] for i in running} == {"p2.xlarge"}
    for instance in running:
        tags = tags_of(instance)
        assert tags[CLUSTER_TAG] == "study" and tags["created-by"] == "dtfbench"
        assert tags["dtfbench-owner"] and re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", tags["dtfbench-expiry"])
        assert instance["KeyName"] == "dtfbench-study"
    subnet_ids = launch["subnet_ids"]
    assert len(subnet_ids) == 1

    # The security group: SSH from ssh_cidr only, the TF ports only from the group itself.
    group_ids = launch["group_ids"]
    assert len(group_ids) == 1
    group = launch["groups"][0]
    assert group["GroupName"] == "dtfbench-study"
    ingress = group["IpPermissions"]
    ssh = [p for p in ingress if p.get("FromPort") == 22]
    assert len(ssh) == 1 and ssh[0]["ToPort"] == 22
    assert [r["CidrIp"] for r in ssh[0]["IpRanges"]] == [SSH_CIDR] and not ssh[0]["UserIdGroupPairs"]
    tf = [p for p in ingress if p.get("FromPort") != 22]
    # p2.xlarge: 1 worker port from 2220 (the layout's base), 8 PS ports from 2230.
    assert sorted((p["FromPort"], p["ToPort"]) for p in tf) == [(2220, 2220), (2230, 2237)]
    for permission in tf:
        assert permission["IpProtocol"] == "tcp"
        assert not permission["IpRanges"] and not permission.get("Ipv6Ranges")
        assert [pair["GroupId"] for pair in permission["UserIdGroupPairs"]] == [group["GroupId"]]
    assert not any(r["CidrIp"] == "0.0.0.0/0" for p in ingress for r in p["IpRanges"])

    # The network is the cluster's own, tagged for teardown.
    subnet, vpc = launch["subnet"], launch["vpc"]
    assert subnet["CidrBlock"] == "10.42.0.0/24" and tags_of(vpc)[CLUSTER_TAG] == "study"

    # The two IP files: line i of one is the instance of line i of the other.
    public, private = launch["public"], launch["private"]
    by_private = {i["PrivateIpAddress"]: i.get("PublicIpAddress") for i in running}
    assert len(public) == len(private) == 2 and {by_private[p] for p in private} == set(public)
    assert [by_private[p] for p in private] == public

    # The generated key: private half only in the 0600 file, never in the output.
    pem = out / "study.pem"
    assert launch["pem_mode"] == 0o600
    key_body = launch["pem_text"].splitlines()[1]
    assert "PRIVATE KEY" in launch["pem_text"] and key_body not in output
    assert SECRET_ACCESS_KEY not in output

    # The aws_ec2 inventory, read from moto by ansible-inventory.
    listing = launch["listing"]
    assert listing.returncode == 0, listing.stderr[-3000:]
    inventory = plain(json.loads(listing.stdout))
    hostvars = inventory["_meta"]["hostvars"]
    assert sorted(inventory["tf_nodes"]["hosts"]) == sorted(i["InstanceId"] for i in running)
    for instance in running:
        host = hostvars[instance["InstanceId"]]
        assert host["private_ip"] == instance["PrivateIpAddress"]
        assert host["ansible_host"] == instance["PublicIpAddress"]
        assert host["tf_devices"] == 1 and host["tf_device_type"] == "gpu"
        assert host["dtfbench_python"] == "/opt/dtfbench/venv/bin/python"
        assert host["ansible_user"] == "ubuntu" and host["ansible_ssh_private_key_file"] == str(pem)

    # The same request again changes nothing.
    rerun = study.step("rerun")
    rc, output = rerun["rc"], rerun["output"]
    assert rc == 0 and recap(output)["changed"] == 0, output[-4000:]
    assert SECRET_ACCESS_KEY not in output
    assert sorted(i["InstanceId"] for i in rerun["running"]) == sorted(i["InstanceId"] for i in running)

    # A smaller count terminates the surplus (the oldest), and the files follow (this run has
    # its credentials as variables: test_no_secret_in_the_output reads it too).
    shrink = study.step("shrink")
    rc, output = shrink["rc"], shrink["output"]
    assert rc == 0, output[-4000:]
    left = shrink["left"]
    assert len(left) == 1
    assert len(shrink["gone"]) == 1
    assert shrink["public"] == [left[0]["PublicIpAddress"]]
    assert shrink["private"] == [left[0]["PrivateIpAddress"]]


def test_gpus_are_divided_by_the_type_and_spot_goes_through_a_launch_template(spot_cluster):
    # The launch of the session's spot cluster (conftest.py; test_teardown.py tears it down):
    # 2 x p2.8xlarge for gpus=16, the guard (max_instances=1) raised explicitly.
    launch = spot_cluster.step("launch")
    rc, output = launch["rc"], launch["output"]
    assert rc == 0, output[-4000:]
    running = launch["running"]
    assert len(running) == 2 and {i["InstanceType"] for i in running} == {"p2.8xlarge"}
    # The dollar guard prices a spot cluster at its spot_max_price.
    assert "predicted cost of the planned sweep: $" in output and "2 x p2.8xlarge" in output
    assert "$0.9/h (25 runs" in " ".join(output.split())
    template = launch["template"]
    market = template["LaunchTemplateData"]["InstanceMarketOptions"]
    assert market["MarketType"] == "spot" and market["SpotOptions"]["MaxPrice"] == "0.90"
    assert {v["Size"] for v in launch["volumes"]} == {64}
    inventory = launch["inventory"]
    assert '"p2.8xlarge": 8' in inventory


BAD_INPUTS = [
    ("unknown type", {"instance_type": "p9.huge"}, r"instance_type 'p9.huge' is not a known EC2 GPU instance type"),
    (
        "gpus not a multiple",
        {"instance_type": "p2.8xlarge", "instance_count": None, "gpus": 12},
        r"gpus=12 is not a multiple of the 8 GPUs of one p2.8xlarge; ask for 8 or 16",
    ),
    (
        "over max_instances",
        {"instance_count": 9},
        r"9 instances of p2.xlarge exceed max_instances=8 \(the cost guard\)",
    ),
    ("ssh_cidr missing", {"ssh_cidr": None}, r"ssh_cidr is not set"),
    (
        "ssh open to all",
        {"ssh_cidr": "0.0.0.0/0"},
        r"ssh_cidr=0.0.0.0/0 opens SSH to the whole internet.*ssh_cidr_allow_anywhere=true",
    ),
    (
        "k80 on current",
        {"node_profile": "current"},
        r"node_profile=current does not support instance_type=p2.xlarge.*compute capability >= 5.0.*use node_profile=cscs2017",
    ),
    (
        "v100 on cscs2017",
        {"instance_type": "p3.2xlarge", "node_profile": "cscs2017"},
        r"node_profile=cscs2017 does not support instance_type=p3.2xlarge.*use node_profile=current",
    ),
    ("bad cluster name", {"cluster_name": "My_Cluster"}, r"cluster_name='My_Cluster' is not usable"),
    ("unknown ami", {"ami": "ami-0123456789abcdef0"}, r"ami=ami-0123456789abcdef0 does not exist in us-east-1"),
    # The dollar guard's inputs (the refusal above max_cost_usd: test_cost_guard_refuses_...).
    ("negative price", {"price_usd_per_hour": -0.5}, r"price_usd_per_hour=-0.5 must be a number above 0"),
    ("bad max_cost_usd", {"max_cost_usd": "lots"}, r"max_cost_usd='lots' is not a number of US dollars"),
]


@pytest.mark.parametrize("variables, message", [case[1:] for case in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_bad_input_fails_before_anything_exists(aws_env, tmp_path, variables, message):
    request = cluster_vars(tmp_path, "bad")
    for key, value in variables.items():
        if value is None:
            request.pop(key, None)
        else:
            request[key] = value
    rc, output = playbook(PROVISION, aws_env, request)
    assert rc != 0
    assert re.search(message, " ".join(output.split())), output[-3000:]
    assert "Traceback" not in output
    assert instances(aws_env, states=("pending", "running", "shutting-down", "terminated", "stopped")) == []
    assert [v for v in ec2_client(aws_env).describe_vpcs()["Vpcs"] if not v.get("IsDefault")] == []
    assert not (tmp_path / "bad").exists()


def test_cost_guard_refuses_above_max_cost_usd_before_anything_exists(study):
    """The planned sweep's cost is predicted from the p2.xlarge table and the price table;
    above max_cost_usd nothing is created, and the one message names the figure and the
    variable to raise. (The module's `study` cluster is this request, refused, then raised.)"""
    expected = expected_cost()
    assert 1 < expected.cost_usd < 10  # 10 runs (1 and 2 GPUs x 5) on 2 x p2.xlarge at $0.90/h
    refused = study.step("refused")
    rc, output = refused["rc"], refused["output"]
    assert rc != 0
    flat = " ".join(output.split())
    assert (
        f"the planned sweep is predicted to cost ${expected.cost_usd:,.2f}, above max_cost_usd=$1.00; "
        f"raise it (-e max_cost_usd={math.ceil(expected.cost_usd)})"
    ) in flat, output[-3000:]
    assert "published p2.xlarge table" in flat and "Traceback" not in output
    assert refused["instances"] == []
    assert refused["vpcs"] == []
    assert refused["groups"] == []
    assert refused["key_pairs"] == []
    assert not refused["out_exists"]

    # Raised to the figure it named, the same request launches, and prints the figure first.
    launch = study.step("launch")
    rc, output = launch["rc"], launch["output"]
    assert rc == 0, output[-3000:]
    flat = " ".join(output.split())
    assert f"predicted cost of the planned sweep: ${expected.cost_usd:,.2f} = 2 x p2.xlarge" in flat
    assert flat.index("predicted cost of the planned sweep") < flat.index("Create the security group")
    assert len(launch["running"]) == 2


def test_missing_credentials_is_a_message(aws_env, tmp_path):
    env = {k: v for k, v in aws_env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    rc, output = playbook(PROVISION, env, cluster_vars(tmp_path, "nocreds"))
    assert rc != 0
    flat = " ".join(output.split())
    assert "AWS credentials: the call to STS failed" in flat and "Unable to locate credentials" in flat
    assert "Traceback" not in output
    assert instances(aws_env, states=("pending", "running", "terminated")) == []


def _unwritable(tmp_path: Path) -> Path:
    # A folder below a regular file cannot be created, even by root: the IP files cannot be
    # written, after the instances were launched.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    return blocker / "out"


def test_failure_after_launch_tears_everything_down(aws_env, tmp_path, tmp_path_factory):
    # The user's public key: nothing is written to output_dir before the instances run.
    request = cluster_vars(
        tmp_path,
        "doomed",
        output_dir=str(_unwritable(tmp_path)),
        public_key_file=str(generate_key(tmp_path_factory.mktemp("key"))),
    )
    rc, output = playbook(PROVISION, aws_env, request)
    assert rc != 0
    flat = " ".join(output.split())
    assert "provisioning cluster doomed failed" in flat and "everything launched for it was torn down" in flat
    # It got as far as launching: then nothing may be left running or standing.
    assert len(instances(aws_env, "doomed", states=("shutting-down", "terminated"))) == 2
    assert instances(aws_env, "doomed") == []
    ec2 = ec2_client(aws_env)
    assert [v for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")] == []
    assert ec2.describe_key_pairs()["KeyPairs"] == []
    assert [g for g in ec2.describe_security_groups()["SecurityGroups"] if g["GroupName"] != "default"] == []


def test_keep_on_failure_keeps_the_instances(aws_env, tmp_path, tmp_path_factory):
    request = cluster_vars(
        tmp_path,
        "kept",
        output_dir=str(_unwritable(tmp_path)),
        keep_on_failure=True,
        public_key_file=str(generate_key(tmp_path_factory.mktemp("key"))),
    )
    rc, output = playbook(PROVISION, aws_env, request)
    assert rc != 0
    assert "the cluster was kept (keep_on_failure)" in " ".join(output.split())
    assert len(instances(aws_env, "kept")) == 2


def test_no_secret_in_the_output(study):
    """Credentials given as variables (none in the environment): used, and never printed.
    The module's `study` cluster shrinks and is torn down so, both at -vvv."""
    var_secret = VAR_SECRET
    outputs = []
    shrink = study.step("shrink")
    rc, output = shrink["rc"], shrink["output"]
    outputs.append(output)
    assert rc == 0, output[-3000:]
    assert len(shrink["left"]) == 1
    teardown = study.step("teardown")
    rc, output = teardown["rc"], teardown["output"]
    outputs.append(output)
    assert rc == 0, output[-3000:]
    for output in outputs:
        assert var_secret not in output and SECRET_ACCESS_KEY not in output
    assert teardown["running"] == []


def test_an_interrupted_provisioning_prints_its_teardown(aws_env, tmp_path, tmp_path_factory):
    """Issue #56, case 8: Ctrl-C during provision-aws.yml left instances, the security group, key and
    VPC behind, and exit 99 said nothing. Now the exact teardown command is printed, and it leaves
    nothing of the cluster."""
    import shlex
    import signal
    import time

    from aws_cluster import MOTO_VARS
    from playbook_harness import start_playbook

    request = dict(
        MOTO_VARS, **cluster_vars(tmp_path, "cut", public_key_file=str(generate_key(tmp_path_factory.mktemp("key"))))
    )
    log = open(tmp_path / "provision.log", "w+")
    process = start_playbook(
        PROVISION, "-e", json.dumps(request), env=aws_env, stdout=log, stderr=subprocess.STDOUT, text=True
    )
    ec2 = ec2_client(aws_env)
    deadline = time.monotonic() + 120
    try:
        while not [g for g in ec2.describe_security_groups()["SecurityGroups"] if "cut" in g["GroupName"]]:
            assert process.poll() is None and time.monotonic() < deadline, open(tmp_path / "provision.log").read()[
                -3000:
            ]
            time.sleep(0.2)
        process.send_signal(signal.SIGINT)  # Ctrl-C, once the cluster's first resources exist
        process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    time.sleep(1)  # the watchdog's line follows ansible-playbook's exit
    log.seek(0)
    output = " ".join(log.read().split())
    assert process.returncode != 0
    match = re.search(r"provisioning of cluster cut was interrupted by [^:]+: .*? Tear them down with: (.+?)$", output)
    assert match, output[-3000:]
    command = shlex.split(match.group(1))
    assert command[:2] == ["ansible-playbook", "teardown-aws.yml"] and "cluster_name=cut" in command
    assert f"region={aws_env['AWS_REGION']}" in command
    done = subprocess.run(
        # moto has no placement groups (MOTO_VARS), and the test's cluster files are in output_dir.
        [*command, "-e", json.dumps({**MOTO_VARS, "output_dir": request["output_dir"]})], cwd=ROOT, env=aws_env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert instances(aws_env, "cut") == []
    assert not [g for g in ec2.describe_security_groups()["SecurityGroups"] if "cut" in g["GroupName"]]
    assert not [k for k in ec2.describe_key_pairs()["KeyPairs"] if "cut" in k["KeyName"]]
