"""EC2 GPU instance types and the node profiles (driver/CUDA/TF stacks) that run on them.

One table, read by everything that needs to know what a type offers: the AWS planning
logic (``dtfbench.plan.aws``, behind ``library/aws_cluster_plan.py``), the ``aws_ec2`` inventory the provisioning writes
(its ``tf_devices`` is generated from :data:`INSTANCE_TYPES`), the node roles (which stack a
profile installs) and ``docs/aws.md``. Pure standard library, no TensorFlow: Ansible
imports it on the controller.

Figures are AWS's published ones (GPU memory per GPU in GiB; compute capability from
NVIDIA's tables). ``instance_store`` says whether the type has local NVMe instance-store
disks (the dataset role formats and mounts them when asked).
"""

import argparse
from collections import namedtuple

__all__ = [
    "Ec2TypeError",
    "InstanceType",
    "NodeProfile",
    "INSTANCE_TYPES",
    "NODE_PROFILES",
    "instance_type",
    "instances_for_gpus",
    "node_profile",
    "profiles_for_type",
    "check_profile_supports",
    "tf_devices_by_type",
]


class Ec2TypeError(ValueError):
    """A type, GPU count or profile that does not fit; the message says what to change."""


InstanceType = namedtuple(
    "InstanceType", ["name", "gpus", "gpu_model", "gpu_memory_gib", "compute_capability", "vcpus", "instance_store"]
)

INSTANCE_TYPES = {
    t.name: t
    for t in (
        # Kepler K80 (the study's types): CUDA <= 11 only.
        InstanceType("p2.xlarge", 1, "K80", 12, (3, 7), 4, False),
        InstanceType("p2.8xlarge", 8, "K80", 12, (3, 7), 32, False),
        InstanceType("p2.16xlarge", 16, "K80", 12, (3, 7), 64, False),
        # Volta V100.
        InstanceType("p3.2xlarge", 1, "V100", 16, (7, 0), 8, False),
        InstanceType("p3.8xlarge", 4, "V100", 16, (7, 0), 32, False),
        InstanceType("p3.16xlarge", 8, "V100", 16, (7, 0), 64, False),
        # Turing T4.
        InstanceType("g4dn.xlarge", 1, "T4", 16, (7, 5), 4, True),
        InstanceType("g4dn.2xlarge", 1, "T4", 16, (7, 5), 8, True),
        InstanceType("g4dn.4xlarge", 1, "T4", 16, (7, 5), 16, True),
        InstanceType("g4dn.8xlarge", 1, "T4", 16, (7, 5), 32, True),
        InstanceType("g4dn.12xlarge", 4, "T4", 16, (7, 5), 48, True),
        InstanceType("g4dn.16xlarge", 1, "T4", 16, (7, 5), 64, True),
        InstanceType("g4dn.metal", 8, "T4", 16, (7, 5), 96, True),
        # Ampere A10G.
        InstanceType("g5.xlarge", 1, "A10G", 24, (8, 6), 4, True),
        InstanceType("g5.2xlarge", 1, "A10G", 24, (8, 6), 8, True),
        InstanceType("g5.4xlarge", 1, "A10G", 24, (8, 6), 16, True),
        InstanceType("g5.8xlarge", 1, "A10G", 24, (8, 6), 32, True),
        InstanceType("g5.12xlarge", 4, "A10G", 24, (8, 6), 48, True),
        InstanceType("g5.16xlarge", 1, "A10G", 24, (8, 6), 64, True),
        InstanceType("g5.24xlarge", 4, "A10G", 24, (8, 6), 96, True),
        InstanceType("g5.48xlarge", 8, "A10G", 24, (8, 6), 192, True),
        # Ampere A100 and Hopper H100.
        InstanceType("p4d.24xlarge", 8, "A100", 40, (8, 0), 96, True),
        InstanceType("p5.48xlarge", 8, "H100", 80, (9, 0), 192, True),
    )
}


NodeProfile = namedtuple(
    "NodeProfile",
    [
        "name",
        "description",
        "os",
        "cuda",
        "cudnn",
        "tensorflow",
        "python",
        "min_compute_capability",
        "max_compute_capability",
        "ami_owner",
        "ami_name",
        "ssh_user",
    ],
)

# What a node runs. The node roles (nvidia_stack, tf_virtualenv) install what the profile
# says; the planning refuses a type whose GPUs the profile's CUDA cannot drive, before
# anything is launched. ``max_compute_capability`` None: no upper bound known.
NODE_PROFILES = {
    p.name: p
    for p in (
        NodeProfile(
            name="cscs2017",
            description="the 2017 study's stack: Ubuntu 16.04, CUDA 8.0, cuDNN 5.1 (a tarball the "
            "user supplies), tensorflow-gpu 1.1.0",
            os="ubuntu-16.04",
            cuda="8.0",
            cudnn="5.1",
            tensorflow="tensorflow-gpu==1.1.0",
            python="python3",
            # CUDA 8.0 builds for Kepler (3.x) to Pascal (6.x); it has no sm_70, so Volta
            # and newer GPUs are out of its reach.
            min_compute_capability=(3, 0),
            max_compute_capability=(6, 2),
            ami_owner="099720109477",
            ami_name="ubuntu/images/hvm-ssd/ubuntu-xenial-16.04-amd64-server-*",
            ssh_user="ubuntu",
        ),
        NodeProfile(
            name="current",
            description="today's stack: the distribution's NVIDIA driver, CUDA 12 and cuDNN from "
            "TensorFlow's pip wheels (tensorflow[and-cuda])",
            os="ubuntu-22.04",
            cuda="12",
            cudnn="9",
            tensorflow="tensorflow[and-cuda]>=2.16",
            python="python3",
            # CUDA 12 dropped Kepler: compute capability 5.0 (Maxwell) is the oldest it drives.
            min_compute_capability=(5, 0),
            max_compute_capability=None,
            ami_owner="099720109477",
            ami_name="ubuntu/images/hvm-ssd/ubuntu-jammy-22.04-amd64-server-*",
            ssh_user="ubuntu",
        ),
    )
}


