#!/usr/bin/env python3
"""A real Slurm cluster on one machine, for the slurm_cluster role's tests.

    python tests/slurm/slurm_testcluster.py up [--nodes 4] [--dir /tmp/dtfbench-slurm-test]
    eval "$(python tests/slurm/slurm_testcluster.py env)"   # SLURM_CONF, DTFBENCH_SLURM_TEST_DIR
    sinfo; sbatch ...; python tests/slurm/slurm_testcluster.py status
    python tests/slurm/slurm_testcluster.py down

Debian's Slurm 22.05 and munge, no accounting:

- ``munged`` on the host with a private socket, key and pid file (``/tmp/dtfbench-slurm-<prefix>-munge``:
  munged wants every directory above its socket open to all, which pytest's are not);
- the nodes' spool directories, which hold the job steps' sockets, in
  ``/tmp/dtfbench-slurm-<prefix>-spool/<node>``: under a test's folder their paths can pass a
  socket's 107 bytes, and a job never starts (slurmd logs it and sbatch says nothing);
- ``slurmctld`` on the host, listening on a free port, reached by the nodes at the host's
  address on a bridge of the cluster's own;
- one ``slurmd`` per node (``node1`` .. ``nodeN``, 1 to 8), each in its own network namespace
  (one veth on the bridge), with its own hostname (UTS namespace) and a private
  ``/etc/hosts`` (mount namespace, bind mount) that names every node, so a job reaches the
  other nodes by name, like on a real cluster. The node is entered with ``nsenter --net``,
  not ``ip netns exec``: the latter remounts /sys, which hides /sys/fs/cgroup, and slurmd
  22.05 then exits without a word.
- one partition ``debug`` (the default) of every node, each node with 1 CPU and the
  feature ``gpu`` (so a batch script written for Piz Daint's ``--constraint=gpu`` runs);
- Tcl modulefiles (``<dir>/modulefiles``) that stand in for Daint's: ``daint-gpu`` (empty)
  and ``TensorFlow/venv-python3``, which, like a site's TensorFlow module, puts a Python
  (the project's .venv's base interpreter) on PATH and TensorFlow (the .venv's
  site-packages) on PYTHONPATH.

Everything else (the filesystem, the process table) is shared: the job directories under
``<dir>`` are the cluster's "shared filesystem".

Address plan: a bridge ``dtsl<X>-br`` with the host at 10.215.X.1/24 and nodeI at
10.215.X.(10+I), X the first number from 15 whose /24 no interface address or route of this
machine touches and no link or namespace named ``dtsl<X>-*`` exists; creating the bridge
claims it (link names are unique, so two clusters started at once never share a range).

``state.json`` records what is created *before* it is created, so ``down`` also undoes a
crashed ``up``; ``up`` refuses a directory that holds a cluster (``down`` it first).
``down`` stops every process in the nodes' namespaces (slurmd, slurmstepd, the jobs), the
slurmctld, the munged and any Slurm client of this cluster, deletes the namespaces, veths
and the bridge and removes the directory's files; it is idempotent. With ``--watch-pid``
(the pytest fixture passes its own pid) a watchdog takes the cluster down when that
process dies without doing it (a killed test run).

Needs root, iproute2, util-linux (nsenter, unshare), slurmctld, slurmd, slurm-client, munge
and environment-modules: scripts/test-deps.sh installs them.

The steps it shares with the test bed (commands, ip, the address range, state.json,
/proc, stopping processes, removing a prefix's namespaces and links) are in
tests/harness/netns_harness.py, and its life cycle (claim, plan, state, down, leftovers,
status) in tests/harness/cluster_harness.py, both linked into this folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import netns_harness as nh
from cluster_harness import NetnsCluster
from netns_harness import (
    NETNS_DIR,
    STATE,
    HarnessError,
    alive,
    all_pids,
    ancestors,
    cmdline,
    ip,
    netns_inode,
    parent_of,
    pids_in_netns,
    run,
    save_state,
    write_atomic,
)

DEFAULT_DIR = Path("/tmp/dtfbench-slurm-test")
DEFAULT_NODES = 4
MAX_NODES = 8
NET = "10.215.{x}.0/24"
CANDIDATES = list(range(15, 250))
PREFIX = "dtsl"
PARTITION = "debug"
FEATURE = "gpu"
SLURMD_PORT = 6818
CTLD_PORTS = range(16817, 17817)
DAEMONS = {
    "slurmctld",
    "slurmd",
    "slurmstepd",
    "munged",
    "srun",
    "sbatch",
    "salloc",
    "scontrol",
    "squeue",
    "sinfo",
    "scancel",
}
TOOLS = {
    "ip": "iproute2",
    "nsenter": "util-linux",
    "unshare": "util-linux",
    "setsid": "util-linux",
    "slurmctld": "slurmctld",
    "slurmd": "slurmd",
    "sbatch": "slurm-client",
    "sinfo": "slurm-client",
    "scontrol": "slurm-client",
    "munged": "munge",
    "mungekey": "munge",
}
MODULES_INIT = "/usr/share/modules/init/bash"


# Something the test cluster cannot do; the message says what and how to fix it. The steps it
# shares with the test bed (netns_harness) raise it too.
ClusterError = HarnessError


# --------------------------------------------------------------------------- helpers


def missing_prerequisites() -> str:
    """Why the test cluster cannot come up here; empty when it can."""
    if os.geteuid() != 0:
        return "the Slurm test cluster needs root (network namespaces, a bridge, bind mounts, slurmd)"
    missing = sorted(
        {
            pkg
            for tool, pkg in TOOLS.items()
            if shutil.which(tool) is None and not os.access(f"/usr/sbin/{tool}", os.X_OK)
        }
    )
    if not os.path.exists(MODULES_INIT):
        missing.append("environment-modules")
    if missing:
        return f"missing Debian packages {', '.join(missing)}: run scripts/test-deps.sh"
    return ""


def check_prerequisites() -> None:
    reason = missing_prerequisites()
    if reason:
        raise ClusterError(reason)


def tool(name: str) -> str:
    found = shutil.which(name)
    if found:
        return found
    for base in ("/usr/sbin", "/usr/bin", "/sbin"):
        if os.access(f"{base}/{name}", os.X_OK):
            return f"{base}/{name}"
    raise ClusterError(f"{name} not found: run scripts/test-deps.sh")


# --------------------------------------------------------------------------- processes


def pids_of_cluster(directory: Path, munge_dir: str = "") -> list[int]:
    """Slurm and munge processes (daemons and clients) whose command line names the cluster's
    directory (or its munge directory), and the cluster's watchdog; never this process or
    its ancestors."""
    markers = [str(directory)] + ([munge_dir] if munge_dir else [])
    spare = ancestors()
    found = []
    for pid in all_pids():
        if pid in spare:
            continue
        argv = cmdline(pid)
        if not argv or not any(marker in arg for marker in markers for arg in argv):
            continue
        name = os.path.basename(argv[0])
        is_watchdog = len(argv) > 2 and argv[1].endswith("slurm_testcluster.py") and argv[2] == "watch"
        if name in DAEMONS or is_watchdog:
            found.append(pid)
    return found


def children_of(parents) -> list[int]:
    """Live children of the given pids (slurmctld's slurmscriptd names no directory)."""
    parents = {pid for pid in parents if pid}
    spare = ancestors()
    return [pid for pid in all_pids() if pid not in spare and parent_of(pid) in parents]


def kill_all(pids_of, grace: float = 3.0) -> None:
    nh.kill_all(pids_of, grace)


CLUSTER = NetnsCluster(
    what="Slurm test cluster",
    prefix=PREFIX,
    candidates=tuple(CANDIDATES),
    networks=lambda x: [NET.format(x=x)],
    bridge_key="bridge",
    error=ClusterError,
    cleanup_hint=f"remove the cluster's namespaces and links ({PREFIX}<N>-*) and its processes by hand",
)
range_is_free = CLUSTER.range_is_free
load_state = CLUSTER.load_state


def free_port(candidates=CTLD_PORTS) -> int:
    for port in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("0.0.0.0", port))
            except OSError:
                continue
            return port
    raise ClusterError(f"no free TCP port in {candidates.start}-{candidates.stop - 1} for slurmctld")


