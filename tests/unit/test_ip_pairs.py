"""The ip_pairs inventory plugin (plugins/inventory/ip_pairs.py): good files, every bad input.

The plugin is loaded through Ansible's own plugin loader (so its DOCUMENTATION options are
what set_options reads), and parses into a fresh InventoryData: no SSH, no subprocess
except for the two CLI checks at the end.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.errors import AnsibleParserError
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import inventory_loader

ROOT = Path(__file__).resolve().parents[2]
inventory_loader.add_directory(str(ROOT / "plugins" / "inventory"))

PUBLIC = ["54.1.2.3", "54.1.2.4", "54.1.2.5"]
PRIVATE = ["172.31.0.10", "172.31.0.11", "172.31.0.12"]


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def lines(addresses):
    return "".join(a + "\n" for a in addresses)


def parse(config: Path) -> InventoryData:
    plugin = inventory_loader.get("ip_pairs")
    assert plugin is not None, "plugins/inventory/ip_pairs.py did not load"
    plugin.end_on_error = False  # raise, as Ansible sees it; the CLIs' one message: tests at the end
    inventory = InventoryData()
    assert plugin.verify_file(str(config))
    plugin.parse(inventory, DataLoader(), str(config), cache=False)
    return inventory


def setup(tmp_path, public=None, private=None, config="plugin: ip_pairs\n", name="cluster.ip_pairs.yml"):
    write(tmp_path / "aws_public_ips.txt", public if public is not None else lines(PUBLIC))
    write(tmp_path / "aws_private_ips.txt", private if private is not None else lines(PRIVATE))
    return write(tmp_path / name, config)


def hostvars(inventory, name):
    return inventory.get_host(name).get_vars()


def fails(tmp_path, match, **kwargs):
    config = setup(tmp_path, **kwargs)
    with pytest.raises(AnsibleParserError, match=match):
        parse(config)


# ---------------------------------------------------------------- good input


def test_pairs_become_hosts_in_order(tmp_path):
    inventory = parse(setup(tmp_path))
    group = inventory.groups["tf_nodes"]
    assert [h.name for h in group.get_hosts()] == ["node01", "node02", "node03"]
    for name, public, private in zip(["node01", "node02", "node03"], PUBLIC, PRIVATE):
        hv = hostvars(inventory, name)
        assert (hv["ansible_host"], hv["private_ip"], hv["public_ip"]) == (public, private, public)
        # Nothing set that was not asked for: group_vars can still provide these.
        assert "tf_devices" not in hv and "tf_device_type" not in hv


def test_tolerates_blank_lines_spaces_crlf_comments_and_a_bom(tmp_path):
    public = (
        "\ufeff# pasted from the EC2 console\r\n\r\n  54.1.2.3  \r\n\t54.1.2.4\t# the second one\r\n"
        "\r\n   \r\n54.1.2.5"
    )  # no newline at the end
    private = "172.31.0.10 \n# a comment line\n\n172.31.0.11   # trailing comment\n\n\n172.31.0.12\n\n"
    inventory = parse(setup(tmp_path, public=public.encode("utf-8"), private=private))
    assert [hostvars(inventory, f"node0{i}")["ansible_host"] for i in (1, 2, 3)] == PUBLIC
    assert [hostvars(inventory, f"node0{i}")["private_ip"] for i in (1, 2, 3)] == PRIVATE


def test_relative_paths_are_taken_from_the_config_folder(tmp_path, monkeypatch):
    write(tmp_path / "ips" / "pub.txt", lines(PUBLIC[:2]))
    write(tmp_path / "ips" / "priv.txt", lines(PRIVATE[:2]))
    config = write(
        tmp_path / "inv" / "x.ip_pairs.yaml",
        "plugin: ip_pairs\npublic_ips_file: ../ips/pub.txt\nprivate_ips_file: ../ips/priv.txt\n",
    )
    monkeypatch.chdir("/")
    inventory = parse(config)
    assert sorted(inventory.hosts) == ["node01", "node02"]


def test_absolute_paths_group_and_names(tmp_path):
    write(tmp_path / "a.txt", lines(PUBLIC))
    write(tmp_path / "b.txt", lines(PRIVATE))
    config = write(
        tmp_path / "elsewhere" / "ip_pairs.yml",
        f"plugin: ip_pairs\npublic_ips_file: {tmp_path / 'a.txt'}\nprivate_ips_file: {tmp_path / 'b.txt'}\n"
        "group: gpu_nodes\nhost_names: public_ip\n",
    )
    inventory = parse(config)
    assert [h.name for h in inventory.groups["gpu_nodes"].get_hosts()] == PUBLIC
    assert "tf_nodes" not in inventory.groups


def test_name_prefix_and_width_beyond_99_hosts(tmp_path):
    public = [f"54.1.{i // 250}.{i % 250 + 1}" for i in range(120)]
    private = [f"172.31.{i // 250}.{i % 250 + 1}" for i in range(120)]
    inventory = parse(
        setup(tmp_path, public=lines(public), private=lines(private), config="plugin: ip_pairs\nname_prefix: worker-\n")
    )
    names = [h.name for h in inventory.groups["tf_nodes"].get_hosts()]
    assert names[0] == "worker-001" and names[-1] == "worker-120" and len(names) == 120


@pytest.mark.parametrize(
    "options, devices, device_type",
    [
        ("tf_devices: 4\ntf_device_type: cpu\n", 4, "cpu"),
        ("instance_type: p2.8xlarge\n", 8, None),
        ("instance_type: p2.16xlarge\ntf_device_type: gpu\n", 16, "gpu"),
        ("instance_type: p3.8xlarge\n", 4, None),
        ("instance_type: p4d.24xlarge\n", 8, None),
        ("instance_type: p3.16xlarge\ntf_devices: 2\n", 2, None),  # tf_devices wins
    ],
)
def test_devices_per_host(tmp_path, options, devices, device_type):
    inventory = parse(setup(tmp_path, config="plugin: ip_pairs\n" + options))
    hv = hostvars(inventory, "node02")
    assert hv["tf_devices"] == devices
    assert hv.get("tf_device_type") == device_type


def test_the_instance_table_is_the_projects_one():
    # One table for every path: the IP-file inventory, provision-aws.yml and its aws_ec2 inventory.
    from dtfbench.plan.ec2_types import INSTANCE_TYPES

    plugin_module = sys.modules[type(inventory_loader.get("ip_pairs")).__module__]
    assert plugin_module.GPUS_PER_INSTANCE_TYPE == {name: t.gpus for name, t in INSTANCE_TYPES.items()}
    assert plugin_module.GPUS_PER_INSTANCE_TYPE["p2.8xlarge"] == 8  # the study's
    assert plugin_module.GPUS_PER_INSTANCE_TYPE["p2.xlarge"] == 1


def test_compose_groups_and_keyed_groups(tmp_path):
    config = (
        "plugin: ip_pairs\ntf_devices: 1\n"
        "compose:\n  ansible_user: \"'ubuntu'\"\n  subnet: private_ip.split('.')[2]\n"
        "groups:\n  first: inventory_hostname == 'node01'\n"
        "keyed_groups:\n  - key: tf_devices | string\n    prefix: devices\n"
    )
    inventory = parse(setup(tmp_path, config=config))
    assert hostvars(inventory, "node03")["ansible_user"] == "ubuntu"
    assert hostvars(inventory, "node03")["subnet"] == "0"
    assert [h.name for h in inventory.groups["first"].get_hosts()] == ["node01"]
    assert len(inventory.groups["devices_1"].get_hosts()) == 3


def test_same_address_public_and_private_of_one_host_is_fine(tmp_path):
    # No separate private network (on premises): the same list twice.
    inventory = parse(setup(tmp_path, private=lines(PUBLIC)))
    assert hostvars(inventory, "node01")["private_ip"] == PUBLIC[0]


@pytest.mark.parametrize("name", ["hosts.yml", "ip_pairs.txt", "cluster.ip_pairs.json", "ip_pairs.yml.bak"])
def test_other_file_names_are_not_claimed(tmp_path, name):
    config = setup(tmp_path, name=name)
    assert not inventory_loader.get("ip_pairs").verify_file(str(config))


# ---------------------------------------------------------------- bad input


def test_public_file_longer(tmp_path):
    fails(
        tmp_path,
        r"^aws_public_ips.txt line 3: 54.1.2.5 has no partner: aws_public_ips.txt holds 3 "
        r"addresses, aws_private_ips.txt 2",
        private=lines(PRIVATE[:2]),
    )


def test_private_file_longer_names_its_first_extra_line(tmp_path):
    fails(
        tmp_path,
        r"^aws_private_ips.txt line 5: 172.31.0.13 has no partner",
        private="172.31.0.10\n172.31.0.11\n\n172.31.0.12\n172.31.0.13\n",
    )


@pytest.mark.parametrize(
    "bad, why",
    [
        ("54.1.2.300", "is not an IPv4 address"),
        ("ip-172-31-0-10.ec2.internal", "is not an IPv4 address"),
        ("54.1.2.4 54.1.2.6", r"is not an IPv4 address \(one address a line\)"),
        ("54.1.2.4:22", r"is not an IPv4 address \(an IPv4 address without a port\)"),
        ("2001:db8::1", "is not an IPv4 address"),
        ("054.1.2.4", "is not an IPv4 address"),
        ("54.1.2", "is not an IPv4 address"),
        ("0.0.0.0", "is not a host address"),
        ("224.0.0.1", "is not a host address"),
        ("255.255.255.255", "is not a host address"),
    ],
)
def test_invalid_public_address_names_file_and_line(tmp_path, bad, why):
    fails(tmp_path, rf"^aws_public_ips.txt line 3: .*{why}", public=f"# header\n54.1.2.3\n{bad}\n54.1.2.5\n")


def test_invalid_private_address_names_file_and_line(tmp_path):
    fails(
        tmp_path,
        r"^aws_private_ips.txt line 2: '172.31.0' is not an IPv4 address",
        private="172.31.0.10\r\n172.31.0\r\n172.31.0.12\r\n",
    )


def test_duplicate_public_address(tmp_path):
    fails(
        tmp_path,
        r"^aws_public_ips.txt line 4: 54.1.2.3 is already on line 1",
        public="54.1.2.3\n54.1.2.4\n\n54.1.2.3\n",
    )


def test_duplicate_private_address(tmp_path):
    fails(
        tmp_path,
        r"^aws_private_ips.txt line 3: 172.31.0.10 is already on line 1",
        private="172.31.0.10\n172.31.0.11\n172.31.0.10  # pasted twice\n",
    )


def test_public_address_of_one_host_as_private_of_another(tmp_path):
    fails(
        tmp_path,
        r"^aws_private_ips.txt line 2: 54.1.2.3 is also on line 1 of aws_public_ips.txt",
        private="172.31.0.10\n54.1.2.3\n172.31.0.12\n",
    )


def test_missing_file(tmp_path):
    config = setup(tmp_path)
    (tmp_path / "aws_private_ips.txt").unlink()
    with pytest.raises(AnsibleParserError, match=r"^aws_private_ips.txt: no such file \(.*aws_private_ips.txt\)"):
        parse(config)


def test_no_addresses_at_all(tmp_path):
    fails(tmp_path, r"^aws_public_ips.txt: no addresses in", public="# nothing yet\n\n", private="\n")


def test_not_utf8(tmp_path):
    fails(tmp_path, r"^aws_public_ips.txt line 2: not UTF-8 text", public=b"54.1.2.3\n54.1.2.\xff\n54.1.2.5\n")


def test_unknown_instance_type(tmp_path):
    fails(
        tmp_path,
        r"instance_type 'p9.xlarge' is unknown \(known, with their GPUs: .*p2.xlarge 1, .*\); "
        r"set tf_devices instead",
        config="plugin: ip_pairs\ninstance_type: p9.xlarge\n",
    )


def test_negative_devices(tmp_path):
    fails(tmp_path, r"tf_devices -1 is negative", config="plugin: ip_pairs\ntf_devices: -1\n")


def test_bad_option_value(tmp_path):
    with pytest.raises(Exception, match="tf_device_type"):
        parse(setup(tmp_path, config="plugin: ip_pairs\ntf_device_type: tpu\n"))


# ---------------------------------------------------------------- through the CLIs


def ansible_cli(*argv, **env):
    """An Ansible command run to the end from the project root, with its ansible.cfg and this
    interpreter's Ansible first on PATH; `env` added to the environment."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1", **env)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.run(list(argv), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.ansible
