"""Network namespaces, bridges and processes: what both test harnesses are built of.

The multi-host test bed (tests/testbed/testbed.py) and the Slurm test cluster
(tests/slurm/slurm_testcluster.py) each give their "hosts" a network namespace on a bridge of
their own, in an address range they claim at ``up``, and take everything down again by
state.json alone. The steps they share live here, once:

- running a command and failing with the command, its exit status and its output;
- ``ip`` (JSON output), the links and namespaces there are, the networks this machine uses;
- claiming a free address range by creating its bridge (the kernel refuses a second link of
  the same name, so two harnesses started at once never share a range); the bridge goes
  last at ``down``, and a range taken down may be claimed again at once, by another run;
- state.json, recorded *before* anything it names is created, written atomically;
- /proc: command lines, liveness, parents, the processes of a network namespace;
- stopping processes (SIGTERM, then SIGKILL after a grace period, until none is left), and
  removing the namespaces and links of a prefix.

Both harnesses run as scripts as well (their CLIs, the test bed's keeper, the cluster's
watchdog), so this module is reached through a file link in each of their folders
(``tests/testbed/netns_harness.py``, ``tests/slurm/netns_harness.py``): ``import
netns_harness`` works from a script's folder and from pytest's ``pythonpath`` alike, with no
sys.path edit. It reads /proc and writes files through dtfbench.linux (the project's one place
for those rules; the harnesses run with the .venv's Python, where dtfbench is installed).
"""

from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from dtfbench.linux import files, procfs

NETNS_DIR = Path("/run/netns")
STATE = "state.json"

# The /proc readers both harnesses use, from the project's one place for them.
alive = procfs.alive
cmdline = procfs.cmdline


class HarnessError(RuntimeError):
    """Something a test harness cannot do; the message says what and how to fix it."""


# --------------------------------------------------------------------------- commands


def run(
    *argv: str, check: bool = True, capture: bool = True, env: dict | None = None, timeout: float | None = 60
) -> subprocess.CompletedProcess:
    """Run argv; with `check`, a non-zero exit is a HarnessError naming the command and its output."""
    done = subprocess.run(list(argv), capture_output=capture, text=True, env=env, timeout=timeout)
    if check and done.returncode != 0:
        raise HarnessError(
            f"{' '.join(argv)} failed (exit {done.returncode}): {(done.stderr or done.stdout or '').strip()}"
        )
    return done


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return run("ip", *args, check=check)


def ip_json(*args: str):
    out = ip("-j", *args).stdout.strip()
    return json.loads(out) if out else []


def link_names() -> set[str]:
    return {link["ifname"] for link in ip_json("link", "show")}


def link_index(name: str) -> int | None:
    """The kernel's index of link `name`, None when there is none. The kernel hands indexes out
    in turn and does not reuse one soon, so a link deleted and made again has another."""
    done = ip("-j", "link", "show", "dev", name, check=False)
    if done.returncode != 0:
        return None
    links = json.loads(done.stdout or "[]")
    return links[0]["ifindex"] if links else None


def netns_names() -> set[str]:
    return {entry["name"] for entry in ip_json("netns", "list")} if NETNS_DIR.exists() else set()


def write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    """`text` to `path` through a temporary file renamed over it (parents created)."""
    files.write_atomic(path, text, mode)


# --------------------------------------------------------------------------- state.json