def _known_types():
    return ", ".join(sorted(INSTANCE_TYPES))


def _cc(capability):
    return "%d.%d" % capability


def instance_type(name):
    """The :class:`InstanceType` of ``name``; Ec2TypeError naming the known ones otherwise."""
    try:
        return INSTANCE_TYPES[name]
    except (KeyError, TypeError):
        raise Ec2TypeError(
            "instance_type %r is not a known EC2 GPU instance type; known: %s" % (name, _known_types())
        ) from None


def instances_for_gpus(type_name, gpus):
    """How many instances of ``type_name`` give exactly ``gpus`` GPUs."""
    itype = instance_type(type_name)
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise Ec2TypeError("gpus must be a positive integer, got %r" % (gpus,))
    if gpus % itype.gpus:
        lower = (gpus // itype.gpus) * itype.gpus
        upper = lower + itype.gpus
        choices = " or ".join(str(g) for g in (lower, upper) if g > 0)
        raise Ec2TypeError(
            "gpus=%d is not a multiple of the %d GPUs of one %s; ask for %s, or give "
            "instance_count instead" % (gpus, itype.gpus, type_name, choices)
        )
    return gpus // itype.gpus


def node_profile(name):
    try:
        return NODE_PROFILES[name]
    except (KeyError, TypeError):
        raise Ec2TypeError(
            "node_profile %r is unknown; choose one of %s" % (name, ", ".join(sorted(NODE_PROFILES)))
        ) from None


def _supports(profile, itype):
    capability = itype.compute_capability
    if capability < profile.min_compute_capability:
        return False
    return profile.max_compute_capability is None or capability <= profile.max_compute_capability


def profiles_for_type(type_name):
    """Names of the profiles whose CUDA drives the GPUs of ``type_name``, sorted."""
    itype = instance_type(type_name)
    return sorted(p.name for p in NODE_PROFILES.values() if _supports(p, itype))


def check_profile_supports(profile_name, type_name):
    """Nothing when ``profile_name`` runs on ``type_name``; Ec2TypeError saying why not and
    which profile (or types) would."""
    profile = node_profile(profile_name)
    itype = instance_type(type_name)
    if _supports(profile, itype):
        return
    working = profiles_for_type(type_name)
    capability = itype.compute_capability
    if capability < profile.min_compute_capability:
        why = "its CUDA %s needs compute capability >= %s and the %s GPUs of %s have %s" % (
            profile.cuda,
            _cc(profile.min_compute_capability),
            itype.gpu_model,
            type_name,
            _cc(capability),
        )
    else:
        why = "its CUDA %s drives GPUs up to compute capability %s and the %s GPUs of %s have %s" % (
            profile.cuda,
            _cc(profile.max_compute_capability),
            itype.gpu_model,
            type_name,
            _cc(capability),
        )
    if working:
        fix = "use node_profile=%s for %s" % (" or ".join(working), type_name)
    else:
        fix = "no profile supports %s" % type_name
    types = sorted(t.name for t in INSTANCE_TYPES.values() if _supports(profile, t))
    raise Ec2TypeError(
        "node_profile=%s does not support instance_type=%s: %s; %s, or choose "
        "a type it supports (%s)" % (profile_name, type_name, why, fix, ", ".join(types))
    )


def tf_devices_by_type():
    """{type name: GPUs}: what the generated aws_ec2 inventory composes ``tf_devices`` from."""
    return {name: t.gpus for name, t in sorted(INSTANCE_TYPES.items())}


def markdown_table():
    """The type table of docs/aws.md (``python -m dtfbench ec2_types``)."""
    lines = [
        "| type | GPUs | GPU | GPU memory (GiB) | compute capability | vCPUs | instance-store NVMe | profiles |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted(INSTANCE_TYPES, key=lambda n: (n.split(".")[0], INSTANCE_TYPES[n].vcpus)):
        t = INSTANCE_TYPES[name]
        lines.append(
            "| %s | %d | %s | %d | %s | %d | %s | %s |"
            % (
                name,
                t.gpus,
                t.gpu_model,
                t.gpu_memory_gib,
                _cc(t.compute_capability),
                t.vcpus,
                "yes" if t.instance_store else "no",
                ", ".join(profiles_for_type(name)) or "none",
            )
        )
    return "\n".join(lines)


def main(argv=None):
    """``python -m dtfbench ec2_types``: print the type table (paste it into docs/aws.md)."""
    argparse.ArgumentParser(prog="dtfbench ec2_types", description=main.__doc__).parse_args(argv)
    print(markdown_table())
    return 0
