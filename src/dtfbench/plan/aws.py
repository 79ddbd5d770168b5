"""The AWS cluster plan of provision-aws.yml / teardown-aws.yml: validated inputs -> what to create.

``plan_cluster(params)`` takes the ``aws_cluster_plan`` options and returns the plan (names, tags,
instance type and count, node profile, network, security group rules, TF port ranges) or
raises ``PlanError`` naming the input, the problem and the fix, before anything is created.
Controller; standard library only (also shipped as ``ansible.module_utils.dtfbench.plan``).
"""

import datetime
import ipaddress
import os
import re

from .ec2_types import (
    Ec2TypeError,
    check_profile_supports,
    instance_type,
    instances_for_gpus,
    node_profile,
    profiles_for_type,
    tf_devices_by_type,
)
from .errors import PlanError
from .layout import DEFAULT_PS_PORT_BASE, DEFAULT_WORKER_PORT_BASE

CLUSTER_TAG = "dtfbench-cluster"

# The options of the aws_cluster_plan action (library/aws_cluster_plan.py documents them).
ARGUMENT_SPEC = dict(
    state=dict(type="str", default="present", choices=["present", "absent", "expired"]),
    cluster_name=dict(type="str", default=""),
    instance_type=dict(type="str", default=""),
    instance_count=dict(type="raw"),
    gpus=dict(type="raw"),
    max_instances=dict(type="int", default=8),
    allow_more_instances=dict(type="bool", default=False),
    ssh_cidr=dict(type="str"),
    ssh_cidr_allow_anywhere=dict(type="bool", default=False),
    node_profile=dict(type="str", default=""),
    spot=dict(type="bool", default=False),
    spot_max_price=dict(type="str", default=""),
    root_volume_size=dict(type="int", default=200),
    region=dict(type="str", required=True),
    expiry_hours=dict(type="float", default=24),
    owner=dict(type="str", default=""),
    ami=dict(type="str", default=""),
    vpc_subnet_id=dict(type="str", default=""),
    vpc_cidr=dict(type="str", default="10.42.0.0/16"),
    subnet_cidr=dict(type="str", default="10.42.0.0/24"),
    key_name=dict(type="str", default=""),
    public_key_file=dict(type="str", default=""),
    output_dir=dict(type="str", default=""),
    tf_worker_port_base=dict(type="int"),
    tf_ps_port_base=dict(type="int"),
    tf_ps_ports=dict(type="int", default=8),
)

CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,38}[a-z0-9]$|^[a-z]$")
REGION = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-\d+$")
AMI = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?$")
SUBNET = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?$")
TAG_VALUE = re.compile(r"^[\w .:/=+@-]{1,256}$")


def _int(value, name, fix):
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise PlanError("%s must be a whole number, got %r; %s" % (name, value, fix))
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.match(r"^\s*\d+\s*$", value):
        return int(value)
    raise PlanError("%s must be a whole number, got %r; %s" % (name, value, fix))


def _ssh_cidr(value, allow_anywhere):
    if not value:
        raise PlanError(
            "ssh_cidr is not set: the security group opens SSH (port 22) only to this range; "
            "give your own address, e.g. -e ssh_cidr=$(curl -s https://checkip.amazonaws.com)/32"
        )
    try:
        network = ipaddress.IPv4Network(value.strip(), strict=True)
    except ipaddress.NetmaskValueError as error:
        raise PlanError(
            "ssh_cidr=%s has a bad prefix length (%s); write it as A.B.C.D/N, N from 0 to 32" % (value, error)
        ) from error
    except ValueError as error:
        if "host bits set" in str(error):
            suggestion = ipaddress.IPv4Network(value.strip(), strict=False)
            raise PlanError(
                "ssh_cidr=%s has host bits set; did you mean %s (the network) or "
                "%s/32 (the one address)?" % (value, suggestion, value.split("/")[0])
            ) from error
        raise PlanError(
            "ssh_cidr=%s is not an IPv4 address or CIDR range (%s); give e.g. 203.0.113.7/32" % (value, error)
        ) from error
    if network.prefixlen == 0 and not allow_anywhere:
        raise PlanError(
            "ssh_cidr=%s opens SSH to the whole internet; give the range you connect from "
            "(e.g. 203.0.113.7/32), or set ssh_cidr_allow_anywhere=true if you really mean it" % value
        )
    return str(network)