def test_ansible_doc_renders_the_plugin():
    done = ansible_cli("ansible-doc", "-t", "inventory", "ip_pairs")
    assert done.returncode == 0, done.stderr
    assert "[WARNING]" not in done.stderr and "[ERROR]" not in done.stderr, done.stderr
    for word in (
        "public_ips_file",
        "private_ips_file",
        "tf_devices",
        "instance_type",
        "keyed_groups",
        "EXAMPLES",
        "dtfbench ec2_types",
    ):
        assert word in done.stdout


@pytest.mark.ansible
def test_ansible_inventory_lists_hosts_and_shows_errors_with_file_and_line(tmp_path):
    config = setup(tmp_path, config="plugin: ip_pairs\ninstance_type: p2.xlarge\n")
    good = ansible_cli("ansible-inventory", "-i", str(config), "--graph", "--vars")
    assert good.returncode == 0, good.stderr
    assert "@tf_nodes:" in good.stdout and "node03" in good.stdout and "private_ip = 172.31.0.12" in good.stdout

    write(tmp_path / "aws_private_ips.txt", "172.31.0.10\n172.31.0.11\n")
    bad = ansible_cli("ansible-inventory", "-i", str(config), "--list", ANSIBLE_INVENTORY_UNPARSED_FAILED="true")
    assert bad.returncode != 0
    assert "aws_public_ips.txt line 3: 54.1.2.5 has no partner" in bad.stderr


