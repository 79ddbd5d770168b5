#!/usr/bin/env python3
"""A multi-host test bed on one machine: N "hosts", each reachable over real SSH.

    python tests/testbed/testbed.py up --hosts 4 --dir /tmp/dtfbench-testbed
    python tests/testbed/testbed.py status --dir /tmp/dtfbench-testbed
    python tests/testbed/testbed.py shape --link-mbit 200 --dir /tmp/dtfbench-testbed
    python tests/testbed/testbed.py share --server node01 --dir /tmp/dtfbench-testbed
    python tests/testbed/testbed.py down --dir /tmp/dtfbench-testbed

Each host (node01 .. nodeNN, 1 to 64 of them) is

- a network namespace ``<prefix>-nodeNN`` with two interfaces: ``pub0`` on the public bridge
  (SSH, like an EC2 instance's public address) and ``prv0`` on the private bridge (TF
  traffic, like its private address);
- an sshd of its own listening on the public address only: key-only authentication with a
  key generated for this test bed, root login by key, no passwords, no PAM; a host key per
  node, all of them in a known_hosts file of the test bed;
- its own hostname (a UTS namespace) and its own "local SSD": a private mount namespace in
  which ``<dir>/nodes/nodeNN/local_ssd`` is bind-mounted onto ``/mnt/local_ssd``, so every
  host sees its own disk at the same path;
- its own ``~/.bashrc`` (a copy of ``/etc/skel/.bashrc``, bind-mounted over root's): bash
  reads ``~/.bashrc`` for every command sshd runs, and this machine's (pyenv's init) cost
  0.1 CPU-s per SSH session, a cost no fresh host has and every Ansible task paid.
Everything else (the filesystem, the project's .venv, the process table) is shared: the
nodes run the controller's .venv python.

Address plan, with X a number chosen at ``up`` (the first free one from 57 on):

    public  bridge <prefix>-pub  10.213.X.0/24   controller 10.213.X.1, nodeNN 10.213.X.(10+NN)
    private bridge <prefix>-prv  10.214.X.0/24   no controller address, nodeNN 10.214.X.(10+NN)

A shaped test bed (``up --link-mbit N``, or ``shape`` on one that is up) limits each node's
private link to N Mbit/s in each direction, like a NIC: the kernel's ``tbf`` qdisc on both
ends of the node's private veth, ``prv0`` in the namespace (what the node sends) and the host
end on the bridge (what it receives). N senders into one node share its N Mbit/s, as a PS's
incast does. ``netem`` is not in every kernel; ``tbf`` is. The public (SSH) link is never
shaped. The rate is in state.json (``link_mbit``), ``status`` reads the qdiscs back, and
``down`` removes them with the veths.

``prefix`` is ``dtfb<X>``. A candidate X is taken only when no interface address and no
route of this machine's (host) network namespace falls in either /24, and no link or
namespace has that prefix; creating the public bridge claims it (the kernel refuses a
second one of the same name, so two test beds started at once never share a range). The
controller reaches only the public range: TF traffic between nodes cannot leak onto it
unnoticed, since nothing routes the private range to the controller.

Files written in ``--dir``: ``state.json`` (everything the test bed created, recorded
*before* it is created, so ``down`` can undo a crashed ``up``), ``hosts.yml`` (the Ansible
inventory, group ``tf_nodes``), ``aws_public_ips.txt`` / ``aws_private_ips.txt`` (line i
of one matches line i of the other, as the users pasted them from the EC2 console),
``testbed.ip_pairs.yml`` plus ``group_vars/tf_nodes.yml`` (the same hosts through the
``ip_pairs`` inventory plugin), ``molecule_instances.yml`` (for molecule's create step),
``id_ed25519`` (the client key), ``known_hosts``, ``keeper.json``/``keeper.log``, and per
node ``nodes/nodeNN/`` (sshd config, host key, log, pid, local_ssd, bashrc).

Inventory variables of every host: ``ansible_host`` (public address), ``private_ip``,
``tf_devices`` (``--devices``, default 1), ``tf_device_type: cpu``, ``ansible_user: root``,
``ansible_ssh_private_key_file``, ``ansible_ssh_common_args`` (the test bed's known_hosts,
strict host key checking), ``ansible_python_interpreter`` and ``dtfbench_python`` (the
project's .venv python, shared), ``dtfbench_run_root: /mnt/local_ssd/dtfbench/runs`` (each
host's run files on its own disk).

Processes: a small keeper (``testbed.py _keeper``, detached) is the parent of every node's
sshd and the child subreaper of everything started below them, so what ``down`` kills is
reaped at once (no ``<defunct>`` sshd whatever this machine's init does). Each node's
processes are also in a cgroup of their own (``<cgroup2 root>/dtfbench-<prefix>/nodeNN``,
accounting only, no limits) for ``cpu_seconds()``: on one machine every node's work lands
on the same cores, and the launch benchmark reports how much of it there was.

``down`` stops the controller's SSH master connections to the nodes (Ansible's
ControlPersist; found by their TCP connection to a public address), every process in each
node's network namespace and cgroup (sshd, SSH sessions, TF tasks started through them;
found through ``/proc/*/ns/net``), then the keeper, deletes the namespaces, veths, bridges
and cgroups, and removes the files. It is idempotent and needs nothing but ``state.json``.
The mount point ``/mnt/local_ssd`` and sshd's privilege-separation directory ``/run/sshd``
are created when missing and removed again by the last test bed that goes down (only when
the test bed created them).

A shared file system (``share``: one node's local-disk folder at ``/mnt/shared`` on every node,
over its private link) is tests/testbed/shared_fs.py's.

Needs root, iproute2, util-linux (unshare, nsenter) and openssh-server/-client; ``share`` needs
sshfs (scripts/test-deps.sh installs them).

The steps it shares with the Slurm test cluster (commands, ip, the address range, state.json,
/proc, stopping processes, removing a prefix's namespaces and links) are in
tests/harness/netns_harness.py, and its life cycle (claim, plan, state, down, leftovers,
status) in tests/harness/cluster_harness.py, both linked into this folder.
"""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import netns_harness as nh
from cluster_harness import NetnsCluster
from netns_harness import (
    NETNS_DIR,
    STATE,
    HarnessError,
    alive,
    cmdline,
    ip,
    kill_all,
    link_names,
    netns_inode,
    netns_names,
    pids_in_netns,
    run,
    save_state,
    write_atomic,
)