def tf_stand_in() -> dict:
    """The interpreter and site-packages a site's TensorFlow module would provide: the project's
    .venv's base interpreter and the .venv's site-packages (where TensorFlow is)."""
    root = Path(__file__).resolve().parents[2]
    venv_python = root / ".venv" / "bin" / "python"
    probe = (
        "import json, sys, sysconfig; print(json.dumps({'python': getattr(sys, '_base_executable', "
        "sys.executable), 'site': sysconfig.get_paths()['purelib']}))"
    )
    python = str(venv_python) if venv_python.exists() else sys.executable
    try:
        info = json.loads(run(python, "-c", probe).stdout)
    except (ClusterError, ValueError):
        info = {"python": getattr(sys, "_base_executable", sys.executable), "site": sysconfig.get_paths()["purelib"]}
    return {"python": os.path.realpath(info["python"]), "site": info["site"]}


def plan(directory: Path, nodes: int, x: int) -> dict:
    prefix = f"{PREFIX}{x}"
    return CLUSTER.plan(
        directory,
        x,
        net=NET.format(x=x),
        host_ip=f"10.215.{x}.1",
        bridge=f"{prefix}-br",
        cluster_name=prefix,
        controller=socket.gethostname().split(".")[0],
        ctld_port=None,
        partition=PARTITION,
        nodes=[
            {
                "name": f"node{i}",
                "netns": f"{prefix}-n{i}",
                "veth": f"{prefix}-v{i}",
                "ip": f"10.215.{x}.{10 + i}",
                "dir": str(directory / "nodes" / f"node{i}"),
            }
            for i in range(1, nodes + 1)
        ],
        # munged wants every directory above its socket open to all, and a socket path of
        # at most 107 bytes: its own short directory under /tmp, not one under <dir>.
        munge_dir=f"/tmp/dtfbench-slurm-{prefix}-munge",
        # Job steps' sockets are <spool>/<node>_<job>.<step> (up to ~30 bytes): a short folder too.
        spool_dir=f"/tmp/dtfbench-slurm-{prefix}-spool",
        pids={},
        watchdog_pid=None,
    )


