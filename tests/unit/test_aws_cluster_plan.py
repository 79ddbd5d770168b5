"""The planning of provision-aws.yml (dtfbench.plan.aws, behind library/aws_cluster_plan.py): what it returns, what it refuses."""

import datetime

import pytest

from dtfbench.plan.aws import PlanError, plan_cluster
from dtfbench.plan.layout import DEFAULT_PS_PORT_BASE, DEFAULT_WORKER_PORT_BASE

NOW = datetime.datetime(2026, 11, 22, 10, 0, 0, tzinfo=datetime.timezone.utc)


def request(**overrides):
    params = dict(
        state="present",
        cluster_name="study",
        instance_type="p2.xlarge",
        instance_count=2,
        gpus=None,
        max_instances=8,
        allow_more_instances=False,
        ssh_cidr="203.0.113.7/32",
        ssh_cidr_allow_anywhere=False,
        node_profile="",
        spot=False,
        spot_max_price="",
        root_volume_size=200,
        region="us-east-1",
        expiry_hours=24,
        owner="alice",
        ami="",
        vpc_subnet_id="",
        vpc_cidr="10.42.0.0/16",
        subnet_cidr="10.42.0.0/24",
        key_name="",
        public_key_file="",
        output_dir="/tmp/out",
        tf_worker_port_base=None,
        tf_ps_port_base=None,
        tf_ps_ports=8,
    )
    params.update(overrides)
    return params


def refused(match, **overrides):
    with pytest.raises(PlanError, match=match):
        plan_cluster(request(**overrides), NOW)


def test_the_plan_of_the_study_cluster():
    plan = plan_cluster(request(instance_type="p2.8xlarge", instance_count="", gpus="16"), NOW)
    assert (plan["instance_count"], plan["gpus"], plan["gpus_per_instance"]) == (2, 16, 8)
    assert plan["node_profile"] == "cscs2017" and plan["ssh_user"] == "ubuntu"
    assert plan["expiry"] == "2026-11-23T10:00:00Z"
    assert plan["tags"] == {
        "dtfbench-cluster": "study",
        "dtfbench-owner": "alice",
        "dtfbench-expiry": "2026-11-23T10:00:00Z",
        "created-by": "dtfbench",
    }
    assert plan["resource_name"] == plan["key_name"] == "dtfbench-study" and plan["manage_key"]
    # The TF ports come from the layout's bases: 8 workers on a p2.8xlarge, 8 PS ports.
    assert plan["tf_port_ranges"] == [
        [DEFAULT_WORKER_PORT_BASE, DEFAULT_WORKER_PORT_BASE + 7],
        [DEFAULT_PS_PORT_BASE, DEFAULT_PS_PORT_BASE + 7],
    ]
    ssh, *tf = plan["security_group_rules"]
    assert ssh == {
        "proto": "tcp",
        "from_port": 22,
        "to_port": 22,
        "cidr_ip": "203.0.113.7/32",
        "rule_desc": "SSH from ssh_cidr",
    }
    assert all(rule["group_name"] == "dtfbench-study" and "cidr_ip" not in rule for rule in tf)


def test_overlapping_port_ranges_merge():
    # p2.16xlarge: 16 workers from 2220 run into the PS ports from 2230.
    plan = plan_cluster(request(instance_type="p2.16xlarge"), NOW)
    assert plan["tf_port_ranges"] == [[2220, 2237]]


def test_the_profile_follows_the_type():
    assert plan_cluster(request(instance_type="g5.xlarge"), NOW)["node_profile"] == "current"
    refused(r"node_profile=current does not support instance_type=p2.xlarge.*cscs2017", node_profile="current")


@pytest.mark.parametrize("given, kept", [("203.0.113.7", "203.0.113.7/32"), ("10.0.0.0/8", "10.0.0.0/8")])
def test_ssh_cidr_forms(given, kept):
    assert plan_cluster(request(ssh_cidr=given), NOW)["ssh_cidr"] == kept


