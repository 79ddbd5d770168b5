"""EC2 GPU types and node profiles (dtfbench ec2_types): the table, GPU arithmetic, support."""

import os

import pytest

from dtfbench.plan.ec2_types import (
    INSTANCE_TYPES,
    NODE_PROFILES,
    Ec2TypeError,
    check_profile_supports,
    instance_type,
    instances_for_gpus,
    markdown_table,
    node_profile,
    profiles_for_type,
    tf_devices_by_type,
)


@pytest.mark.parametrize(
    "name, gpus, model, capability",
    [
        ("p2.xlarge", 1, "K80", (3, 7)),
        ("p2.8xlarge", 8, "K80", (3, 7)),
        ("p2.16xlarge", 16, "K80", (3, 7)),
        ("p3.2xlarge", 1, "V100", (7, 0)),
        ("p3.8xlarge", 4, "V100", (7, 0)),
        ("p3.16xlarge", 8, "V100", (7, 0)),
        ("g4dn.xlarge", 1, "T4", (7, 5)),
        ("g4dn.12xlarge", 4, "T4", (7, 5)),
        ("g5.xlarge", 1, "A10G", (8, 6)),
        ("g5.48xlarge", 8, "A10G", (8, 6)),
        ("p4d.24xlarge", 8, "A100", (8, 0)),
        ("p5.48xlarge", 8, "H100", (9, 0)),
    ],
)
def test_table_holds_the_published_figures(name, gpus, model, capability):
    t = instance_type(name)
    assert (t.gpus, t.gpu_model, t.compute_capability) == (gpus, model, capability)


def test_instance_store_only_on_the_nvme_generations():
    assert not any(INSTANCE_TYPES[n].instance_store for n in INSTANCE_TYPES if n.startswith(("p2.", "p3.")))
    assert all(
        INSTANCE_TYPES[n].instance_store for n in INSTANCE_TYPES if n.startswith(("g4dn.", "g5.", "p4d.", "p5."))
    )


def test_every_row_is_consistent():
    for name, t in INSTANCE_TYPES.items():
        assert t.name == name and t.gpus >= 1 and t.vcpus >= 4 and t.gpu_memory_gib >= 12


def test_unknown_type_names_the_known_ones():
    with pytest.raises(Ec2TypeError, match=r"instance_type 'p9.huge' is not a known.*p2.xlarge"):
        instance_type("p9.huge")


@pytest.mark.parametrize(
    "name, gpus, count",
    [("p2.xlarge", 1, 1), ("p2.xlarge", 16, 16), ("p2.8xlarge", 16, 2), ("p2.16xlarge", 64, 4), ("p3.8xlarge", 12, 3)],
)
def test_instances_for_gpus(name, gpus, count):
    assert instances_for_gpus(name, gpus) == count


def test_gpus_not_a_multiple_says_what_would_be():
    with pytest.raises(Ec2TypeError) as error:
        instances_for_gpus("p2.8xlarge", 12)
    message = str(error.value)
    assert "gpus=12 is not a multiple of the 8 GPUs of one p2.8xlarge" in message
    assert "ask for 8 or 16" in message and "instance_count" in message
    with pytest.raises(Ec2TypeError, match="ask for 8;|ask for 8,"):
        instances_for_gpus("p2.8xlarge", 4)


@pytest.mark.parametrize("gpus", [0, -8, True, 1.5, "8"])
def test_gpus_must_be_a_positive_integer(gpus):
    with pytest.raises(Ec2TypeError, match="gpus must be a positive integer"):
        instances_for_gpus("p2.8xlarge", gpus)


def test_profiles_hold_the_stacks():
    old, new = node_profile("cscs2017"), node_profile("current")
    assert (old.cuda, old.cudnn, old.tensorflow, old.os) == ("8.0", "5.1", "tensorflow-gpu==1.1.0", "ubuntu-16.04")
    assert new.cuda.startswith("12") and "and-cuda" in new.tensorflow
    assert new.min_compute_capability == (5, 0)
    with pytest.raises(Ec2TypeError, match="node_profile 'x' is unknown; choose one of cscs2017, current"):
        node_profile("x")


def test_which_profile_runs_where():
    assert profiles_for_type("p2.xlarge") == ["cscs2017"]
    for name in ("p3.2xlarge", "g4dn.xlarge", "g5.xlarge", "p4d.24xlarge", "p5.48xlarge"):
        assert profiles_for_type(name) == ["current"], name
    # No type is left without a stack.
    assert all(profiles_for_type(name) for name in INSTANCE_TYPES)


def test_k80_with_current_profile_names_cscs2017():
    with pytest.raises(Ec2TypeError) as error:
        check_profile_supports("current", "p2.8xlarge")
    message = str(error.value)
    assert "node_profile=current does not support instance_type=p2.8xlarge" in message
    assert "compute capability >= 5.0" in message and "K80" in message and "3.7" in message
    assert "use node_profile=cscs2017" in message


def test_v100_with_cscs2017_is_refused():
    with pytest.raises(Ec2TypeError, match=r"up to compute capability 6\.2.*V100.*7\.0.*node_profile=current"):
        check_profile_supports("cscs2017", "p3.2xlarge")
    check_profile_supports("cscs2017", "p2.16xlarge")
    check_profile_supports("current", "g5.xlarge")


def test_tf_devices_by_type_is_the_table():
    devices = tf_devices_by_type()
    assert devices["p2.8xlarge"] == 8 and set(devices) == set(INSTANCE_TYPES)


def test_markdown_table_lists_every_type_once():
    table = markdown_table().splitlines()
    assert len(table) == 2 + len(INSTANCE_TYPES)
    assert "| p2.xlarge | 1 | K80 | 12 | 3.7 | 4 | no | cscs2017 |" in table


def test_profiles_are_named_by_their_keys():
    assert all(p.name == k for k, p in NODE_PROFILES.items())


def test_docs_table_is_current():
    docs = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "docs", "aws.md")
    with open(docs) as handle:
        assert markdown_table() in handle.read(), "docs/aws.md: paste `python -m dtfbench ec2_types`"