def nodelist(state: dict) -> str:
    return f"node[1-{len(state['nodes'])}]" if len(state["nodes"]) > 1 else "node1"


# --------------------------------------------------------------------------- state


def environment(state: dict) -> dict:
    """What a client (sbatch, the role's tasks, the profile) needs to use the cluster."""
    directory = Path(state["dir"])
    return {"SLURM_CONF": str(directory / "etc" / "slurm.conf"), "DTFBENCH_SLURM_TEST_DIR": str(directory)}


def client_env(state: dict) -> dict:
    env = dict(os.environ)
    env.update(environment(state))
    return env


# --------------------------------------------------------------------------- up


def up(
    directory: Path = DEFAULT_DIR, nodes: int = DEFAULT_NODES, ready_timeout: float = 60.0, watch_pid: int | None = None
) -> dict:
    """Bring the cluster up; returns its state. On any failure everything created is undone."""
    if not 1 <= nodes <= MAX_NODES:
        raise ClusterError(f"--nodes {nodes}: choose 1 to {MAX_NODES}")
    check_prerequisites()
    directory = CLUSTER.new_directory(directory, 0o755)

    state = None
    try:
        state = claim(directory, nodes)
        build_network(state)
        write_config(state)
        start_munge(state)
        start_slurmctld(state)
        for node in state["nodes"]:
            start_slurmd(state, node)
        wait_until_idle(state, ready_timeout)
        if watch_pid:
            start_watchdog(state, watch_pid)
        state["status"] = "up"
        save_state(state)
        return state
    except BaseException:
        if state is not None:
            down(directory)
        raise


def claim(directory: Path, nodes: int) -> dict:
    return CLUSTER.claim(lambda x: plan(directory, nodes, x))


def build_network(state: dict) -> None:
    ip("addr", "add", state["host_ip"] + "/24", "dev", state["bridge"])
    ip("link", "set", state["bridge"], "up")
    for node in state["nodes"]:
        ns = node["netns"]
        ip("netns", "add", ns)
        ip("link", "add", node["veth"], "type", "veth", "peer", "name", "eth0", "netns", ns)
        ip("link", "set", node["veth"], "master", state["bridge"], "up")
        ip("-n", ns, "addr", "add", node["ip"] + "/24", "dev", "eth0")
        ip("-n", ns, "link", "set", "eth0", "up")
        ip("-n", ns, "link", "set", "lo", "up")