ip_json = nh.ip_json  # for the tests

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_DIR = Path("/tmp/dtfbench-testbed")
MAX_HOSTS = 64  # 64 namespaces with their own sshd fit on a 2-core, 24 GiB machine (issue #19)
DEFAULT_HOSTS = 4
SSD_MOUNT = "/mnt/local_ssd"
PRIVSEP_DIR = "/run/sshd"
# Markers (inside the host's view of each directory, hidden under the nodes' bind mounts)
# that say the test bed created the directory and may remove it again.
CREATED_MARKER = ".created-by-dtfbench-testbed"
PUBLIC_NET = "10.213.{x}.0/24"
PRIVATE_NET = "10.214.{x}.0/24"
CANDIDATES = list(range(57, 250)) + list(range(2, 57))
PREFIX_RE = re.compile(r"^dtfb(\d{1,3})-")
SSHD = "/usr/sbin/sshd"
# The login user's (root's) ~/.bashrc, and what each node has there instead.
LOGIN_BASHRC = Path(os.path.expanduser("~root"), ".bashrc")
NODE_BASHRC = Path("/etc/skel/.bashrc")
# Private-link shaping (tbf). The bucket holds at least 4 ms of the rate (a 250 Hz kernel
# refills it every 4 ms: a smaller one caps the rate below the one asked for) and at least
# 64 KiB (a veth hands over GSO segments of up to 64 KiB); packets wait at most 50 ms.
TBF_MIN_BURST_BYTES = 64 * 1024
TBF_BURST_SECONDS = 0.004
TBF_LATENCY = "50ms"
MAX_LINK_MBIT = 100_000


# Something the test bed cannot do; the message says what and how to fix it. The steps it
# shares with the Slurm test cluster (netns_harness) raise it too.
TestbedError = HarnessError


# --------------------------------------------------------------------------- helpers


def node_name(index: int) -> str:
    return f"node{index:02d}"


def default_python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def check_prerequisites() -> None:
    if os.geteuid() != 0:
        raise TestbedError("the test bed needs root (network namespaces, bridges, bind mounts)")
    missing = [
        tool for tool in ("ip", "tc", "unshare", "nsenter", "ssh", "ssh-keygen", "setsid") if shutil.which(tool) is None
    ]
    if not os.access(SSHD, os.X_OK):
        missing.append(SSHD)
    if missing:
        raise TestbedError(
            f"missing {', '.join(missing)}: run scripts/test-deps.sh "
            "(installs openssh-server, openssh-client, iproute2, util-linux)"
        )


# --------------------------------------------------------------------------- processes


def tcp_peers_inodes(network: str) -> set[int]:
    """Socket inodes of this (the host's) network namespace's TCP connections to `network`."""
    net = ipaddress.ip_network(network)
    inodes = set()
    try:
        with open("/proc/self/net/tcp") as f:
            rows = f.read().splitlines()[1:]
    except OSError:
        return inodes
    for row in rows:
        fields = row.split()
        remote_hex = fields[2].split(":")[0]
        remote = ipaddress.IPv4Address(int.from_bytes(bytes.fromhex(remote_hex), "little"))
        if remote in net:
            inodes.add(int(fields[9]))
    return inodes


