"""ip_pairs end to end: the IP files the test bed wrote, real SSH to 4 hosts, what each host is."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testbed_fixtures import ansible_command

pytestmark = pytest.mark.ansible

ROOT = Path(__file__).resolve().parents[2]


def env():
    e = dict(
        os.environ,
        ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"),
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_INVENTORY_UNPARSED_FAILED="true",
        ANSIBLE_LOAD_CALLBACK_PLUGINS="1",
        ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
    )
    e["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{e.get('PATH', '')}"
    return e


def adhoc(inventory, module, args=None):
    argv = [ansible_command("ansible"), "-i", str(inventory), "tf_nodes", "-m", module]
    if args:
        argv += ["-a", args]
    done = subprocess.run(argv, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = json.loads(done.stdout)
    return {host: result for play in out["plays"] for task in play["tasks"] for host, result in task["hosts"].items()}


@pytest.fixture(scope="module")
def config(testbed4, tmp_path_factory):
    """An ip_pairs config of our own, elsewhere, pointing at the test bed's IP files (relative)."""
    here = tmp_path_factory.mktemp("ip_pairs")
    public = os.path.relpath(testbed4.dir / "aws_public_ips.txt", here)
    private = os.path.relpath(testbed4.dir / "aws_private_ips.txt", here)
    (here / "testbed.ip_pairs.yml").write_text(
        f"plugin: ip_pairs\npublic_ips_file: {public}\nprivate_ips_file: {private}\ntf_devices: 1\ntf_device_type: cpu\n"
    )
    # Connection settings: group_vars next to the config, as a user would keep them.
    shutil.copytree(testbed4.dir / "group_vars", here / "group_vars")
    return here / "testbed.ip_pairs.yml"


def test_the_test_bed_writes_matching_ip_files(testbed4):
    public = (testbed4.dir / "aws_public_ips.txt").read_text().split()
    private = (testbed4.dir / "aws_private_ips.txt").read_text().split()
    assert public == testbed4.public_ips and private == testbed4.private_ips and len(public) == 4


def test_inventory_from_the_ip_files(config, testbed4):
    done = subprocess.run(
        [ansible_command("ansible-inventory"), "-i", str(config), "--list"],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["tf_nodes"]["hosts"] == ["node01", "node02", "node03", "node04"]
    for node in testbed4.nodes:
        hv = data["_meta"]["hostvars"][node["name"]]

        def unwrap(v):
            return v["__ansible_unsafe"] if isinstance(v, dict) else v

        assert unwrap(hv["ansible_host"]) == node["public_ip"]
        assert unwrap(hv["private_ip"]) == node["private_ip"]
        assert hv["tf_devices"] == 1 and hv["tf_device_type"] == "cpu"


def test_ping_over_ssh(config):
    results = adhoc(config, "ansible.builtin.ping")
    assert sorted(results) == ["node01", "node02", "node03", "node04"]
    assert all(r.get("ping") == "pong" for r in results.values()), results


def test_every_host_has_its_own_hostname_and_addresses(config, testbed4):
    results = adhoc(config, "ansible.builtin.command", "sh -c 'hostname; ip -4 -o addr show'")
    for node in testbed4.nodes:
        out = results[node["name"]]["stdout"].splitlines()
        assert out[0] == node["name"]
        addresses = " ".join(out[1:])
        assert re.search(rf"pub0\s+inet {re.escape(node['public_ip'])}/24", addresses), addresses
        assert re.search(rf"prv0\s+inet {re.escape(node['private_ip'])}/24", addresses), addresses
        assert all(other["public_ip"] not in addresses for other in testbed4.nodes if other is not node)


def test_local_ssd_is_per_host(config, testbed4):
    adhoc(config, "ansible.builtin.copy", "content='{{ inventory_hostname }}\n' dest=/mnt/local_ssd/owner mode=0644")
    results = adhoc(config, "ansible.builtin.command", "cat /mnt/local_ssd/owner")
    assert {name: r["stdout"] for name, r in results.items()} == {n: n for n in results}
    for node in testbed4.nodes:
        assert (testbed4.local_ssd(node["name"]) / "owner").read_text() == node["name"] + "\n"
    # The controller's own /mnt/local_ssd is untouched: the nodes' mounts are private.
    assert not Path("/mnt/local_ssd/owner").exists()