def write_config(state: dict) -> None:
    d = Path(state["dir"])
    state["ctld_port"] = free_port()
    save_state(state)
    for sub in ("etc", "ctld/state", "work"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    munge = Path(state["munge_dir"])
    shutil.rmtree(munge, ignore_errors=True)  # a crashed cluster's of the same prefix
    munge.mkdir(mode=0o755)
    os.chmod(munge, 0o755)
    for node in state["nodes"]:
        Path(node["dir"]).mkdir(parents=True, exist_ok=True)
    spool = Path(state["spool_dir"])
    shutil.rmtree(spool, ignore_errors=True)  # a crashed cluster's of the same prefix
    for node in state["nodes"]:
        (spool / node["name"]).mkdir(parents=True)

    hosts = [
        "127.0.0.1 localhost",
        "::1 localhost ip6-localhost ip6-loopback",
        f"{state['host_ip']} {state['controller']}",
    ]
    hosts += [f"{node['ip']} {node['name']}" for node in state["nodes"]]
    write_atomic(d / "etc" / "hosts", "\n".join(hosts) + "\n")

    conf = [
        "# Slurm test cluster of dtfbench (tests/slurm/slurm_testcluster.py); no accounting.",
        f"ClusterName={state['cluster_name']}",
        f"SlurmctldHost={state['controller']}({state['host_ip']})",
        f"SlurmctldPort={state['ctld_port']}",
        f"SlurmdPort={SLURMD_PORT}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={Path(state['munge_dir']) / 'munge.socket.2'}",
        "SlurmUser=root",
        "SlurmdUser=root",
        f"StateSaveLocation={d / 'ctld' / 'state'}",
        f"SlurmctldPidFile={d / 'ctld' / 'slurmctld.pid'}",
        f"SlurmctldLogFile={d / 'ctld' / 'slurmctld.log'}",
        f"SlurmdSpoolDir={Path(state['spool_dir']) / '%n'}",
        f"SlurmdPidFile={d / 'nodes' / '%n' / 'slurmd.pid'}",
        f"SlurmdLogFile={d / 'nodes' / '%n' / 'slurmd.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        # No cgroups: the nodes share one kernel and this machine's cgroup tree.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=batch_sched_delay=0",
        # No slurmdbd: finished jobs are read with `scontrol show job` (MinJobAge keeps them).
        "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={d / 'ctld' / 'jobcomp.txt'}",
        "MinJobAge=600",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",
        "KillWait=5",
        "InactiveLimit=0",
        "SlurmctldTimeout=30",
        "SlurmdTimeout=60",
        "MessageTimeout=10",
        "TreeWidth=16",
    ]
    for node in state["nodes"]:
        conf.append(
            f"NodeName={node['name']} NodeAddr={node['ip']} NodeHostname={node['name']} "
            f"CPUs=1 RealMemory=1000 Feature={FEATURE} State=UNKNOWN"
        )
    conf.append(f"PartitionName={PARTITION} Nodes={nodelist(state)} Default=YES MaxTime=INFINITE State=UP")
    write_atomic(d / "etc" / "slurm.conf", "\n".join(conf) + "\n")
    write_atomic(d / "etc" / "cgroup.conf", "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n")
    write_modulefiles(state)
    write_atomic(d / "env.sh", "".join(f"export {k}={v}\n" for k, v in environment(state).items()))


def write_modulefiles(state: dict) -> None:
    d = Path(state["dir"])
    stand_in = tf_stand_in()
    state["tf_python"], state["tf_site"] = stand_in["python"], stand_in["site"]
    bin_dir = d / "modules" / "tensorflow" / "bin"
    # A wrapper, not a link: a venv made by it records the real interpreter as its home.
    for name in ("python3", "python"):
        write_atomic(bin_dir / name, f'#!/bin/sh\nexec {stand_in["python"]} "$@"\n', 0o755)
    write_atomic(
        d / "modulefiles" / "daint-gpu",
        "#%Module1.0\n## Stand-in for Piz Daint's daint-gpu (tests/slurm/slurm_testcluster.py)\n"
        "setenv DTFBENCH_TEST_DAINT_GPU 1\n",
    )
    write_atomic(
        d / "modulefiles" / "TensorFlow" / "venv-python3",
        "#%Module1.0\n## Stand-in for a site's TensorFlow module: a Python on PATH and\n"
        "## TensorFlow on PYTHONPATH (tests/slurm/slurm_testcluster.py)\n"
        f"prepend-path PATH {bin_dir}\n"
        f"prepend-path PYTHONPATH {stand_in['site']}\n"
        "setenv TF_CPP_MIN_LOG_LEVEL 2\n",
    )
    save_state(state)


def start_munge(state: dict) -> None:
    d = Path(state["munge_dir"])
    key = d / "munge.key"
    if not key.exists():
        run(tool("mungekey"), "--create", f"--keyfile={key}")
    os.chmod(key, 0o600)
    run(
        tool("munged"),
        f"--socket={d / 'munge.socket.2'}",
        f"--key-file={key}",
        f"--pid-file={d / 'munged.pid'}",
        f"--log-file={d / 'munged.log'}",
        f"--seed-file={d / 'munged.seed'}",
        "--num-threads=4",
    )
    state["pids"]["munged"] = wait_for_pidfile(d / "munged.pid", "munged", d / "munged.log")
    save_state(state)


def start_slurmctld(state: dict) -> None:
    d = Path(state["dir"])
    conf = d / "etc" / "slurm.conf"
    run("setsid", "--fork", tool("slurmctld"), "-i", "-f", str(conf), env=client_env(state))
    state["pids"]["slurmctld"] = wait_for_pidfile(
        d / "ctld" / "slurmctld.pid", "slurmctld", d / "ctld" / "slurmctld.log"
    )
    save_state(state)


def start_slurmd(state: dict, node: dict) -> None:
    d = Path(state["dir"])
    ndir = Path(node["dir"])
    script = 'set -e; echo "$1" > /proc/sys/kernel/hostname; mount --bind "$2" /etc/hosts; exec "$3" -D -N "$1" -f "$4"'
    argv = [
        "setsid",
        "--fork",
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
        "dtfbench-slurm-node",
        node["name"],
        str(d / "etc" / "hosts"),
        tool("slurmd"),
        str(d / "etc" / "slurm.conf"),
    ]
    with open(ndir / "start.log", "ab") as log:
        subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, check=True, close_fds=True, env=client_env(state)
        )
    state["pids"][node["name"]] = wait_for_pidfile(
        ndir / "slurmd.pid", f"slurmd of {node['name']}", ndir / "slurmd.log", ndir / "start.log"
    )
    save_state(state)