def test_ssh_cidr_refusals():
    refused(r"ssh_cidr is not set", ssh_cidr="")
    refused(r"ssh_cidr=203.0.113.7/24 has host bits set; did you mean 203.0.113.0/24", ssh_cidr="203.0.113.7/24")
    refused(r"ssh_cidr=nowhere is not an IPv4 address", ssh_cidr="nowhere")
    refused(r"whole internet.*ssh_cidr_allow_anywhere=true", ssh_cidr="0.0.0.0/0")
    assert plan_cluster(request(ssh_cidr="0.0.0.0/0", ssh_cidr_allow_anywhere=True), NOW)["ssh_cidr"] == "0.0.0.0/0"


def test_count_and_guard():
    refused(r"both set; give one", gpus=2)
    refused(r"neither instance_count nor gpus is set.*gpus=2", instance_count="")
    refused(r"instance_count must be a whole number, got 'two'", instance_count="two")
    refused(r"instance_count=0: a cluster needs at least 1 instance", instance_count=0)
    refused(r"9 instances of p2.xlarge exceed max_instances=8.*-e max_instances=9", instance_count=9)
    assert plan_cluster(request(instance_count=9, allow_more_instances=True), NOW)["instance_count"] == 9
    assert plan_cluster(request(instance_count=9, max_instances=9), NOW)["instance_count"] == 9


def test_other_refusals(tmp_path):
    refused(r"cluster_name='a_b' is not usable", cluster_name="a_b")
    refused(r"cluster_name='x-' is not usable", cluster_name="x-")
    refused(r"spot_max_price=0.5 is set but spot is false", spot_max_price="0.5")
    refused(r"spot_max_price=cheap must be a price", spot=True, spot_max_price="cheap")
    refused(r"root_volume_size=4 must be 8 to 16384", root_volume_size=4)
    refused(r"region='mars' is not an AWS region name", region="mars")
    refused(r"expiry_hours=0 must be above 0", expiry_hours=0)
    refused(r"ami='ubuntu' is not an AMI id", ami="ubuntu")
    refused(r"vpc_subnet_id='net-1' is not a subnet id", vpc_subnet_id="net-1")
    refused(r"subnet_cidr=10.9.0.0/24 must lie inside vpc_cidr=10.42.0.0/16", subnet_cidr="10.9.0.0/24")
    refused(
        r"subnet_cidr=10.42.0.0/29 holds 3 usable addresses, fewer than 4", subnet_cidr="10.42.0.0/29", instance_count=4
    )
    refused(r"key_name=mine and public_key_file are both set", key_name="mine", public_key_file="/x.pub")
    refused(r"public_key_file=/nonexistent.pub does not exist", public_key_file="/nonexistent.pub")
    private = tmp_path / "id_rsa"
    private.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n")
    refused(r"is not an OpenSSH public key.*never the private key", public_key_file=str(private))
    public = tmp_path / "id.pub"
    public.write_text("ssh-ed25519 AAAAC3Nza test\n")
    plan = plan_cluster(request(public_key_file=str(public)), NOW)
    assert plan["public_key_file"] == str(public) and plan["manage_key"]


def test_teardown_and_expiry_need_little():
    plan = plan_cluster(
        {"state": "absent", "cluster_name": "study", "region": "eu-west-1", "output_dir": "/tmp/o", "key_name": "mine"}
    )
    assert plan == {
        "cluster_name": "study",
        "resource_name": "dtfbench-study",
        "cluster_tag": "dtfbench-cluster",
        "key_name": "mine",
        "manage_key": False,
        "region": "eu-west-1",
        "output_dir": "/tmp/o",
    }
    assert plan_cluster({"state": "expired", "region": "us-east-2"}) == {
        "region": "us-east-2",
        "cluster_tag": "dtfbench-cluster",
    }
    with pytest.raises(PlanError, match="cluster_name=''"):
        plan_cluster({"state": "absent", "cluster_name": "", "region": "us-east-1", "output_dir": "/o"})