def _port_ranges(gpus_per_instance, worker_base, ps_base, ps_ports):
    """[[first, last], ...] of the TF ports a node of this type may listen on, merged."""
    ranges = sorted([[worker_base, worker_base + gpus_per_instance - 1], [ps_base, ps_base + ps_ports - 1]])
    merged = [ranges[0]]
    for first, last in ranges[1:]:
        if first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    for first, last in merged:
        if first < 1024 or last > 65535:
            raise PlanError(
                "tf_worker_port_base/tf_ps_port_base put TF ports at %d-%d, outside "
                "1024-65535; choose bases in that range" % (first, last)
            )
    return merged


def _region(params):
    region = params.get("region") or ""
    if not REGION.match(region):
        raise PlanError(
            "region=%r is not an AWS region name; give e.g. -e region=us-east-1 (or set AWS_REGION)" % (region,)
        )
    return region


def _cluster_name(params):
    name = params.get("cluster_name") or ""
    if not CLUSTER_NAME.match(name):
        raise PlanError(
            "cluster_name=%r is not usable: it names AWS resources and hosts, so it must be "
            "lower-case letters, digits and '-', start with a letter, not end with '-', at most "
            "40 characters; e.g. -e cluster_name=study-p2" % (name,)
        )
    return name


def _output_dir(params):
    output_dir = params.get("output_dir") or ""
    if not output_dir.strip():
        raise PlanError("output_dir is empty; give the folder for the IP files and inventories")
    return os.path.abspath(os.path.expanduser(output_dir))


def _names(name, key_name):
    resource = "dtfbench-%s" % name
    return {
        "cluster_name": name,
        "resource_name": resource,
        "cluster_tag": CLUSTER_TAG,
        "key_name": key_name or resource,
        "manage_key": not key_name,
    }


def plan_cluster(params, now=None):
    """The validated plan of ``params`` (the module's options); PlanError on bad input."""
    state = params.get("state") or "present"
    if state == "expired":
        return {"region": _region(params), "cluster_tag": CLUSTER_TAG}
    name = _cluster_name(params)
    if state == "absent":
        plan = _names(name, params.get("key_name") or "")
        plan.update(region=_region(params), output_dir=_output_dir(params))
        return plan
    return _present_plan(params, name, now or datetime.datetime.now(datetime.timezone.utc))


def _present_plan(params, name, now):
    """The plan of state=present: every option checked, in the order below (the first wrong one is named)."""
    itype = _instance_type(params)
    count = _instance_count(params, itype)
    ssh_cidr = _ssh_cidr(params.get("ssh_cidr"), params.get("ssh_cidr_allow_anywhere"))
    profile = _node_profile(params, itype)
    spot, max_price = _spot(params)
    root = _root_volume_size(params)
    region = _region(params)
    expiry = _expiry(params, now)
    owner = _owner(params)
    ami = _ami(params, profile)
    subnet, vpc_cidr, subnet_cidr = _network(params, count)
    key_name, public_key_file = _key(params)
    output_dir = _output_dir(params)
    ports = _tf_ports(params, itype)

    plan = _names(name, key_name)
    plan.update(
        {
            "instance_type": itype.name,
            "instance_count": count,
            "gpus_per_instance": itype.gpus,
            "gpus": count * itype.gpus,
            "gpu_model": itype.gpu_model,
            "node_profile": profile.name,
            "ssh_user": profile.ssh_user,
            "ami": ami,
            "ami_owner": profile.ami_owner,
            "ami_name": profile.ami_name,
            "ssh_cidr": ssh_cidr,
            "spot": spot,
            "spot_max_price": max_price,
            "root_volume_size": root,
            "region": region,
            "expiry": expiry,
            "owner": owner,
            "vpc_subnet_id": subnet,
            "vpc_cidr": str(vpc_cidr),
            "subnet_cidr": str(subnet_cidr),
            "public_key_file": public_key_file,
            "output_dir": output_dir,
            "tags": {CLUSTER_TAG: name, "dtfbench-owner": owner, "dtfbench-expiry": expiry, "created-by": "dtfbench"},
            "tf_port_ranges": ports,
            "tf_devices_by_type": tf_devices_by_type(),
            "security_group_rules": _security_group_rules(ssh_cidr, ports, plan["resource_name"]),
        }
    )
    return plan