@pytest.mark.ansible
@pytest.mark.parametrize("command", [["ansible-inventory", "--list"], ["ansible-playbook", "run-benchmark.yml"]])
def test_an_inventory_error_is_one_message_with_file_and_line(tmp_path, command):
    # The project's ansible.cfg (unparsed_is_failed = true): Ansible alone showed the message
    # twice (from ip_pairs and auto), then yaml's and ini's failures, 38 lines ending in
    # "No inventory was parsed".
    config = setup(tmp_path, private="172.31.0.10\n172.31.0.11\n", config="plugin: ip_pairs\ntf_devices: 1\n")
    done = ansible_cli(command[0], "-i", str(config), *command[1:])
    assert done.returncode == 1, done.stdout + done.stderr
    assert [line for line in (done.stdout + done.stderr).splitlines() if line.strip()] == [
        f"[ERROR]: ip_pairs inventory {config}: aws_public_ips.txt line 3: 54.1.2.5 has no partner: "
        "aws_public_ips.txt holds 3 addresses, aws_private_ips.txt 2; line i of one file must belong to the "
        "same host as line i of the other"
    ]


@pytest.mark.ansible
def test_without_unparsed_is_failed_ansible_warns_and_goes_on(tmp_path):
    # The user's choice: a broken source is a warning (Ansible's own), the command goes on.
    config = setup(tmp_path, public="54.1.2.3\nnot-an-ip\n", config="plugin: ip_pairs\ntf_devices: 1\n")
    done = ansible_cli("ansible-inventory", "-i", str(config), "--list", ANSIBLE_INVENTORY_UNPARSED_FAILED="false")
    assert done.returncode == 0, done.stderr
    assert "aws_public_ips.txt line 2: 'not-an-ip' is not an IPv4 address" in done.stderr
    assert "[WARNING]" in done.stderr