def load_state(directory: Path, cleanup_hint: str) -> dict | None:
    """The harness's state in `directory`, None when there is none; `cleanup_hint` says what to
    remove by hand when the file is broken."""
    try:
        return json.loads((directory / STATE).read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as err:
        raise HarnessError(f"{directory / STATE} is not valid JSON ({err}); {cleanup_hint}") from None


def save_state(state: dict) -> None:
    write_atomic(Path(state["dir"]) / STATE, json.dumps(state, indent=2) + "\n")


# --------------------------------------------------------------------------- address ranges


def used_networks() -> list[ipaddress.IPv4Network]:
    """The networks of this (the host's) namespace's addresses and routes."""
    nets = []
    for link in ip_json("-4", "addr", "show"):
        for addr in link.get("addr_info", []):
            nets.append(ipaddress.ip_interface(f"{addr['local']}/{addr['prefixlen']}").network)
    for route in ip_json("-4", "route", "show", "table", "all"):
        dst = route.get("dst")
        if not dst or dst == "default":
            continue
        try:
            nets.append(ipaddress.ip_network(dst, strict=False))
        except ValueError:
            continue
    return nets


def range_is_free(prefix: str, networks: Iterable[str], links: set[str], namespaces: set[str], used: list) -> bool:
    """No link or namespace is named `prefix`*, and no used network overlaps `networks`."""
    if any(name.startswith(prefix) for name in links | namespaces):
        return False
    return not any(ipaddress.ip_network(net).overlaps(other) for net in networks for other in used)


def claim_range(
    candidates: Iterable[int],
    prefix_of: Callable[[int], str],
    networks_of: Callable[[int], list[str]],
    plan_of: Callable[[int], dict],
    bridge_key: str,
) -> dict | None:
    """Claim the first free X of `candidates`: record its plan (status "claiming": a `down`
    then removes nothing of the prefix), create the plan's bridge (`bridge_key`), and record
    status "building" with the bridge's index (``claim_ifindex``: whose claim a bridge of that
    name is, once this one's is gone and another claim took the range). None when no
    candidate is free."""
    links, namespaces, used = link_names(), netns_names(), used_networks()
    for x in candidates:
        if not range_is_free(prefix_of(x), networks_of(x), links, namespaces, used):
            continue
        state = plan_of(x)
        save_state(state)
        done = ip("link", "add", "name", state[bridge_key], "type", "bridge", check=False)
        if done.returncode == 0:
            state["status"] = "building"
            state["claim_ifindex"] = link_index(state[bridge_key])
            save_state(state)
            return state
        if "exists" not in done.stderr:
            raise HarnessError(f"ip link add {state[bridge_key]} type bridge: {done.stderr.strip()}")
    return None


# --------------------------------------------------------------------------- processes


def parent_of(pid: int) -> int:
    return procfs.parent(pid) or 0


def ancestors() -> set[int]:
    """This process and its ancestors: never killed by a sweep (a `down` run from a shell)."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        pid = parent_of(pid)
    return found


def all_pids() -> list[int]:
    return procfs.pids()


def netns_inode(name: str) -> int | None:
    try:
        return os.stat(NETNS_DIR / name).st_ino
    except OSError:
        return None


def pids_in_netns(inode: int) -> list[int]:
    """Every process whose network namespace is the one with this inode (never this process
    or its ancestors)."""
    found = []
    spare = ancestors()
    for pid in all_pids():
        if pid in spare:
            continue
        try:
            if os.readlink(f"/proc/{pid}/ns/net") == f"net:[{inode}]":
                found.append(pid)
        except OSError:
            continue
    return found


def kill_all(pids_of: Callable[[], list[int]], grace: float = 2.0) -> None:
    """SIGTERM what pids_of() returns, then SIGKILL what is left after `grace`, until none."""
    deadline = time.monotonic() + grace
    sig = signal.SIGTERM
    while True:
        pids = [pid for pid in pids_of() if alive(pid)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
        if time.monotonic() > deadline:
            if sig == signal.SIGKILL and time.monotonic() > deadline + 10:
                raise HarnessError(f"processes {pids} survive SIGKILL")
            sig = signal.SIGKILL


def remove_prefixed(prefix: str, last: Iterable[str] = (), grace: float = 2.0) -> None:
    """Every namespace named `prefix`* (its processes stopped first; its veth ends go with it),
    then every link of that name, the ones in `last` (bridges) after the others. For what a
    crash left between creating something and recording it."""
    last = list(last)
    for name in sorted(netns_names()):
        if name.startswith(prefix):
            inode = netns_inode(name)
            if inode is not None:
                kill_all(lambda inode=inode: pids_in_netns(inode), grace=grace)
            ip("netns", "del", name, check=False)
    links = link_names()
    for name in sorted(links):
        if name.startswith(prefix) and name not in last:
            ip("link", "del", name, check=False)
    for name in last:
        if name in links:
            ip("link", "del", name, check=False)


def prefixed_leftovers(prefix: str) -> list[str]:
    """The namespaces and links named `prefix`* that still exist."""
    found = [f"netns {n}" for n in sorted(netns_names()) if n.startswith(prefix)]
    found += [f"link {n}" for n in sorted(link_names()) if n.startswith(prefix)]
    return found
