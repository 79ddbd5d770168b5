"""teardown-aws.yml against moto: nothing of the cluster left, twice changes nothing, expiry.

The clusters are made by provision-aws.yml itself (see test_provision.py for the moto
settings); the assertions read EC2 back with boto3.
"""

from __future__ import annotations

import time

from aws_cluster import (
    NOTHING,
    PROVISION,
    TEARDOWN,
    cluster_vars,
    ec2_client,
    instances,
    leftovers,
    playbook,
    recap,
)
from moto_server import SECRET_ACCESS_KEY


def test_teardown_leaves_nothing_and_twice_changes_nothing(spot_cluster):
    # The session's spot cluster (conftest.py), launched for test_provision.py's spot test:
    # torn down at -v, then again.
    launch = spot_cluster.step("launch")
    rc, output = launch["rc"], launch["output"]
    assert rc == 0, output[-3000:]
    before = launch["leftovers"]
    assert len(before["instances"]) == 2 and before["launch_templates"] == ["dtfbench-spotty"]
    assert before["key_pairs"] == ["dtfbench-spotty"] and len(before["vpcs"]) == 1
    assert launch["files"]["aws_public_ips.txt"] and launch["files"]["spotty.pem"]

    teardown = spot_cluster.step("teardown")
    rc, output = teardown["rc"], teardown["output"]
    assert rc == 0, output[-3000:]
    assert recap(output)["changed"] > 0
    assert teardown["leftovers"] == NOTHING
    assert len(teardown["terminated"]) == 2
    assert teardown["listing"] == []
    assert SECRET_ACCESS_KEY not in output

    again = spot_cluster.step("again")
    rc, output = again["rc"], again["output"]
    assert rc == 0 and recap(output)["changed"] == 0, output[-3000:]


def test_expired_clusters_are_listed_then_removed_and_a_given_subnet_and_key_left_alone(aws_env, tmp_path):
    # A cluster in the user's own subnet with the user's own key pair, which expires 1 s after
    # launch: the listing names it, the removal takes what provisioning made, never the user's.
    ec2 = ec2_client(aws_env)
    vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.1.0/24")["Subnet"]["SubnetId"]
    ec2.create_key_pair(KeyName="mine")
    request = cluster_vars(
        tmp_path, "old", instance_count=1, vpc_subnet_id=subnet, key_name="mine", expiry_hours=0.0003
    )
    rc, output = playbook(PROVISION, aws_env, request)
    assert rc == 0, output[-3000:]
    (node,) = instances(aws_env, "old")
    assert node["SubnetId"] == subnet and node["KeyName"] == "mine"
    assert node["PrivateIpAddress"].startswith("10.7.1.")
    time.sleep(1.5)

    listing = {"expired": True, "output_root": str(tmp_path)}
    rc, output = playbook(TEARDOWN, aws_env, listing)
    assert rc == 0, output[-3000:]
    flat = " ".join(output.split())
    assert "1 expired cluster(s): old; remove them with -e remove_expired=true" in flat
    assert len(instances(aws_env, "old")) == 1

    rc, output = playbook(TEARDOWN, aws_env, dict(listing, remove_expired=True))
    assert rc == 0, output[-3000:]
    assert "1 expired cluster(s): old" in " ".join(output.split())
    assert not (tmp_path / "old" / "aws_public_ips.txt").exists()
    # What provisioning made is gone (its security group with it); the user's VPC, subnet and
    # key pair stay.
    assert leftovers(aws_env) == dict(NOTHING, vpcs=[vpc], key_pairs=["mine"])
    assert [s["SubnetId"] for s in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]] == [
        subnet
    ]
    assert [
        g["GroupName"]
        for g in ec2.describe_security_groups(Filters=[{"Name": "vpc-id", "Values": [vpc]}])["SecurityGroups"]
    ] == ["default"]


def test_a_region_other_than_the_recorded_one_is_refused(aws_env, tmp_path):
    """The generated inventory records the cluster's region: a teardown elsewhere would find
    none of its instances and remove the files that remember them; it is refused, and
    without -e region the recorded region is the one used."""
    out = tmp_path / "elsewhere"
    out.mkdir()
    (out / "elsewhere.aws_ec2.yml").write_text(
        "# written by provision-aws.yml\nplugin: amazon.aws.aws_ec2\nregions: [eu-west-1]\n"
    )
    (out / "aws_public_ips.txt").write_text("203.0.113.7\n")

    rc, output = playbook(
        TEARDOWN, aws_env, {"cluster_name": "elsewhere", "output_dir": str(out), "region": "us-east-1"}
    )
    assert rc != 0
    assert "region=us-east-1: cluster elsewhere is recorded in region eu-west-1" in " ".join(
        output.split()
    ) and "set region=eu-west-1" in " ".join(output.split()), output[-3000:]
    assert sorted(p.name for p in out.iterdir()) == ["aws_public_ips.txt", "elsewhere.aws_ec2.yml"]

    rc, output = playbook(TEARDOWN, aws_env, {"cluster_name": "elsewhere", "output_dir": str(out)})
    assert rc == 0, output[-3000:]
    assert sorted(p.name for p in out.iterdir()) == []
