# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""Inventory from two pasted address lists: public (SSH) and private (TF traffic)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: ip_pairs
short_description: TF nodes from two address files, public (for SSH) and private (for TF traffic)
description:
  - Builds the TF nodes of a benchmark from the two files that users of the 2017 study filled by
    hand after launching EC2 instances, C(aws_public_ips.txt) and C(aws_private_ips.txt), one
    address a line, line i of one belonging to the same instance as line i of the other.
  - Each pair becomes one host in O(group), in file order (the order the cluster layout fills
    the hosts in), with C(ansible_host) set to the public address (Ansible connects over it)
    and C(private_ip) to the private address (the cluster layout puts TF traffic on it,
    avoiding a hop through the public network). C(public_ip) is set too.
  - Hosts are named C(<name_prefix>01), C(<name_prefix>02), ... in file order (two digits, more
    when there are more than 99 hosts), or by their public address with O(host_names=public_ip).
  - The files may hold blank lines, leading and trailing spaces and tabs, Windows line ends
    (CRLF), a UTF-8 byte order mark and comments (C(#) to the end of the line). Anything else
    that is not one IPv4 address on a line is an error, as are an address that appears twice in
    one file, the public address of one host given as the private address of another, and
    files with different numbers of addresses; every error names the file and the line.
  - The config file is YAML, its name ends in C(ip_pairs.yml) or C(ip_pairs.yaml) and it starts
    with C(plugin) set to C(ip_pairs). The project's C(ansible.cfg) enables the plugin
    (C([inventory] enable_plugins)) and finds it in C(plugins/inventory).
  - Connection settings (C(ansible_user), C(ansible_ssh_private_key_file), the interpreter,
    C(dtfbench_python)) are not this plugin's business; put them in C(group_vars/<group>.yml)
    next to the config file, or set them with O(compose).
author: dtfbench developers
version_added: "0.1.0"
options:
  plugin:
    description: Marks the file as this plugin's configuration.
    required: true
    type: str
    choices: [ip_pairs]
  public_ips_file:
    description:
      - File of public addresses, one a line; the hosts' C(ansible_host).
      - A relative path is taken relative to the folder of the config file; C(~) is expanded.
    type: str
    default: aws_public_ips.txt
  private_ips_file:
    description:
      - File of private addresses, one a line, in the same order as O(public_ips_file); the
        hosts' C(private_ip), the address the cluster layout gives TF.
      - A relative path is taken relative to the folder of the config file; C(~) is expanded.
    type: str
    default: aws_private_ips.txt
  group:
    description: Group that gets every host (the benchmark's and launcher's C(tf_nodes)).
    type: str
    default: tf_nodes
  host_names:
    description:
      - V(index) names the hosts C(<name_prefix>NN) by their line in the files (1-based, in
        order); V(public_ip) names them by their public address.
    type: str
    choices: [index, public_ip]
    default: index
  name_prefix:
    description: Prefix of the host names with O(host_names=index).
    type: str
    default: node
  tf_devices:
    description:
      - Device slots per host (GPUs, or CPU worker slots with O(tf_device_type=cpu)); sets
        C(tf_devices) on every host.
      - Takes precedence over O(instance_type). When neither is given, C(tf_devices) is not set
        here (set it in C(group_vars), or the benchmark stops and says so).
    type: int
  instance_type:
    description:
      - EC2 instance type of every host; sets C(tf_devices) to its GPUs when O(tf_devices) is
        not given. The known types are those of the project's table
        (C(python -m dtfbench ec2_types), docs/aws.md) - p2, p3, g4dn, g5, p4d and p5. Another
        type is an error; give O(tf_devices) for it.
    type: str
  tf_device_type:
    description:
      - Sets C(tf_device_type) on every host. When not given, nothing is set (the layout's
        default is V(gpu)).
    type: str
    choices: [gpu, cpu]
extends_documentation_fragment:
  - constructed
notes:
  - Only IPv4 addresses, since the cluster layout writes TF endpoints as C(address:port).
  - Host variables set by this plugin take precedence over C(group_vars) of the same name.
"""

EXAMPLES = r"""
# inventories/aws/cluster.ip_pairs.yml, next to aws_public_ips.txt and aws_private_ips.txt:
plugin: ip_pairs
instance_type: p2.xlarge

---
# Elsewhere, other names, 8 CPU worker slots per host, groups by address:
plugin: ip_pairs
public_ips_file: ~/ec2/public.txt
private_ips_file: ~/ec2/private.txt
tf_devices: 8
tf_device_type: cpu
compose:
  ansible_user: "'ubuntu'"
keyed_groups:
  - key: private_ip.split('.')[2]
    prefix: subnet
"""

import ipaddress
import os

from ansible import constants as C
from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Constructable

# dtfbench is installed in ansible-playbook's Python (make setup: the project's .venv).
from dtfbench.plan.ec2_types import tf_devices_by_type

# GPUs per EC2 instance type: the project's one table (src/dtfbench/plan/ec2_types.py), the same
# that provision-aws.yml and its generated aws_ec2 inventory use.
GPUS_PER_INSTANCE_TYPE = tf_devices_by_type()

CONFIG_SUFFIXES = ("ip_pairs.yml", "ip_pairs.yaml")


def read_addresses(path, label):
    """[(line number, IPv4 address string)] of one file; AnsibleParserError on bad input.

    `label` names the file in messages (as the user wrote it in the config).
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise AnsibleParserError(f"{label}: no such file ({path})") from None
    except OSError as err:
        raise AnsibleParserError(f"{label}: cannot read {path}: {err.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise AnsibleParserError(f"{label} line {line}: not UTF-8 text") from None

    found = []
    seen = {}
    # split("\n") and strip: CRLF and lone CRs at the line ends go with the whitespace.
    for number, line in enumerate(text.split("\n"), start=1):
        content = line.split("#", 1)[0].strip()
        if not content:
            continue
        try:
            address = ipaddress.IPv4Address(content)
        except ValueError:
            hint = ""
            if len(content.split()) > 1:
                hint = " (one address a line)"
            elif ":" in content:
                hint = " (an IPv4 address without a port)"
            raise AnsibleParserError(f"{label} line {number}: {content!r} is not an IPv4 address{hint}") from None
        if address.is_unspecified or address.is_multicast or address == ipaddress.IPv4Address("255.255.255.255"):
            raise AnsibleParserError(f"{label} line {number}: {content} is not a host address")
        key = str(address)
        if key in seen:
            raise AnsibleParserError(f"{label} line {number}: {key} is already on line {seen[key]}")
        seen[key] = number
        found.append((number, key))
    return found


class InventoryModule(BaseInventoryPlugin, Constructable):
    NAME = "ip_pairs"
    # What a broken config does: None follows Ansible's settings (below); False always raises
    # AnsibleParserError (the unit tests); True always ends the command with the one message.
    end_on_error = None

    def verify_file(self, path):
        return super().verify_file(path) and path.endswith(CONFIG_SUFFIXES)

    def parse(self, inventory, loader, path, cache=True):
        """Ansible tries every enabled plugin that wants a file and, when none parses it, shows
        each one's failure: for an *.ip_pairs.yml, ours, auto's (which runs ours again), yaml's
        and ini's (they take any .yml / any file), then "No inventory was parsed": 38 lines for
        one mistake. No setting stops at the first failure (enable_plugins only narrows the
        plugins, verify_file only claims files, unparsed_is_failed only adds the last line). So
        where Ansible is set to fail on a broken inventory (unparsed_is_failed, as this
        project's ansible.cfg sets, or any_unparsed_is_failed), ours ends the command here with
        its message, once, naming the config, the file and the line; otherwise it raises as
        usual and Ansible warns and goes on."""
        try:
            self._parse(inventory, loader, path, cache)
        except AnsibleParserError as err:
            end = self.end_on_error
            if end is None:
                end = C.INVENTORY_UNPARSED_IS_FAILED or C.INVENTORY_ANY_UNPARSED_IS_FAILED
            if not end:
                raise
            self.display.error(f"ip_pairs inventory {path}: {err.message}", wrap_text=False)
            raise SystemExit(1) from None

    def _parse(self, inventory, loader, path, cache):
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        base = os.path.dirname(os.path.abspath(path))

        def resolve(option):
            value = self.get_option(option)
            if not value:
                raise AnsibleParserError(f"{path}: {option} is empty")
            full = os.path.expanduser(value)
            return value, (full if os.path.isabs(full) else os.path.join(base, full))

        public_label, public_path = resolve("public_ips_file")
        private_label, private_path = resolve("private_ips_file")
        public = read_addresses(public_path, public_label)
        private = read_addresses(private_path, private_label)

        if not public:
            raise AnsibleParserError(f"{public_label}: no addresses in {public_path}")
        if len(public) != len(private):
            shorter, longer = (private, public) if len(private) < len(public) else (public, private)
            short_label, long_label = (
                (private_label, public_label) if shorter is private else (public_label, private_label)
            )
            line, address = longer[len(shorter)]
            raise AnsibleParserError(
                f"{long_label} line {line}: {address} has no partner: {long_label} holds {len(longer)} "
                f"addresses, {short_label} {len(shorter)}; line i of one file must belong to the same "
                f"host as line i of the other"
            )

        # One address, two hosts (the public one of a host is another one's private one): a
        # line slipped in one of the files.
        owner = {address: (line, i) for i, (line, address) in enumerate(public)}
        for i, (line, address) in enumerate(private):
            if address in owner and owner[address][1] != i:
                raise AnsibleParserError(
                    f"{private_label} line {line}: {address} is also on line {owner[address][0]} of "
                    f"{public_label}, as the public address of another host"
                )

        devices = self.get_option("tf_devices")
        instance_type = self.get_option("instance_type")
        if devices is None and instance_type:
            if instance_type not in GPUS_PER_INSTANCE_TYPE:
                known = ", ".join(f"{k} {v}" for k, v in GPUS_PER_INSTANCE_TYPE.items())
                raise AnsibleParserError(
                    f"{path}: instance_type {instance_type!r} is unknown (known, with "
                    f"their GPUs: {known}); set tf_devices instead"
                )
            devices = GPUS_PER_INSTANCE_TYPE[instance_type]
        if devices is not None and devices < 0:
            raise AnsibleParserError(f"{path}: tf_devices {devices} is negative")
        device_type = self.get_option("tf_device_type")

        group = self.inventory.add_group(self.get_option("group"))
        naming = self.get_option("host_names")
        prefix = self.get_option("name_prefix")
        width = max(2, len(str(len(public))))
        strict = self.get_option("strict")

        for index, ((_, public_ip), (_, private_ip)) in enumerate(zip(public, private), start=1):
            name = public_ip if naming == "public_ip" else f"{prefix}{index:0{width}d}"
            self.inventory.add_host(name, group=group)
            variables = {"ansible_host": public_ip, "public_ip": public_ip, "private_ip": private_ip}
            if devices is not None:
                variables["tf_devices"] = devices
            if device_type:
                variables["tf_device_type"] = device_type
            if instance_type:
                variables["instance_type"] = instance_type
            for key, value in variables.items():
                self.inventory.set_variable(name, key, value)

            hostvars = self.inventory.get_host(name).get_vars()
            self._set_composite_vars(self.get_option("compose"), hostvars, name, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), hostvars, name, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), hostvars, name, strict=strict)
