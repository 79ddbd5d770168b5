"""A shared file system on the test bed: one node serves a folder of its local disk to all.

    python tests/testbed/testbed.py share --server node01 [--link-mbit 200] --dir /tmp/dtfbench-testbed

The Summitdev study trains from a shared file system and from node-local disk (issue 55): a
shared server's link is the slower path every node's reads cross, and its load is everybody's.
Here the server node's ``/mnt/local_ssd/shared`` (its own disk) appears at ``/mnt/shared`` on
every node:

- **Protocol: SFTP through sshfs (FUSE), not NFS.** This machine's kernel (6.18, no loadable
  modules) has neither an NFS client (``nfs``/``nfs4`` are not in /proc/filesystems) nor a
  mountable ``nfsd``; nfs-ganesha could serve in user space, but nothing could mount it. FUSE is
  in the kernel, and sshfs is Debian's. What the runs see is what a network file system gives:
  a mount of another node's folder (``fuse.sshfs``, source ``root@<server's private address>:``),
  every read crossing the server's private link, and the kernel's page cache in front of it
  (``kernel_cache``: pages stay cached across opens, as NFS keeps them while the file is
  unchanged, so ``cache=warm`` means the same on both). What it does not model: NFS's
  attribute caching and read-ahead sizes, Lustre's striping over servers (docs/storage.md).
- **Server:** a second sshd in the server node's namespaces, listening on its *private* address
  only (the file traffic takes the private link, as a cluster's storage network would), with the
  node's host key, the test bed's client key and ``ForceCommand internal-sftp``: it serves files,
  never a shell. It is started through the node's own sshd, so the test bed's keeper reaps it.
- **Clients:** every other node mounts it with sshfs in its own mount namespace (each node's
  mounts are private), started over SSH like any of its processes (in its cgroup and network
  namespace); the server node bind-mounts the folder itself, so every node reads the dataset
  at the same path. ``down`` stops them with the rest of the node's processes; the mounts go
  with the namespaces.
- **Throttling:** ``link_mbit`` shapes the server's private link alone (tbf, both ends): the
  shared file system is slow while the nodes' links to each other are not, as on a cluster
  whose storage is busy. The whole test bed's ``shape`` still applies to every node.

The share is recorded in state.json (``shared``) before anything is started.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import testbed as tb
from netns_harness import run, save_state, write_atomic

SHARED_MOUNT = "/mnt/shared"
# On the server node: a folder of its own local disk.
EXPORT = tb.SSD_MOUNT + "/shared"
SSHFS = "/usr/bin/sshfs"


def node_by_name(state: dict, name: str) -> dict:
    for node in state["nodes"]:
        if node["name"] == name:
            return node
    names = ", ".join(n["name"] for n in state["nodes"])
    raise tb.TestbedError(f"--server {name}: the test bed has no such node; choose one of {names}")


def on_node(state: dict, node: dict, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Run a shell command on `node` over its SSH (in its namespaces and cgroup); fails with its output."""
    directory = Path(state["dir"])
    options = {"UserKnownHostsFile": directory / "known_hosts", "StrictHostKeyChecking": "yes", "BatchMode": "yes"}
    argv = ["ssh", "-i", str(directory / "id_ed25519"), *(f"-o{key}={value}" for key, value in options.items())]
    argv += [f"root@{node['public_ip']}", command]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise tb.TestbedError(f"{node['name']}: `{command}` failed ({done.returncode}): {done.stderr.strip()}")
    return done


def file_server_config(state: dict, server: dict) -> Path:
    """The file server's sshd_config: the node's own, on its private address, SFTP only."""
    ndir = Path(server["dir"])
    own = (ndir / "sshd_config").read_text().splitlines()
    lines = ["# the shared file system's server: SFTP only, private address (tests/testbed/shared_fs.py)"]
    for line in own[1:]:
        if line.startswith("ListenAddress "):
            line = f"ListenAddress {server['private_ip']}:22"
        elif line.startswith("PidFile "):
            line = f"PidFile {ndir / 'fileserver.pid'}"
        lines.append(line)
    lines.insert(-1, "ForceCommand internal-sftp")
    path = ndir / "fileserver_config"
    write_atomic(path, "\n".join(lines) + "\n", 0o600)
    return path


def share(state: dict, server_name: str = "node01", link_mbit: float | None = None) -> dict:
    """Serve `server_name`'s /mnt/local_ssd/shared at /mnt/shared on every node; returns state['shared'].

    `link_mbit` shapes the server's private link alone (None: as the test bed's links are)."""
    if state.get("shared"):
        raise tb.TestbedError(f"the test bed already shares {state['shared']['server']}'s {EXPORT}")
    if not Path(SSHFS).exists():
        raise tb.TestbedError(f"{SSHFS} is missing: install Debian's sshfs (scripts/test-deps.sh does)")
    tb.check_link_mbit(link_mbit)
    server = node_by_name(state, server_name)
    directory = Path(state["dir"])
    state["shared"] = {
        "server": server["name"],
        "address": server["private_ip"],
        "export": EXPORT,
        "mount": SHARED_MOUNT,
        "fs_type": "fuse.sshfs",
        "link_mbit": link_mbit,
    }
    save_state(state)
    tb.ensure_dir(SHARED_MOUNT, state)
    if link_mbit is not None:
        for ns, dev in tb.private_link_ends(server):
            run("tc", *ns, "qdisc", "replace", "dev", dev, "root", *tb.tbf_args(link_mbit))

    config = file_server_config(state, server)
    export, mount = shlex.quote(EXPORT), shlex.quote(SHARED_MOUNT)
    on_node(
        state,
        server,
        f"mkdir -p {export} && mount --bind {export} {mount} && "
        f"/usr/sbin/sshd -f {shlex.quote(str(config))} -E {shlex.quote(str(Path(server['dir']) / 'fileserver.log'))}",
    )
    # The clients know the file server by the node's host key at its private address.
    host_key = (Path(server["dir"]) / "ssh_host_ed25519_key.pub").read_text().split()[:2]
    with open(directory / "known_hosts", "a") as known:
        known.write(f"{server['private_ip']} {' '.join(host_key)}\n")
    options = ",".join(
        [
            f"IdentityFile={directory / 'id_ed25519'}",
            f"UserKnownHostsFile={directory / 'known_hosts'}",
            "StrictHostKeyChecking=yes",
            "BatchMode=yes",
            # Pages stay cached across opens (NFS keeps them while the file is unchanged).
            "kernel_cache",
            # A server that stops answering fails reads after 3 x 5 s instead of hanging them.
            "ServerAliveInterval=5",
            "ServerAliveCountMax=3",
            "reconnect",
        ]
    )
    source = shlex.quote(f"root@{server['private_ip']}:{EXPORT}")
    for node in state["nodes"]:
        if node is not server:
            on_node(state, node, f"{SSHFS} -o {shlex.quote(options)} {source} {mount}")
    return state["shared"]


def shared_dir(state: dict) -> Path:
    """The host-side folder behind the share (the server node's local disk): write the dataset here."""
    server = node_by_name(state, state["shared"]["server"])
    return Path(server["dir"]) / "local_ssd" / "shared"