def wait_for_pidfile(pidfile: Path, what: str, *logs: Path, timeout: float = 15) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid = int(pidfile.read_text().strip())
            if alive(pid):
                return pid
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    tails = "; ".join(f"{log}: {log.read_text(errors='replace')[-1500:]}" for log in logs if log.exists())
    raise ClusterError(f"{what} did not start (no live pid in {pidfile}); {tails or 'no log'}")


def node_states(state: dict) -> dict[str, str]:
    done = run("sinfo", "--noheader", "--Node", "--format=%N %T", env=client_env(state), check=False, timeout=15)
    states = {}
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2:
            states[parts[0]] = parts[1]
    return states


def wait_until_idle(state: dict, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    names = [node["name"] for node in state["nodes"]]
    while True:
        states = node_states(state)
        if all(states.get(name, "").rstrip("*~#!%$@^-") == "idle" for name in names):
            return
        for name, pid in state["pids"].items():
            if not alive(pid):
                log = (
                    Path(state["dir"]) / "nodes" / name / "slurmd.log"
                    if name.startswith("node")
                    else Path(state["dir"]) / "ctld" / "slurmctld.log"
                )
                tail = log.read_text(errors="replace")[-1500:] if log.exists() else "no log"
                raise ClusterError(f"{name} exited while the cluster came up; {log}: {tail}")
        if time.monotonic() > deadline:
            raise ClusterError(f"nodes not idle after {timeout}s: {states}")
        time.sleep(0.1)


def start_watchdog(state: dict, watch_pid: int) -> None:
    argv = [
        "setsid",
        "--fork",
        sys.executable,
        str(Path(__file__).resolve()),
        "watch",
        "--dir",
        state["dir"],
        "--pid",
        str(watch_pid),
    ]
    log = Path(state["dir"]) / "watchdog.log"
    with open(log, "ab") as out:
        subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, check=True, close_fds=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = [pid for pid in pids_of_cluster(Path(state["dir"])) if "watch" in cmdline(pid)]
        if pids:
            state["watchdog_pid"] = pids[0]
            save_state(state)
            return
        time.sleep(0.02)
    raise ClusterError(f"the watchdog did not start; {log}: {log.read_text(errors='replace')[-1000:]}")


def watch(directory: Path, pid: int, interval: float = 0.5) -> int:
    """Take the cluster down when `pid` dies; end when the cluster is gone."""
    directory = Path(directory).resolve()
    while (directory / STATE).exists():
        if not alive(pid):
            print(f"watched process {pid} is gone: taking the cluster down", flush=True)
            down(directory)
            return 0
        time.sleep(interval)
    return 0


# --------------------------------------------------------------------------- down


def down(directory: Path = DEFAULT_DIR) -> bool:
    """Remove everything the cluster in `directory` created. Idempotent; True if it found one."""
    return CLUSTER.down(directory, take_down, remove_files)


def take_down(directory: Path, state: dict) -> None:
    """Stop its daemons and jobs, remove its namespaces, links and munge folder."""
    # 1. Every process in the nodes' namespaces: slurmd, slurmstepd, the jobs' tasks.
    for node in state["nodes"]:
        inode = netns_inode(node["netns"])
        if inode is not None:
            kill_all(lambda inode=inode: pids_in_netns(inode))
    # 2. slurmctld, munged, clients of this cluster and the watchdog (not the caller).
    munge_dir = state.get("munge_dir", "")
    kill_all(lambda: pids_of_cluster(directory, munge_dir) + children_of(state.get("pids", {}).values()))
    for _name, pid in state.get("pids", {}).items():
        argv = cmdline(pid) if pid else []
        ours = any(str(directory) in a or (munge_dir and munge_dir in a) for a in argv)
        if pid and alive(pid) and pid not in ancestors() and ours:
            kill_all(lambda pid=pid: [pid])
    # 3. The short folders (named by the prefix), namespaces (their veth ends go with them),
    #    host veth ends, anything else with the prefix (a crash between create and record),
    #    and the bridge last: it is the range's claim, and once it is gone another `up` may
    #    take the range and make the same names.
    for short_dir in (munge_dir, state.get("spool_dir", "")):
        if short_dir.startswith("/tmp/dtfbench-slurm-"):
            shutil.rmtree(short_dir, ignore_errors=True)
    nh.remove_prefixed(state["prefix"] + "-", last=[state["bridge"]], grace=3.0)


OUR_ENTRIES = ("etc", "ctld", "nodes", "modulefiles", "modules", "work", "env.sh", "watchdog.log")


def remove_files(directory: Path, state: dict | None) -> None:
    if state is None or not directory.exists():
        return
    for name in OUR_ENTRIES:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    for tmp in directory.glob("*.tmp"):
        tmp.unlink(missing_ok=True)
    (directory / STATE).unlink(missing_ok=True)
    try:
        directory.rmdir()  # only when nothing else is in it
    except OSError:
        pass


# --------------------------------------------------------------------------- leftovers


def leftovers(state: dict) -> list[str]:
    """What of a cluster still exists (empty when it is fully down). For tests."""

    def scan(ours: bool) -> list[str]:
        """With `ours` false: only the processes and files of this cluster's folder."""
        markers = [state["dir"]] + ([state["munge_dir"]] if ours and state.get("munge_dir") else [])
        short_dirs = [state[key] for key in ("munge_dir", "spool_dir") if ours and state.get(key)]
        found = CLUSTER.leftovers(state["prefix"], markers, [Path(state["dir"], STATE), *short_dirs], names=ours)
        for name, pid in state.get("pids", {}).items():
            if pid and alive(pid) and any(marker in a for marker in markers for a in cmdline(pid)):
                found.append(f"{name} {pid}")
        return found

    found = scan(ours=True)
    # Once another cluster has claimed the range, the names and short folders of its prefix are
    # that cluster's. A claim makes its bridge before any of them, so a look after the scan
    # covers all the scan saw; then only this cluster's folder and processes can be its own.
    if found and CLUSTER.reclaimed(state):
        found = scan(ours=False)
    return found


def status(directory: Path) -> dict | None:
    return CLUSTER.status(directory, add_liveness)


def add_liveness(state: dict) -> None:
    state["alive"] = {name: bool(pid) and alive(pid) for name, pid in state.get("pids", {}).items()}
    if state.get("status") == "up":
        state["node_states"] = node_states(state)


# --------------------------------------------------------------------------- pytest fixture

try:
    import pytest
except ImportError:  # pragma: no cover - the CLI needs no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def slurm_test_cluster(tmp_path_factory):
        """A Slurm test cluster of 4 nodes for the session: its state (``environment``: what
        clients need). Down at the end, and by its watchdog if the session is killed."""
        directory = tmp_path_factory.mktemp("slurm") / "cluster"
        state = up(directory, DEFAULT_NODES, watch_pid=os.getpid())
        state["environment"] = environment(state)
        try:
            yield state
        finally:
            down(directory)
            left = leftovers(state)
            assert not left, f"the Slurm test cluster left {left}"

    @pytest.fixture(scope="module")
    def slurm_env(ansible_env, slurm_test_cluster):
        """ansible-playbook's environment (tests/conftest.py) with the test cluster's client
        variables (SLURM_CONF, ...): what a user on the login node has."""
        env = dict(ansible_env)
        env.update(slurm_test_cluster["environment"])
        return env


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="slurm_testcluster.py",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_up = sub.add_parser("up", help="bring the cluster up and print how to use it")
    p_up.add_argument("--nodes", type=int, default=DEFAULT_NODES, help=f"1 to {MAX_NODES} (default {DEFAULT_NODES})")
    p_up.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"state and files (default {DEFAULT_DIR})")
    p_up.add_argument("--watch-pid", type=int, help="take the cluster down when this process dies")
    p_up.add_argument(
        "--replace", action="store_true", help="take down a cluster found in --dir first (one left by a crash)"
    )
    for name, text in (
        ("down", "remove everything of the cluster (idempotent)"),
        ("status", "print the cluster's state as JSON"),
        ("env", "print the shell exports a client needs"),
    ):
        sub.add_parser(name, help=text).add_argument("--dir", type=Path, default=DEFAULT_DIR)
    p_watch = sub.add_parser("watch", help=argparse.SUPPRESS)
    p_watch.add_argument("--dir", type=Path, required=True)
    p_watch.add_argument("--pid", type=int, required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "up":
            if args.replace:
                down(args.dir)
            start = time.monotonic()
            state = up(args.dir, args.nodes, watch_pid=args.watch_pid)
            print(
                f"Slurm test cluster {state['prefix']} up in {time.monotonic() - start:.1f}s: "
                f"{len(state['nodes'])} nodes {nodelist(state)} in partition {state['partition']}, "
                f"net {state['net']}, slurmctld {state['host_ip']}:{state['ctld_port']}"
            )
            print(f"environment: . {Path(state['dir']) / 'env.sh'}")
        elif args.command == "down":
            found = down(args.dir)
            print("Slurm test cluster down" if found else f"no Slurm test cluster in {args.dir}: nothing to do")
        elif args.command == "env":
            state = load_state(Path(args.dir).resolve())
            if state is None:
                print(f"no Slurm test cluster in {args.dir}", file=sys.stderr)
                return 1
            print("".join(f"export {k}={v}\n" for k, v in environment(state).items()), end="")
        elif args.command == "watch":
            return watch(args.dir, args.pid)
        else:
            state = status(args.dir)
            print(json.dumps(state, indent=2) if state else f"no Slurm test cluster in {args.dir}")
            return 0 if state else 1
    except ClusterError as err:
        print(f"slurm_testcluster.py: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
