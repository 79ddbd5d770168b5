"""Fixtures of the AWS tests: a moto server (EC2 and S3) on loopback for the session."""

from __future__ import annotations

import pytest
from aws_cluster import PROVISION, TEARDOWN, Lifecycle, cluster_vars, ec2_client, instances, leftovers, moto_env
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
    return moto_env(ansible_env, moto)


@pytest.fixture(scope="session")
def spot_cluster(moto_session, ansible_env, tmp_path_factory):
    """One spot cluster (2 x p2.8xlarge for gpus=16), launched, torn down, then torn down again,
    read by two tests of two modules: test_provision.py's test_gpus_are_divided_by_the_type_and_
    spot_goes_through_a_launch_template (the launch) and test_teardown.py's test_teardown_leaves_
    nothing_and_twice_changes_nothing (the two teardowns). Both launched a spot cluster of two
    instances of their own, and a provision-aws.yml run costs half a minute or more. moto is
    emptied before every other test, so each step's state is read back right after it.

    launch     provision-aws.yml (spot, spot_max_price, root_volume_size, gpus over max_instances);
    teardown   teardown-aws.yml -v;
    again      teardown-aws.yml once more.
    A step whose playbook fails stops the life there; the steps after it are missing.
    """
    moto_session.reset()
    env = moto_env(ansible_env, moto_session)
    tmp_path = tmp_path_factory.mktemp("spot")
    out = tmp_path / "spotty"
    life = Lifecycle(tmp_path=tmp_path, out=out)
    ec2 = ec2_client(env)
    run = life.run

    # The guard (max_instances=1) raised explicitly: 2 instances are launched.
    request = cluster_vars(
        tmp_path,
        "spotty",
        instance_type="p2.8xlarge",
        spot=True,
        spot_max_price="0.90",
        root_volume_size=64,
        max_instances=1,
        allow_more_instances=True,
    )
    del request["instance_count"]
    request["gpus"] = 16
    launch = run("launch", PROVISION, env, request)
    if "stopped" in life:
        return life
    launch["running"] = running = instances(env, "spotty")
    launch["template"] = ec2.describe_launch_template_versions(LaunchTemplateName="dtfbench-spotty")[
        "LaunchTemplateVersions"
    ][0]
    volume_ids = [m["Ebs"]["VolumeId"] for i in running for m in i["BlockDeviceMappings"]]
    launch["volumes"] = ec2.describe_volumes(VolumeIds=volume_ids)["Volumes"]
    launch["inventory"] = (out / "spotty.aws_ec2.yml").read_text()
    launch["leftovers"] = leftovers(env)
    launch["files"] = {name: (out / name).exists() for name in ("aws_public_ips.txt", "spotty.pem")}

    teardown = run("teardown", TEARDOWN, env, {"cluster_name": "spotty", "output_dir": str(out)}, "-v")
    if "stopped" in life:
        return life
    teardown["leftovers"] = leftovers(env)
    teardown["terminated"] = instances(env, "spotty", states=("terminated",))
    teardown["listing"] = sorted(p.name for p in out.iterdir())

    run("again", TEARDOWN, env, {"cluster_name": "spotty", "output_dir": str(out)})
    return life