def ssh_clients_of(directory: Path, public_net: str | None = None) -> list[int]:
    """The controller's ssh processes using this test bed: Ansible's ControlPersist masters.

    A master renames itself (`ssh: ~/.ansible/cp/... [mux]`), so it is found by its TCP
    connection to a node's public address; other ssh clients by the key path in argv.
    """
    inodes = tcp_peers_inodes(public_net) if public_net else set()
    found = []
    marker = str(directory).rstrip("/") + "/"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        argv = cmdline(pid)
        if not argv or not os.path.basename(argv[0].split()[0].rstrip(":")) == "ssh":
            continue
        if any(marker in arg for arg in argv):
            found.append(pid)
            continue
        if inodes:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:[") and int(link[8:-1]) in inodes:
                    found.append(pid)
                    break
    return found


def keepers_of(directory: Path) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            argv = cmdline(int(entry))
            if "_keeper" in argv and str(directory) in argv:
                found.append(int(entry))
    return found


# --------------------------------------------------------------------------- CPU accounting


def cgroup2_root() -> str | None:
    """Where the cgroup v2 hierarchy is mounted (also in hybrid mode), or None."""
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 2 and fields[2] == "cgroup2":
                    return fields[1]
    except OSError:
        pass
    return None


def cpu_seconds(state: dict) -> dict[str, float]:
    """CPU time used so far by each node's processes (sshd, sessions, modules, tasks)."""
    usage = {}
    for node in state["nodes"]:
        if not state.get("cgroup"):
            break
        try:
            with open(Path(state["cgroup"], node["name"], "cpu.stat")) as f:
                stats = dict(line.split() for line in f if line.strip())
        except OSError:
            continue
        usage[node["name"]] = int(stats["usage_usec"]) / 1e6
    return usage


def cgroup_pids(state: dict, node: dict) -> list[int]:
    if not state.get("cgroup"):
        return []
    try:
        return [int(pid) for pid in Path(state["cgroup"], node["name"], "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def remove_cgroups(state: dict) -> None:
    if not state.get("cgroup"):
        return
    base = Path(state["cgroup"])
    for path in [base / node["name"] for node in state["nodes"]] + [base]:
        deadline = time.monotonic() + 5
        while path.exists():
            try:
                path.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    raise TestbedError(
                        f"cannot remove cgroup {path}: processes left: {(path / 'cgroup.procs').read_text().split()}"
                    ) from None
                time.sleep(0.05)


# --------------------------------------------------------------------------- address plan


def networks(x: int) -> list[str]:
    return [PUBLIC_NET.format(x=x), PRIVATE_NET.format(x=x)]


TESTBED = NetnsCluster(
    what="test bed",
    prefix="dtfb",
    candidates=tuple(CANDIDATES),
    networks=networks,
    bridge_key="bridge_public",
    error=TestbedError,
    cleanup_hint="remove the test bed's namespaces and links (prefix dtfb<N>-) by hand",
)
range_is_free = TESTBED.range_is_free
load_state = TESTBED.load_state


def plan(directory: Path, hosts: int, x: int, python: str, devices: int) -> dict:
    prefix = f"dtfb{x}"
    nodes = []
    for i in range(1, hosts + 1):
        name = node_name(i)
        nodes.append(
            {
                "name": name,
                "netns": f"{prefix}-{name}",
                "veth_public": f"{prefix}-{i:02d}p",
                "veth_private": f"{prefix}-{i:02d}v",
                "public_ip": f"10.213.{x}.{10 + i}",
                "private_ip": f"10.214.{x}.{10 + i}",
                "dir": str(directory / "nodes" / name),
                "sshd_pid": None,
            }
        )
    return TESTBED.plan(
        directory,
        x,
        public_net=PUBLIC_NET.format(x=x),
        private_net=PRIVATE_NET.format(x=x),
        controller_ip=f"10.213.{x}.1",
        bridge_public=f"{prefix}-pub",
        bridge_private=f"{prefix}-prv",
        python=python,
        devices=devices,
        ssd_mount=SSD_MOUNT,
        # Mbit/s each way of every node's private link (tbf on both veth ends); None: unshaped.
        link_mbit=None,
        nodes=nodes,
        created_dirs=[],
        # One cgroup per node, for CPU accounting only (no limits): <cgroup2 root>/dtfbench-<prefix>/nodeNN.
        cgroup=f"{root}/dtfbench-{prefix}" if (root := cgroup2_root()) else None,
    )


# --------------------------------------------------------------------------- up


def up(
    directory: Path = DEFAULT_DIR,
    hosts: int = DEFAULT_HOSTS,
    python: str | None = None,
    devices: int = 1,
    ready_timeout: float = 30.0,
    link_mbit: float | None = None,
) -> dict:
    """Create the test bed; returns its state. On any failure everything created is undone.

    `link_mbit`: shape each node's private link to this many Mbit/s each way (None: unshaped).
    """
    if not 1 <= hosts <= MAX_HOSTS:
        raise TestbedError(f"--hosts {hosts}: choose 1 to {MAX_HOSTS}")
    if devices < 1:
        raise TestbedError(f"--devices {devices}: each host needs at least one device slot")
    check_link_mbit(link_mbit)
    check_prerequisites()
    directory = TESTBED.new_directory(directory, 0o700, size_word="hosts")
    python = python or default_python()

    state = None
    try:
        state = claim(directory, hosts, python, devices)
        build(state)
        shape(state, link_mbit)
        start_nodes(state, ready_timeout)
        write_inventories(state)
        state["status"] = "up"
        save_state(state)
        return state
    except BaseException:
        if state is not None:
            down(directory)
        raise


def claim(directory: Path, hosts: int, python: str, devices: int) -> dict:
    """Pick a free X and claim it by creating the public bridge (atomic: names are unique)."""
    return TESTBED.claim(lambda x: plan(directory, hosts, x, python, devices))


def build(state: dict) -> None:
    prefix_len = "/24"
    if state.get("cgroup"):
        for node in state["nodes"]:
            Path(state["cgroup"], node["name"]).mkdir(parents=True, exist_ok=True)
    ip("link", "set", state["bridge_public"], "up")
    ip("addr", "add", state["controller_ip"] + prefix_len, "dev", state["bridge_public"])
    ip("link", "add", "name", state["bridge_private"], "type", "bridge")
    ip("link", "set", state["bridge_private"], "up")
    for node in state["nodes"]:
        ns = node["netns"]
        ip("netns", "add", ns)
        for host_end, bridge, inner, addr in (
            (node["veth_public"], state["bridge_public"], "pub0", node["public_ip"]),
            (node["veth_private"], state["bridge_private"], "prv0", node["private_ip"]),
        ):
            ip("link", "add", host_end, "type", "veth", "peer", "name", inner, "netns", ns)
            ip("link", "set", host_end, "master", bridge, "up")
            ip("-n", ns, "addr", "add", addr + prefix_len, "dev", inner)
            ip("-n", ns, "link", "set", inner, "up")
        ip("-n", ns, "link", "set", "lo", "up")


def check_link_mbit(link_mbit: float | None) -> None:
    if link_mbit is not None and not 0 < link_mbit <= MAX_LINK_MBIT:
        raise TestbedError(
            f"--link-mbit {link_mbit}: choose a rate above 0 and at most {MAX_LINK_MBIT} Mbit/s (or leave it out: unshaped)"
        )


def tbf_args(link_mbit: float) -> list[str]:
    """tc's arguments for a tbf of `link_mbit` Mbit/s (see TBF_* above for the bucket)."""
    rate_bits = int(link_mbit * 1e6)
    burst = max(TBF_MIN_BURST_BYTES, int(rate_bits / 8 * TBF_BURST_SECONDS))
    return ["tbf", "rate", f"{rate_bits}bit", "burst", str(burst), "latency", TBF_LATENCY]


def private_link_ends(node: dict) -> list[tuple[list[str], str]]:
    """The two ends of a node's private veth, as (`tc` namespace arguments, device): its own
    (`prv0`, in its namespace: what it sends) and the host end on the bridge (what it receives)."""
    return [(["-n", node["netns"]], "prv0"), ([], node["veth_private"])]


def shape(state: dict, link_mbit: float | None) -> None:
    """Limit every node's private link to `link_mbit` Mbit/s each way; None removes the limit.

    The rate is recorded first, so state.json says what was meant even after a crash in
    between (`down` removes the qdiscs with the veths either way).
    """
    check_link_mbit(link_mbit)
    state["link_mbit"] = link_mbit
    save_state(state)
    for node in state["nodes"]:
        for ns, dev in private_link_ends(node):
            if link_mbit is not None:
                run("tc", *ns, "qdisc", "replace", "dev", dev, "root", *tbf_args(link_mbit))
                continue
            done = run("tc", *ns, "qdisc", "del", "dev", dev, "root", check=False)
            # Deleting the default qdisc (none was added) is refused: nothing to remove.
            if done.returncode != 0 and not any(
                text in done.stderr for text in ("No such file", "Cannot delete qdisc with handle of zero")
            ):
                raise TestbedError(f"tc qdisc del dev {dev} root failed: {done.stderr.strip()}")


def link_shaping(node: dict) -> list[dict]:
    """The rate (Mbit/s) the kernel's root tbf gives each end of a node's private link, None
    where there is none (for `status`)."""
    found = []
    for ns, dev in private_link_ends(node):
        done = run("tc", *ns, "-j", "qdisc", "show", "dev", dev, check=False)
        try:
            qdiscs = json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []
        except ValueError:
            qdiscs = []
        tbf = next((q for q in qdiscs if q.get("kind") == "tbf" and q.get("root")), None)
        # tc reports the rate in bytes/s
        found.append({"dev": dev, "tbf_mbit": tbf["options"]["rate"] * 8 / 1e6 if tbf else None})
    return found


# A receiver (prints bytes/s from its first byte to EOF) and a sender (sends for argv[3] seconds),
# run in two nodes' network namespaces: a transfer over the private link, timed by its receiver.
_RECEIVER = """
import socket, sys, time
srv = socket.create_server((sys.argv[1], int(sys.argv[2])))
srv.settimeout(30)
print("listening", flush=True)
conn, _ = srv.accept()
buf, total, first = bytearray(1 << 20), 0, None
while n := conn.recv_into(buf):
    first = first or time.monotonic()
    total += n
print(total / (time.monotonic() - first), flush=True)
"""
_SENDER = """
import socket, sys, time
conn = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=30)
chunk, end = b"x" * (1 << 20), time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    conn.sendall(chunk)
conn.close()
"""


@contextlib.contextmanager
def listening(node: dict, program: str, port: int, ready: str):
    """Python `program` (argv: `node`'s private address, `port`) run in `node`'s network
    namespace, from the moment its first line of output is `ready`; killed at the end of the
    block. Yields the process (its stdout a pipe, as text)."""
    process = subprocess.Popen(
        ["ip", "netns", "exec", node["netns"], sys.executable, "-c", program, node["private_ip"], str(port)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout.readline().strip() == ready
        yield process
    finally:
        process.kill()
        process.wait()


def timed_transfer(sender: dict, receiver: dict, seconds: float = 2.0, port: int = 5299) -> float:
    """Bytes/s of one TCP stream sent for `seconds` from node `sender` to node `receiver` over
    their private addresses (plain TCP, as a yardstick for the link's shaping and the probe)."""
    with listening(receiver, _RECEIVER, port, "listening") as rx:
        sender_argv = [sys.executable, "-c", _SENDER, receiver["private_ip"], str(port), str(seconds)]
        subprocess.run(["ip", "netns", "exec", sender["netns"], *sender_argv], check=True, timeout=60)
        return float(rx.communicate(timeout=60)[0])


def ensure_dir(path: str, state: dict) -> None:
    """Create a shared directory when missing, with a marker saying the test bed made it."""
    p = Path(path)
    if p.is_dir():
        return
    p.mkdir(parents=True, mode=0o755)
    (p / CREATED_MARKER).write_text("created by tests/testbed/testbed.py; removed by the last `down`\n")
    if path not in state["created_dirs"]:
        state["created_dirs"].append(path)
    save_state(state)


def start_nodes(state: dict, ready_timeout: float) -> None:
    directory = Path(state["dir"])
    ensure_dir(SSD_MOUNT, state)
    ensure_dir(PRIVSEP_DIR, state)
    os.chmod(PRIVSEP_DIR, 0o755)

    key = directory / "id_ed25519"
    run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"dtfbench-testbed-{state['prefix']}", "-f", str(key))
    authorized = directory / "authorized_keys"
    write_atomic(authorized, (directory / "id_ed25519.pub").read_text(), 0o600)

    known_hosts = []
    for node in state["nodes"]:
        ndir = Path(node["dir"])
        (ndir / "local_ssd").mkdir(parents=True, exist_ok=True)
        write_atomic(
            ndir / "bashrc",
            NODE_BASHRC.read_text()
            if NODE_BASHRC.is_file()
            else "# the test-bed node's own ~/.bashrc (tests/testbed/testbed.py)\n",
            0o644,
        )
        host_key = ndir / "ssh_host_ed25519_key"
        run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node["name"], "-f", str(host_key))
        known_hosts.append(
            f"{node['public_ip']} {(ndir / 'ssh_host_ed25519_key.pub').read_text().split(' ')[0]} "
            f"{(ndir / 'ssh_host_ed25519_key.pub').read_text().split(' ')[1]}"
        )
        write_atomic(
            ndir / "sshd_config",
            "\n".join(
                [
                    "# sshd of one test-bed node (tests/testbed/testbed.py)",
                    f"ListenAddress {node['public_ip']}:22",
                    f"HostKey {host_key}",
                    f"PidFile {ndir / 'sshd.pid'}",
                    f"AuthorizedKeysFile {authorized}",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "ChallengeResponseAuthentication no",
                    "UsePAM no",
                    "UseDNS no",
                    # the test bed's files live under /tmp, which is world-writable
                    "StrictModes no",
                    "PrintMotd no",
                    "PrintLastLog no",
                    # Ansible opens many sessions at once (forks, ControlPersist multiplexing)
                    "MaxStartups 200:30:400",
                    "MaxSessions 100",
                    "Subsystem sftp internal-sftp",
                    "LogLevel ERROR",
                    "",
                ]
            ),
            0o600,
        )
    write_atomic(directory / "known_hosts", "\n".join(known_hosts) + "\n")

    start_keeper(state)
    wait_for_sshd(state, ready_timeout)


def node_argv(state: dict, node: dict) -> list[str]:
    """sshd in the node's network namespace, with a UTS and a mount namespace of its own."""
    ndir = Path(node["dir"])
    script = (
        'set -e; if [ -n "$6" ]; then echo $$ > "$6/cgroup.procs"; fi; '
        'echo "$1" > /proc/sys/kernel/hostname; '
        'mount --bind "$2" "$3"; '
        'if [ -f "$7" ]; then mount --bind "$8" "$7"; fi; '
        'exec "$4" -D -e -f "$5"'
    )
    cgroup = str(Path(state["cgroup"], node["name"])) if state.get("cgroup") else ""
    # nsenter and unshare exec (no fork), so is sh: the process is the sshd itself.
    return [
        "nsenter",
        f"--net={NETNS_DIR / node['netns']}",
        "unshare",
        "--uts",
        "--mount",
        "--propagation",
        "private",
        "/bin/sh",
        "-c",
        script,
        "dtfbench-testbed-node",
        node["name"],
        str(ndir / "local_ssd"),
        SSD_MOUNT,
        SSHD,
        str(ndir / "sshd_config"),
        cgroup,
        str(LOGIN_BASHRC),
        str(ndir / "bashrc"),
    ]


def start_keeper(state: dict, timeout: float = 15.0) -> None:
    """Start the test bed's keeper, which starts the sshds; wait for their pids.

    The keeper (`testbed.py _keeper`) is the parent of every node's sshd and the child
    subreaper of everything below them (SSH sessions, TF tasks that detach): when `down`
    kills them, it reaps them at once, so no zombie `sshd` lingers whatever this machine's
    init does. `setsid --fork` detaches the keeper from the caller (the CLI or pytest).
    """
    directory = Path(state["dir"])
    ready = directory / "keeper.json"
    ready.unlink(missing_ok=True)
    with open(directory / "keeper.log", "ab") as log:
        subprocess.run(
            ["setsid", "--fork", sys.executable, str(Path(__file__).resolve()), "_keeper", "--dir", str(directory)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            check=True,
            close_fds=True,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            started = json.loads(ready.read_text())
        except (OSError, ValueError):
            time.sleep(0.02)
            continue
        state["keeper_pid"] = started["keeper_pid"]
        for node in state["nodes"]:
            node["sshd_pid"] = started["sshd_pids"].get(node["name"])
        save_state(state)
        if started.get("error"):
            raise TestbedError(f"the keeper could not start the nodes: {started['error']}")
        return
    raise TestbedError(
        f"the keeper did not start; its log: {(directory / 'keeper.log').read_text(errors='replace')[-2000:]}"
    )


def keeper(directory: Path) -> int:
    """Parent and reaper of the nodes' sshds; exits (after reaping everything) on SIGTERM."""
    import ctypes

    directory = Path(directory).resolve()
    state = load_state(directory)
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def stop(signum, frame):
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    pids, error = {}, None
    try:
        for node in state["nodes"]:
            with open(Path(node["dir"]) / "sshd.log", "ab") as log:
                child = subprocess.Popen(
                    node_argv(state, node),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    close_fds=True,
                    start_new_session=True,
                )
            pids[node["name"]] = child.pid
    except OSError as err:
        error = str(err)
    write_atomic(
        directory / "keeper.json", json.dumps({"keeper_pid": os.getpid(), "sshd_pids": pids, "error": error}) + "\n"
    )
    try:
        while True:
            try:
                os.wait()
            except ChildProcessError:
                time.sleep(0.5)
    finally:
        # Reap whatever `down` killed and is still a zombie, then go.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.02)
    return 0


def wait_for_sshd(state: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    waiting = list(state["nodes"])
    while waiting:
        node = waiting[0]
        try:
            with socket.create_connection((node["public_ip"], 22), timeout=1) as conn:
                conn.settimeout(2)
                if conn.recv(64).startswith(b"SSH-"):
                    waiting.pop(0)
                    continue
        except OSError:
            pass
        if time.monotonic() > deadline:
            log = Path(node["dir"], "sshd.log").read_text(errors="replace")[-2000:]
            raise TestbedError(
                f"sshd of {node['name']} at {node['public_ip']}:22 not ready after {timeout}s; its log: {log}"
            )
        time.sleep(0.05)


def write_inventories(state: dict) -> None:
    directory = Path(state["dir"])
    conn = connection_vars(state)
    lines = [
        "# The test bed's hosts (tests/testbed/testbed.py); written by `up`, removed by `down`.",
        "all:",
        "  children:",
        "    tf_nodes:",
        "      vars:",
    ]
    lines += [f"        {k}: {json.dumps(v)}" for k, v in conn.items()]
    lines += [f"        tf_devices: {state['devices']}", "        tf_device_type: cpu", "      hosts:"]
    for node in state["nodes"]:
        lines.append(f"        {node['name']}: {{ansible_host: {node['public_ip']}, private_ip: {node['private_ip']}}}")
    write_atomic(directory / "hosts.yml", "\n".join(lines) + "\n")

    # The users' format: one address a line, line i of one file matching line i of the other.
    write_atomic(directory / "aws_public_ips.txt", "".join(n["public_ip"] + "\n" for n in state["nodes"]))
    write_atomic(directory / "aws_private_ips.txt", "".join(n["private_ip"] + "\n" for n in state["nodes"]))
    write_atomic(
        directory / "testbed.ip_pairs.yml",
        "\n".join(
            [
                "# The test bed through the ip_pairs inventory plugin (plugins/inventory/ip_pairs.py).",
                "# Connection settings: group_vars/tf_nodes.yml next to this file.",
                "plugin: ip_pairs",
                "public_ips_file: aws_public_ips.txt",
                "private_ips_file: aws_private_ips.txt",
                "group: tf_nodes",
                f"tf_devices: {state['devices']}",
                "tf_device_type: cpu",
                "",
            ]
        ),
    )
    # Molecule's instance config (its create playbook copies it): the same hosts.
    write_atomic(
        directory / "molecule_instances.yml",
        "".join(
            f"- instance: {n['name']}\n  address: {n['public_ip']}\n  user: root\n  port: 22\n"
            f"  identity_file: {directory / 'id_ed25519'}\n"
            for n in state["nodes"]
        ),
    )
    (directory / "group_vars").mkdir(exist_ok=True)
    write_atomic(
        directory / "group_vars" / "tf_nodes.yml",
        "---\n# Connection settings of the test bed's nodes (tests/testbed/testbed.py).\n"
        + "".join(f"{k}: {json.dumps(v)}\n" for k, v in conn.items()),
    )


def connection_vars(state: dict) -> dict:
    directory = Path(state["dir"])
    return {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(directory / "id_ed25519"),
        "ansible_ssh_common_args": (
            f"-o UserKnownHostsFile={directory / 'known_hosts'} "
            "-o GlobalKnownHostsFile=/dev/null -o StrictHostKeyChecking=yes "
            "-o IdentitiesOnly=yes -o PasswordAuthentication=no"
        ),
        "ansible_python_interpreter": state["python"],
        "dtfbench_python": state["python"],
        # Each node's run files on its own disk (the tf_cluster/benchmark run root).
        "dtfbench_run_root": f"{SSD_MOUNT}/dtfbench/runs",
    }


# --------------------------------------------------------------------------- down


def down(directory: Path = DEFAULT_DIR) -> bool:
    """Remove everything the test bed in `directory` created. Idempotent; True if it found one."""
    return TESTBED.down(directory, take_down, remove_files)


def take_down(directory: Path, state: dict) -> None:
    """Stop its processes, remove its namespaces, links, cgroups and shared folders."""
    # 1. The controller's SSH master connections to the nodes (they would otherwise keep
    #    an SSH session, and so processes, alive in the namespaces for ControlPersist).
    kill_all(lambda: ssh_clients_of(directory, state["public_net"]))
    # 2. Every process in each node's network namespace: sshd, sessions, TF tasks.
    for node in state["nodes"]:
        inode = netns_inode(node["netns"])
        if inode is not None:
            kill_all(lambda inode=inode, node=node: pids_in_netns(inode) + cgroup_pids(state, node))
        else:
            kill_all(lambda node=node: cgroup_pids(state, node))
        pid = node.get("sshd_pid")
        if pid and alive(pid) and any(node["dir"] + "/" in arg for arg in cmdline(pid)):
            kill_all(lambda pid=pid: [pid])
    # 3. The keeper, which reaps all of them first (then init reaps the keeper).
    kill_all(lambda: keepers_of(directory), grace=5)
    # 4. Its cgroups (empty now), namespaces (their veth ends go with them), host veth ends,
    #    anything else of this prefix (a crash between create and record), and the bridges
    #    last: the public one is the range's claim, and once it is gone another `up` may take
    #    the range and make the same names.
    remove_cgroups(state)
    namespaces = netns_names()
    for node in state["nodes"]:
        if node["netns"] in namespaces:
            ip("netns", "del", node["netns"])
    links = link_names()
    for node in state["nodes"]:
        for name in (node["veth_public"], node["veth_private"]):
            if name in links:
                ip("link", "del", name, check=False)
    nh.remove_prefixed(state["prefix"] + "-", last=[state["bridge_private"], state["bridge_public"]])
    remove_shared_dirs(state)


def other_testbeds_up() -> bool:
    return any(PREFIX_RE.match(name) for name in link_names() | netns_names())


def mounted_anywhere(path: str) -> bool:
    """True when `path` is a mount point in any mount namespace (another test bed's node)."""
    seen = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            ns = os.readlink(f"/proc/{entry}/ns/mnt")
            if ns in seen:
                continue
            seen.add(ns)
            with open(f"/proc/{entry}/mountinfo") as f:
                if any(line.split()[4] == path for line in f):
                    return True
        except (OSError, IndexError):
            continue
    return False


def remove_shared_dirs(state: dict) -> None:
    """/mnt/local_ssd and /run/sshd: only when this test bed made them and it is the last one."""
    if other_testbeds_up():
        return
    for path in state.get("created_dirs", []) + [SSD_MOUNT, PRIVSEP_DIR]:
        p = Path(path)
        marker = p / CREATED_MARKER
        if not marker.exists():
            continue
        if any(child.name != CREATED_MARKER for child in p.iterdir()) or mounted_anywhere(path):
            continue  # someone put files there, or mounted something on it: leave it
        if path == PRIVSEP_DIR and any(
            os.path.basename(cmdline(int(e))[0] if cmdline(int(e)) else "") == "sshd"
            for e in os.listdir("/proc")
            if e.isdigit()
        ):
            continue  # another sshd (the system's?) needs it
        marker.unlink()
        try:
            p.rmdir()
        except OSError:
            pass


OUR_FILES = (
    "keeper.json",
    "keeper.log",
    "hosts.yml",
    "aws_public_ips.txt",
    "aws_private_ips.txt",
    "testbed.ip_pairs.yml",
    "molecule_instances.yml",
    "id_ed25519",
    "id_ed25519.pub",
    "authorized_keys",
    "known_hosts",
)


def remove_files(directory: Path, state: dict | None) -> None:
    if not directory.exists():
        return
    if state is not None:
        shutil.rmtree(directory / "nodes", ignore_errors=True)
        shutil.rmtree(directory / "group_vars", ignore_errors=True)
        for name in OUR_FILES:
            (directory / name).unlink(missing_ok=True)
        for tmp in directory.glob("*.tmp"):
            tmp.unlink(missing_ok=True)
        (directory / STATE).unlink(missing_ok=True)
    try:
        directory.rmdir()  # only when nothing else is in it
    except OSError:
        pass


# --------------------------------------------------------------------------- leftovers


def leftovers(state_or_prefix: dict | str, directory: Path | str | None = None) -> list[str]:
    """What of a test bed still exists (empty when it is fully down). For tests."""
    if isinstance(state_or_prefix, dict):
        prefix = state_or_prefix["prefix"]
        directory = directory or state_or_prefix["dir"]
    else:
        prefix = state_or_prefix
    markers = [] if directory is None else [directory]
    files = [] if directory is None else [Path(directory, STATE)]
    state = state_or_prefix if isinstance(state_or_prefix, dict) else None

    def scan(ours: bool) -> list[str]:
        """With `ours` false: only the processes and files of this bed's folder."""
        found = TESTBED.leftovers(prefix, markers, files, names=ours)
        root = cgroup2_root()
        if ours and root and Path(root, f"dtfbench-{prefix}").exists():
            found.append(f"cgroup {root}/dtfbench-{prefix}")
        if directory is not None and state is not None:
            for pid in ssh_clients_of(Path(directory), state["public_net"] if ours else None):
                if alive(pid):
                    found.append(f"ssh client {pid}: {' '.join(cmdline(pid))}")
        return found

    found = scan(ours=True)
    # Once another test bed has claimed the range, its names, cgroup and addresses are that
    # bed's. A claim makes its bridge before any of them, so a look after the scan covers all
    # the scan saw; then only this bed's folder and processes can still be its own.
    if found and state is not None and TESTBED.reclaimed(state):
        found = scan(ours=False)
    return found


def status(directory: Path) -> dict | None:
    return TESTBED.status(directory, add_liveness)


def add_liveness(state: dict) -> None:
    for node in state["nodes"]:
        node["netns_exists"] = netns_inode(node["netns"]) is not None
        node["sshd_alive"] = bool(node.get("sshd_pid")) and alive(node["sshd_pid"])
        node["private_link"] = link_shaping(node) if node["netns_exists"] else []


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="testbed.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="{up,shape,share,down,status}")
    p_up = sub.add_parser("up", help="create the test bed and print its inventory's path")
    p_up.add_argument("--hosts", type=int, default=DEFAULT_HOSTS, help=f"1 to {MAX_HOSTS} (default {DEFAULT_HOSTS})")
    p_up.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"state and files (default {DEFAULT_DIR})")
    p_up.add_argument("--python", help="interpreter of the nodes (default: the project's .venv python)")
    p_up.add_argument("--devices", type=int, default=1, help="tf_devices per host: CPU worker slots (default 1)")
    p_up.add_argument(
        "--link-mbit", type=float, help="shape each node's private link to this many Mbit/s each way (tbf)"
    )
    p_shape = sub.add_parser("shape", help="shape (or, with --unshaped, unshape) the private links of a test bed")
    p_shape.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    rate = p_shape.add_mutually_exclusive_group(required=True)
    rate.add_argument("--link-mbit", type=float, help="Mbit/s each way of every node's private link")
    rate.add_argument("--unshaped", action="store_true", help="remove the limit")
    p_share = sub.add_parser(
        "share", help="serve one node's /mnt/local_ssd/shared at /mnt/shared on every node (shared_fs.py)"
    )
    p_share.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    p_share.add_argument("--server", default="node01", help="the node that serves (default node01)")
    p_share.add_argument("--link-mbit", type=float, help="shape the server's private link alone (tbf)")
    p_down = sub.add_parser("down", help="remove everything of the test bed (idempotent)")
    p_down.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    p_status = sub.add_parser("status", help="print the test bed's state as JSON")
    p_status.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    p_keeper = sub.add_parser("_keeper")  # internal: started by `up`
    p_keeper.add_argument("--dir", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "_keeper":
        return keeper(args.dir)
    try:
        if args.command == "up":
            state = up(args.dir, args.hosts, args.python, args.devices, link_mbit=args.link_mbit)
            d = Path(state["dir"])
            print(
                f"test bed {state['prefix']} up: {len(state['nodes'])} hosts, public {state['public_net']} "
                f"(controller {state['controller_ip']}), private {state['private_net']}"
                + (f", private links shaped to {state['link_mbit']:g} Mbit/s" if state["link_mbit"] else "")
            )
            print(f"inventory:        {d / 'hosts.yml'}")
            print(f"ip_pairs config:  {d / 'testbed.ip_pairs.yml'}")
            print(f"ip files:         {d / 'aws_public_ips.txt'} {d / 'aws_private_ips.txt'}")
            print(
                f"ssh:              ssh -i {d / 'id_ed25519'} -o UserKnownHostsFile={d / 'known_hosts'} "
                f"root@{state['nodes'][0]['public_ip']}"
            )
        elif args.command == "shape":
            state = load_state(args.dir.resolve()) if args.dir.exists() else None
            if state is None or state.get("status") != "up":
                raise TestbedError(f"no test bed up in {args.dir}: run `up --dir {args.dir}` first")
            shape(state, None if args.unshaped else args.link_mbit)
            print(f"private links {'unshaped' if args.unshaped else f'shaped to {args.link_mbit:g} Mbit/s'}")
        elif args.command == "share":
            import shared_fs

            state = load_state(args.dir.resolve()) if args.dir.exists() else None
            if state is None or state.get("status") != "up":
                raise TestbedError(f"no test bed up in {args.dir}: run `up --dir {args.dir}` first")
            shared = shared_fs.share(state, args.server, args.link_mbit)
            print(
                f"{shared['server']}'s {shared['export']} at {shared['mount']} on every node ({shared['fs_type']}"
                + (f", its link at {args.link_mbit:g} Mbit/s)" if args.link_mbit else ")")
            )
        elif args.command == "down":
            found = down(args.dir)
            print("test bed down" if found else f"no test bed in {args.dir}: nothing to do")
        else:
            state = status(args.dir)
            print(json.dumps(state, indent=2) if state else f"no test bed in {args.dir}")
            return 0 if state else 1
    except TestbedError as err:
        print(f"testbed.py: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
