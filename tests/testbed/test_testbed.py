"""The multi-host test bed itself: up, what a host is, down (also after a crash), leftovers."""

import dataclasses
import ipaddress
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testbed as tb
from testbed_fixtures import unavailable

pytestmark = pytest.mark.ansible

SCRIPT = Path(tb.__file__).resolve()


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout)


def needs_testbed():
    reason = unavailable()
    if reason:
        pytest.skip(f"no multi-host test bed here: {reason}")


def test_cli_up_status_down_twice(tmp_path):
    needs_testbed()
    directory = tmp_path / "bed"
    up = cli("up", "--hosts", "2", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    state = json.loads((directory / "state.json").read_text())
    try:
        assert state["status"] == "up" and [n["name"] for n in state["nodes"]] == ["node01", "node02"]
        public = ipaddress.ip_network(state["public_net"])
        private = ipaddress.ip_network(state["private_net"])
        assert public.subnet_of(ipaddress.ip_network("10.213.0.0/16"))
        assert private.subnet_of(ipaddress.ip_network("10.214.0.0/16"))
        assert (directory / "aws_public_ips.txt").read_text().split() == [n["public_ip"] for n in state["nodes"]]
        assert (directory / "aws_private_ips.txt").read_text().split() == [n["private_ip"] for n in state["nodes"]]
        assert {"hosts.yml", "testbed.ip_pairs.yml", "id_ed25519", "known_hosts"} <= {
            p.name for p in directory.iterdir()
        }
        assert os.stat(directory / "id_ed25519").st_mode & 0o077 == 0

        status = cli("status", "--dir", str(directory))
        assert status.returncode == 0
        nodes = json.loads(status.stdout)["nodes"]
        assert all(n["netns_exists"] and n["sshd_alive"] for n in nodes)

        # A second `up` on the same folder refuses instead of leaking the first.
        again = cli("up", "--hosts", "2", "--dir", str(directory))
        assert again.returncode == 2 and "already holds a test bed" in again.stderr

        # sshd answers on the public address; the controller has an address on the public
        # range only (TF traffic stays between the nodes); a password login is refused.
        node = state["nodes"][0]
        with socket.create_connection((node["public_ip"], 22), timeout=5) as conn:
            assert conn.recv(16).startswith(b"SSH-2.0")
        controller_nets = {
            ipaddress.ip_interface(f"{a['local']}/{a['prefixlen']}").network
            for link in tb.ip_json("-4", "addr", "show")
            for a in link.get("addr_info", [])
        }
        assert public in controller_nets and private not in controller_nets
        refused = subprocess.run(
            [
                "ssh",
                "-o",
                "BatchMode=yes",
                "-o",
                "PubkeyAuthentication=no",
                "-o",
                "PreferredAuthentications=password",
                "-o",
                f"UserKnownHostsFile={directory / 'known_hosts'}",
                "-o",
                "StrictHostKeyChecking=yes",
                f"root@{node['public_ip']}",
                "true",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr

        # A node's ~/.bashrc is its own, as on a fresh host, not this machine's: bash reads it
        # for every command sshd runs (this machine's ran pyenv's init, 0.1 CPU-s a session).
        if tb.LOGIN_BASHRC.is_file():
            own = (Path(node["dir"]) / "bashrc").read_text()
            seen = subprocess.run(
                [
                    "ssh",
                    "-i",
                    str(directory / "id_ed25519"),
                    "-o",
                    "BatchMode=yes",
                    "-o",
                    f"UserKnownHostsFile={directory / 'known_hosts'}",
                    "-o",
                    "StrictHostKeyChecking=yes",
                    f"root@{node['public_ip']}",
                    "cat ~/.bashrc",
                ],
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert seen.returncode == 0 and seen.stdout == own
    finally:
        first = cli("down", "--dir", str(directory))
        second = cli("down", "--dir", str(directory))
    assert first.returncode == 0 and first.stdout.strip() == "test bed down"
    assert second.returncode == 0 and "nothing to do" in second.stdout
    assert tb.leftovers(state, directory) == []
    assert not directory.exists()


def test_down_after_a_crashed_up(tmp_path):
    """`up` killed half-way (SIGKILL: no cleanup of its own) leaves state that `down` undoes."""
    needs_testbed()
    directory = tmp_path / "crashed"
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "up", "--hosts", "16", "--dir", str(directory)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            state = json.loads((directory / "state.json").read_text())
        except (OSError, ValueError):
            time.sleep(0.005)
            continue
        if state["status"] != "claiming" and any(n["netns"] in tb.netns_names() for n in state["nodes"]):
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    state = json.loads((directory / "state.json").read_text())
    assert state["status"] in ("building", "up")

    down = cli("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert tb.leftovers(state, directory) == []
    assert not directory.exists()


def test_two_testbeds_side_by_side(testbed_factory):
    """Each gets a range of its own; the shared mount point stays until the last one is down."""
    first = testbed_factory(hosts=1)
    second = testbed_factory(hosts=1)
    assert first.state["prefix"] != second.state["prefix"]
    assert not ipaddress.ip_network(first.state["public_net"]).overlaps(
        ipaddress.ip_network(second.state["public_net"])
    )
    first.down()
    assert first.leftovers() == []
    assert Path(tb.SSD_MOUNT).is_dir() and Path(tb.PRIVSEP_DIR).is_dir()
    ssh = subprocess.run(
        [
            "ssh",
            "-i",
            str(second.dir / "id_ed25519"),
            "-o",
            f"UserKnownHostsFile={second.dir / 'known_hosts'}",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            "BatchMode=yes",
            f"root@{second.public_ips[0]}",
            "hostname",
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert ssh.returncode == 0 and ssh.stdout.strip() == "node01", ssh.stderr
    second.down()
    assert second.leftovers() == []


def test_a_range_claimed_again_at_once_leaves_the_first_bed_no_leftovers(testbed_factory, monkeypatch):
    """Another lane's `up` may claim a range the moment a `down` released it, and make the same
    names. What the first bed left is then only what its folder and processes hold: the
    namespaces, links and cgroup of the prefix are the second bed's (told apart by the index
    of the bridge that claimed the range)."""
    first = testbed_factory(hosts=1)
    first.down()
    assert first.leftovers() == []
    # The next `up` can take only the range just released, as another lane's `up` did in CI.
    monkeypatch.setattr(tb, "TESTBED", dataclasses.replace(tb.TESTBED, candidates=(first.state["x"],)))
    second = testbed_factory(hosts=1)
    assert second.state["prefix"] == first.state["prefix"]
    assert second.state["claim_ifindex"] != first.state["claim_ifindex"]
    assert first.leftovers() == []
    assert f"netns {second.state['prefix']}-node01" in second.leftovers()
    second.down()
    assert second.leftovers() == []


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hosts", "0"], "choose 1 to 64"),
        (["--hosts", "65"], "choose 1 to 64"),
        (["--devices", "0"], "at least one device slot"),
        (["--link-mbit", "0"], "choose a rate above 0"),
        (["--link-mbit", "-5"], "choose a rate above 0"),
    ],
)
def test_bad_arguments(tmp_path, args, message):
    done = cli("up", "--dir", str(tmp_path / "bed"), *args)
    assert done.returncode == 2 and message in done.stderr
    assert not (tmp_path / "bed").exists()


def test_down_of_nothing_is_fine(tmp_path):
    done = cli("down", "--dir", str(tmp_path / "never"))
    assert done.returncode == 0 and "nothing to do" in done.stdout


def test_address_ranges_in_use_are_skipped():
    used = [
        ipaddress.ip_network("10.213.57.0/24"),
        ipaddress.ip_network("10.214.58.128/25"),
        ipaddress.ip_network("192.0.2.0/24"),
    ]
    assert not tb.range_is_free(57, set(), set(), used)  # public range taken
    assert not tb.range_is_free(58, set(), set(), used)  # part of the private range taken
    assert not tb.range_is_free(59, {"dtfb59-pub"}, set(), used)  # another test bed's bridge
    assert not tb.range_is_free(60, set(), {"dtfb60-node01"}, used)
    assert tb.range_is_free(61, {"dtfb6-pub", "eth0"}, set(), used)
    # A route that covers everything (a VPN's 10.0.0.0/8) blocks every candidate.
    assert not tb.range_is_free(61, set(), set(), [ipaddress.ip_network("10.0.0.0/8")])


def timed_transfer_mbit(sender: dict, receiver: dict) -> float:
    """Mbit/s of a 2-second TCP transfer from node `sender` to node `receiver`, private addresses."""
    return tb.timed_transfer(sender, receiver) * 8 / 1e6


def test_shaped_private_link(tmp_path):
    """`up --link-mbit` limits a node's private link to that rate (tbf on both veth ends):
    a timed transfer between two nodes runs at it; `shape --unshaped` lifts it; `status`
    reads the qdiscs back; `down` leaves nothing."""
    needs_testbed()
    directory = tmp_path / "shaped"
    up = cli("up", "--hosts", "2", "--link-mbit", "100", "--dir", str(directory))
    assert up.returncode == 0, up.stderr
    assert "shaped to 100 Mbit/s" in up.stdout
    state = json.loads((directory / "state.json").read_text())
    try:
        assert state["link_mbit"] == 100
        status = json.loads(cli("status", "--dir", str(directory)).stdout)
        assert [[end["tbf_mbit"] for end in n["private_link"]] for n in status["nodes"]] == [[100, 100]] * 2
        one, two = state["nodes"]
        # Both directions: each is shaped at the sender's and at the receiver's end.
        for sender, receiver in ((one, two), (two, one)):
            assert timed_transfer_mbit(sender, receiver) == pytest.approx(100, rel=0.1)
        # The receiver's end alone limits what it takes in (the incast's bottleneck).
        tb.run("tc", "-n", one["netns"], "qdisc", "del", "dev", "prv0", "root")
        assert timed_transfer_mbit(one, two) == pytest.approx(100, rel=0.1)

        again = cli("shape", "--link-mbit", "400", "--dir", str(directory))
        assert again.returncode == 0, again.stderr
        assert timed_transfer_mbit(two, one) == pytest.approx(400, rel=0.1)
        unshaped = cli("shape", "--unshaped", "--dir", str(directory))
        assert unshaped.returncode == 0, unshaped.stderr
        status = json.loads(cli("status", "--dir", str(directory)).stdout)
        assert status["link_mbit"] is None
        assert all(end["tbf_mbit"] is None for n in status["nodes"] for end in n["private_link"])
        assert timed_transfer_mbit(one, two) > 1000
    finally:
        down = cli("down", "--dir", str(directory))
    assert down.returncode == 0, down.stderr
    assert tb.leftovers(state, directory) == []