def _instance_type(params):
    """The EC2 type of instance_type, from the table (ec2_types): its GPUs size the cluster."""
    try:
        return instance_type(params.get("instance_type"))
    except Ec2TypeError as error:
        raise PlanError("%s; set -e instance_type=... to one of them (docs/aws.md has the table)" % error) from error


def _instance_count(params, itype):
    """How many instances: instance_count, or gpus divided by the type's; within max_instances (the cost guard)."""
    count = _int(params.get("instance_count"), "instance_count", "give e.g. -e instance_count=2")
    gpus = _int(params.get("gpus"), "gpus", "give e.g. -e gpus=16")
    if count is not None and gpus is not None:
        raise PlanError(
            "instance_count=%d and gpus=%d are both set; give one: instance_count "
            "(instances) or gpus (GPUs in total, divided by the %d of one %s)" % (count, gpus, itype.gpus, itype.name)
        )
    if count is None and gpus is None:
        raise PlanError(
            "neither instance_count nor gpus is set; give one, e.g. "
            "-e instance_count=2 or -e gpus=%d" % (2 * itype.gpus)
        )
    if gpus is not None:
        try:
            count = instances_for_gpus(itype.name, gpus)
        except Ec2TypeError as error:
            raise PlanError(str(error)) from error
    if count < 1:
        raise PlanError("instance_count=%d: a cluster needs at least 1 instance" % count)

    max_instances = params.get("max_instances")
    if max_instances is None or max_instances < 1:
        raise PlanError("max_instances=%r must be at least 1" % (max_instances,))
    if count > max_instances and not params.get("allow_more_instances"):
        raise PlanError(
            "%d instances of %s exceed max_instances=%d (the cost guard); ask for fewer, or "
            "raise the guard with -e max_instances=%d (or -e allow_more_instances=true)"
            % (count, itype.name, max_instances, count)
        )
    return count


def _node_profile(params, itype):
    """The node profile (image, SSH user, drivers): node_profile, else the first that supports the type."""
    profile_name = params.get("node_profile") or ""
    if not profile_name:
        supported = profiles_for_type(itype.name)
        if not supported:
            raise PlanError("no node profile supports instance_type=%s" % itype.name)
        profile_name = supported[0]
    try:
        profile = node_profile(profile_name)
        check_profile_supports(profile_name, itype.name)
    except Ec2TypeError as error:
        raise PlanError(str(error)) from error
    return profile


def _spot(params):
    """(spot, spot_max_price): a maximum price only goes with spot, as a price in USD per hour."""
    spot = bool(params.get("spot"))
    max_price = (params.get("spot_max_price") or "").strip()
    if max_price:
        if not spot:
            raise PlanError(
                "spot_max_price=%s is set but spot is false; add -e spot=true or drop spot_max_price" % max_price
            )
        if not re.match(r"^\d+(\.\d+)?$", max_price) or float(max_price) <= 0:
            raise PlanError("spot_max_price=%s must be a price in USD per hour above 0, e.g. 0.45" % max_price)
    return spot, max_price


def _root_volume_size(params):
    """root_volume_size in GiB, within what EC2 takes for a root volume (8 to 16384)."""
    root = params.get("root_volume_size")
    if root is None or not 8 <= root <= 16384:
        raise PlanError("root_volume_size=%r must be 8 to 16384 (GiB)" % (root,))
    return root


