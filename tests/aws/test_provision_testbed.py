"""provision-aws.yml end to end: instances in moto, configured over real SSH on the test bed.

moto's instances have no machines behind them (and their public addresses are real AWS
ones: never connected to). So the test maps each instance's private address onto a host
of the SSH test bed (`ssh_address_map`, the same variable that serves a VPN or a bastion)
and lets provision-aws.yml do all of its work for real: launch, wait for SSH, write the
inventories, configure the nodes over SSH. The test-bed hosts have no GPUs, while a
g4dn.xlarge node must show one: configuration fails on every node, and provision-aws.yml
must then tear the whole cluster down and name the nodes and why.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
import testbed as tb
from aws_cluster import MOTO_VARS, SSH_CIDR, ec2_client, instances
from playbook_harness import run_playbook
from testbed_fixtures import testbed_factory  # noqa: F401

pytestmark = [pytest.mark.ansible]


# The cluster's own subnet (aws_cluster_subnet_cidr's default), where its instances' private
# addresses come from.
SUBNET = ipaddress.ip_network("10.42.0.0/24")


def provision_onto_testbed(aws_env, bed, tmp_path, cluster_name, **extra):
    """provision-aws.yml of two g4dn.xlarge nodes, each instance reached at a test-bed host.

    Returns the finished ansible-playbook process and its output."""
    # moto has no Ubuntu 22.04 image, the profile's default: any image of its catalogue will do.
    ami = ec2_client(aws_env).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    request = {
        "ami": ami,
        "cluster_name": cluster_name,
        "instance_type": "g4dn.xlarge",
        "instance_count": 2,
        "node_profile": "current",
        "ssh_cidr": SSH_CIDR,
        "output_dir": str(tmp_path / cluster_name),
    }
    # Every address of the subnet maps onto the test-bed hosts in turn: moto gives a new
    # subnet's instances consecutive addresses (after the 3 AWS reserves), so the two instances
    # reach the two hosts, and one run launches and configures them (no launch beforehand to
    # learn the addresses).
    address_map = {str(ip): bed.public_ips[index % len(bed.public_ips)] for index, ip in enumerate(SUBNET.hosts())}

    # The test bed's connection settings (root, its key, its known_hosts) as extra variables:
    # they must beat the ubuntu user and EC2 key that provisioning gives the nodes.
    test_bed = tb.connection_vars(bed.state)
    connection = {
        key: test_bed[key]
        for key in (
            "ansible_user",
            "ansible_ssh_private_key_file",
            "ansible_ssh_common_args",
            "ansible_python_interpreter",
        )
    }
    full = dict(
        request,
        configure_nodes=True,
        aws_wait_for_ssh=True,
        ssh_address_map=address_map,
        **connection,
        **extra,
    )
    done = run_playbook("provision-aws.yml", "-e", json.dumps(dict(MOTO_VARS, **full)), env=aws_env, timeout=900)
    return done, done.output


def test_nodes_that_cannot_be_configured_tear_the_cluster_down(aws_env, testbed_factory, tmp_path):
    bed = testbed_factory(hosts=2)
    done, out = provision_onto_testbed(aws_env, bed, tmp_path, "mapped")
    flat = " ".join(out.split())
    assert done.returncode != 0, out[-4000:]
    # Both nodes were reached over SSH (their hostnames are the test bed's) and refused.
    assert "configuring 2 node(s) failed" in flat, out[-4000:]
    assert "The cluster was torn down." in flat
    # Only the launched instances were configured, not the other hosts of tf_nodes (the
    # project's local inventory puts localhost there).
    configure_play = out.split("PLAY [Configure the TF nodes]", 1)[1].split("\nPLAY [", 1)[0]
    assert "[localhost]" not in configure_play, configure_play[-3000:]
    # Each node's own reason, from nvidia_stack on that node: a g4dn.xlarge shows 1 GPU, these none.
    for instance_id in (line.split()[0] for line in out.splitlines() if line.startswith("i-")):
        assert f"{instance_id} (" in flat
    assert flat.count("expected 1 GPU(s), nvidia-smi lists none") >= 2, out[-4000:]
    assert instances(aws_env, "mapped") == []
    assert len(instances(aws_env, "mapped", states=("shutting-down", "terminated"))) == 2


def test_nodes_lost_during_configuration_still_tear_the_cluster_down(aws_env, testbed_factory, tmp_path):
    """Every node answers the first probe, then no SSH connection reaches it any more (its
    SSH port, a connection variable, moves to a closed one once the probe is registered).
    Unreachable nodes leave the play; when all of them had, Ansible ended the run before the
    teardown play and the instances kept running. The play keeper holds the play open."""
    bed = testbed_factory(hosts=2)
    lost = {"ansible_port": "{{ 22 if configure_nodes_reach is not defined else 1 }}"}
    done, out = provision_onto_testbed(aws_env, bed, tmp_path, "lost", **lost)
    flat = " ".join(out.split())
    assert done.returncode != 0, out[-4000:]
    recap = out.rsplit("PLAY RECAP", 1)[1]
    assert recap.count("unreachable=1") == 2, recap
    assert "PLAY [Tear down when a node could not be configured]" in out, out[-4000:]
    assert "configuring 2 node(s) failed" in flat and "(failed or unreachable)" in flat, out[-4000:]
    assert "The cluster was torn down." in flat
    assert instances(aws_env, "lost") == []
    assert len(instances(aws_env, "lost", states=("shutting-down", "terminated"))) == 2