def _expiry(params, now):
    """The expiry tag's UTC time, expiry_hours after `now`: teardown-aws.yml -e expired=true lists the cluster after it."""
    hours = params.get("expiry_hours")
    if hours is None or hours <= 0 or hours > 24 * 366:
        raise PlanError("expiry_hours=%r must be above 0 and at most a year (8784); e.g. 24" % (hours,))
    return (now + datetime.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _owner(params):
    """owner, stripped: it goes in a tag, so only the characters an AWS tag value takes."""
    owner = (params.get("owner") or "").strip()
    if not TAG_VALUE.match(owner):
        raise PlanError(
            "owner=%r must be 1-256 letters, digits, spaces or . : / = + @ - _; e.g. -e owner=alice" % (owner,)
        )
    return owner


def _ami(params, profile):
    """ami, an AMI id or empty (empty: the profile's image, looked up by its owner and name)."""
    ami = params.get("ami") or ""
    if ami and not AMI.match(ami):
        raise PlanError(
            "ami=%r is not an AMI id (ami- and 8 or 17 hex digits); leave it empty "
            "to use the %s profile's Ubuntu image" % (ami, profile.name)
        )
    return ami


def _network(params, count):
    """(vpc_subnet_id, vpc_cidr, subnet_cidr): an existing subnet's id or empty, and the networks of
    the VPC created without one, whose subnet must hold every instance."""
    subnet = params.get("vpc_subnet_id") or ""
    if subnet and not SUBNET.match(subnet):
        raise PlanError(
            "vpc_subnet_id=%r is not a subnet id (subnet- and hex digits); leave it "
            "empty to create a VPC for the cluster" % (subnet,)
        )
    try:
        vpc_cidr = ipaddress.IPv4Network(params.get("vpc_cidr") or "")
        subnet_cidr = ipaddress.IPv4Network(params.get("subnet_cidr") or "")
    except ValueError as error:
        raise PlanError("vpc_cidr/subnet_cidr must be IPv4 networks such as 10.42.0.0/16 (%s)" % error) from error
    if not subnet_cidr.subnet_of(vpc_cidr) or not 16 <= vpc_cidr.prefixlen <= 28:
        raise PlanError(
            "subnet_cidr=%s must lie inside vpc_cidr=%s, and vpc_cidr needs a prefix "
            "of /16 to /28" % (subnet_cidr, vpc_cidr)
        )
    # AWS keeps 5 addresses of every subnet.
    if subnet_cidr.num_addresses - 5 < count:
        raise PlanError(
            "subnet_cidr=%s holds %d usable addresses, fewer than %d instances; "
            "choose a larger subnet" % (subnet_cidr, subnet_cidr.num_addresses - 5, count)
        )
    return subnet, vpc_cidr, subnet_cidr


def _key(params):
    """(key_name, public_key_file): an existing key pair's name, or the path of an OpenSSH public key
    to import (never a private key), or neither (EC2 generates one); not both."""
    key_name = params.get("key_name") or ""
    public_key_file = params.get("public_key_file") or ""
    if key_name and public_key_file:
        raise PlanError(
            "key_name=%s and public_key_file are both set; key_name uses an existing "
            "key pair as it is, so drop one" % key_name
        )
    if public_key_file:
        path = os.path.expanduser(public_key_file)
        if not os.path.isfile(path):
            raise PlanError(
                "public_key_file=%s does not exist; give your OpenSSH public key "
                "(e.g. ~/.ssh/id_ed25519.pub) or leave it empty to let EC2 "
                "generate one" % public_key_file
            )
        with open(path) as handle:
            head = handle.read(200)
        if "PRIVATE KEY" in head or not re.match(r"^(ssh-(rsa|ed25519)|ecdsa-sha2-)", head):
            raise PlanError(
                "public_key_file=%s is not an OpenSSH public key (ssh-rsa ..., "
                "ssh-ed25519 ...); give the .pub file, never the private key" % public_key_file
            )
        public_key_file = path
    return key_name, public_key_file


def _tf_ports(params, itype):
    """The merged TF port ranges a node of the type listens on: one worker port per GPU, tf_ps_ports PS ports."""
    worker_base = params.get("tf_worker_port_base") or DEFAULT_WORKER_PORT_BASE
    ps_base = params.get("tf_ps_port_base") or DEFAULT_PS_PORT_BASE
    ps_ports = params.get("tf_ps_ports")
    if ps_ports is None or ps_ports < 1:
        raise PlanError("tf_ps_ports=%r must be at least 1" % (ps_ports,))
    return _port_ranges(itype.gpus, worker_base, ps_base, ps_ports)


def _security_group_rules(ssh_cidr, ports, group_name):
    """The security group's rules: SSH from ssh_cidr only; TF's gRPC (no authentication) only from the group itself."""
    return [{"proto": "tcp", "from_port": 22, "to_port": 22, "cidr_ip": ssh_cidr, "rule_desc": "SSH from ssh_cidr"}] + [
        {
            "proto": "tcp",
            "from_port": first,
            "to_port": last,
            "group_name": group_name,
            "rule_desc": "TensorFlow gRPC within the cluster",
        }
        for first, last in ports
    ]
