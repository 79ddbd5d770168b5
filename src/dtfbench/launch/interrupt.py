"""The controller's watchdog: what happens when ansible-playbook ends in the middle of a run.

Started by the callback plugin ``dtfbench_interrupt`` (plugins/callback/) in a session of its
own, so that Ctrl-C, a lost terminal or a SIGKILL of ansible-playbook does not reach it. It
waits until ansible-playbook exits (a pidfd), or until ansible-playbook's exit handler asks it
to act now (a byte on its stdin: after Ctrl-C, so that its line comes before the prompt).
Then, unless the playbook ended normally, it uses the state the plugin keeps in a JSON file:

1. SIGTERM to the processes ansible-playbook left behind (they carry
   ``DTFBENCH_CONTROLLER=<its pid>``): the ssh clients of the waiting module calls, whose
   channels close, and the module calls of a local connection; each waiting ``tf_host_run``
   then stops its host's tasks (the node side, library/tf_host_run.py);
2. ``playbooks/stop-interrupted.yml`` stops every task of the run on every host that had
   started it, also the hosts where no module call was waiting (between two calls), cancels
   the run's Slurm job from the login node that submitted it (Slurm launcher), and stops the
   background reader of a run with ``background_io``;
3. the run in progress is recorded as ``failed``, reason ``interrupted: ...``;
4. one line on stderr: what was stopped, and the command that resumes the sweep.

    python -m dtfbench interrupt watch --pid PID --state FILE
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..linux import procfs

MARKER_ENV = "DTFBENCH_CONTROLLER"
OFF_ENV = "DTFBENCH_INTERRUPT_OFF"
STOP_TIMEOUT = 120.0


def read_state(path: Path) -> dict[str, Any]:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def leftovers(controller: int) -> list[int]:
    """Processes that ansible-playbook `controller` started (they carry its marker) and that
    outlived it, but for shared SSH master connections ("[mux]"), and the Ansible workers
    (forks of ansible-playbook) above them."""
    entry = f"{MARKER_ENV}={controller}".encode()
    own = os.getpid()
    found: set[int] = set()
    for pid in procfs.pids():
        if pid in (own, controller):
            continue
        if entry not in procfs.environ(pid):
            continue
        if any("[mux]" in part for part in procfs.cmdline(pid)):
            continue
        found.add(pid)
        parent = procfs.parent(pid)
        if parent and parent not in (1, own, controller) and "ansible" in " ".join(procfs.cmdline(parent)):
            found.add(parent)
    return sorted(found)


def terminate(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass


def resume_command(argv: list[str], sweep_id: str) -> str:
    """ansible-playbook's command line with -e sweep_id=<sweep_id> (an earlier one dropped)."""
    program, args = argv[0], list(argv[1:])
    short = os.path.basename(program)
    found = shutil.which(short)
    if found and os.path.realpath(found) == os.path.realpath(program):
        program = short
    kept: list[str] = []
    skip = False
    for index, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg in ("-e", "--extra-vars") and index + 1 < len(args) and args[index + 1].startswith("sweep_id="):
            skip = True
            continue
        if arg.startswith("--extra-vars=sweep_id="):
            continue
        kept.append(arg)
    return shlex.join([program, *kept, "-e", f"sweep_id={sweep_id}"])


def teardown_command(argv: list[str], provisioning: dict[str, Any]) -> str:
    """The teardown of an interrupted provisioning: teardown-aws.yml with the cluster's name and region
    (the inventory and vault options of the interrupted command kept)."""
    kept, skip = [], False
    for arg in argv[1:]:
        if skip:
            skip = False
            kept.append(arg)
            continue
        if arg in ("-i", "--inventory", "--vault-id", "--vault-password-file"):
            kept.append(arg)
            skip = True
        elif arg.startswith(("--inventory=", "--vault-id=", "--vault-password-file=", "--ask-vault")):
            kept.append(arg)
    words = ["ansible-playbook", "teardown-aws.yml", *kept, "-e", f"cluster_name={provisioning['cluster_name']}"]
    if provisioning.get("region"):
        words += ["-e", f"region={provisioning['region']}"]
    return " ".join(shlex.quote(w) for w in words)


def why(state: dict[str, Any], controller: int) -> str:
    signame = state.get("signal")
    if signame == "SIGINT":
        return "Ctrl-C (SIGINT) to ansible-playbook"
    if signame:
        return f"{signame} to ansible-playbook"
    return f"ansible-playbook (pid {controller}) ended in the middle of the run (killed, or its terminal went away)"


def stop_hosts(state: dict[str, Any], workdir: Path) -> tuple[subprocess.Popen | None, Path]:
    """Start stop-interrupted.yml for the hosts that started the run, the login nodes that
    submitted its Slurm job and the nodes reading beside it (None: there is none of them)."""
    log = workdir / "stop.log"
    hosts = state.get("hosts") or {}
    slurm = state.get("slurm") or {}
    readers = state.get("readers") or {}
    if not (hosts or slurm or readers) or not state.get("stop_argv"):
        return None, log
    extra = workdir / "stop-vars.json"
    extra.write_text(
        json.dumps(
            {
                "dtfbench_interrupted_hosts": hosts,
                "dtfbench_interrupted_slurm": slurm,
                "dtfbench_interrupted_readers": readers,
            }
        )
    )
    env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
    env[OFF_ENV] = "1"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*state["stop_argv"], "-e", f"@{extra}"],
            cwd=state.get("cwd") or None,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    return process, log


def record(state: dict[str, Any], reason: str) -> str:
    """Record the run in progress as failed (interrupted); returns what to say about it."""
    run = state.get("run")
    if not run or not run.get("submit", True):  # submit=false only writes Slurm job scripts
        return ""
    payload = dict(
        run,
        layout=state.get("layout") or {},
        hosts={},
        interrupted=reason,
        finished_at=datetime.datetime.now(datetime.timezone.utc).isoformat(),
    )
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "store", "add"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if done.returncode != 0:
        return f"; it could not be recorded: {done.stderr.strip() or done.stdout.strip()}"
    return f", recorded as failed (interrupted) in {run.get('results_db')}"


def act(controller: int, state_file: Path) -> int:
    state = read_state(state_file)
    if state.get("ended"):
        return 0
    started = time.monotonic()
    terminate(leftovers(controller))
    run = state.get("run") or {}
    hosts = state.get("hosts") or {}
    slurm = state.get("slurm") or {}
    readers = state.get("readers") or {}
    provisioning = state.get("provisioning")
    if provisioning and not run and not hosts:
        # provision-aws.yml cut short: whatever it launched runs on (and costs) until torn down.
        line = (
            f"dtfbench: provisioning of cluster {provisioning['cluster_name']} was interrupted by "
            f"{why(state, controller)}: instances, their security group, key and network may be running. Tear them "
            f"down with: {teardown_command(state.get('argv') or [], provisioning)}"
        )
        _say(line)
        return 0
    if not run and not hosts and not slurm and not state.get("sweep_id"):
        return 0
    reason = why(state, controller)
    recorded_sweep = state.get("sweep_recorded")
    if recorded_sweep and not run and not hosts and not slurm:
        # Interrupted in the summary: a resume would run nothing.
        line = (
            f"dtfbench: interrupted by {reason} after every run of sweep {recorded_sweep.get('sweep_id')} "
            f"was recorded in {recorded_sweep.get('results_db')}: nothing to stop or resume"
        )
        _say(line)
        return 0
    process, log = stop_hosts(state, state_file.parent)
    recorded = record(state, reason)
    stopped, rc = "", None
    if process is not None:
        try:
            rc = process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            rc = None
        what_stopped = []
        if hosts:
            what_stopped.append(f"its tasks on {', '.join(sorted(hosts))}")
        if slurm:
            what_stopped.append(f"its Slurm job from {', '.join(sorted(slurm))}")
        if readers:
            what_stopped.append(f"its background reader on {', '.join(sorted(readers))}")
        names = " and ".join(what_stopped)
        done = "stopped" if hosts or readers else "cancelled"
        stopped = (
            f"{done} {names} in {time.monotonic() - started:.1f} s"
            if rc == 0
            else f"stopping {names} failed (see {log})"
        )
    run_id = (run.get("run") or {}).get("run_id")
    what = (
        f"run {run_id}"
        if run_id
        else (f"run {next(iter(hosts.values()))['run_id']}" if hosts else "no run was in progress")
    )
    parts = [p for p in (what + recorded, stopped) if p]
    line = f"dtfbench: interrupted by {reason}: " + "; ".join(parts)
    sweep_id = run.get("sweep_id") or state.get("sweep_id")
    if sweep_id and state.get("argv"):
        line += f". Resume with: {resume_command(state['argv'], sweep_id)}"
    _say(line)
    return 0 if not stopped or rc == 0 else 1


def _say(line: str) -> None:
    """The watchdog's one line, on the terminal ansible-playbook had (if it is still there)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass  # the terminal went away with the controller


def watch(controller: int, state_file: Path) -> int:
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    try:
        pidfd = os.pidfd_open(controller)
    except ProcessLookupError:
        pidfd = None
    poller = select.poll()
    if pidfd is not None:
        poller.register(pidfd, select.POLLIN)
    poller.register(0, select.POLLIN)
    while pidfd is not None:
        events = dict(poller.poll())
        if pidfd in events:
            break
        if 0 in events:
            data = os.read(0, 1)
            if data == b"!":
                break  # the controller's exit handler: act now, it waits for us
            poller.unregister(0)  # EOF: only the pidfd tells
    code = act(controller, state_file)
    if code == 0:  # else keep the stop's log the line names
        shutil.rmtree(state_file.parent, ignore_errors=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dtfbench interrupt", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("watch", help="wait for ansible-playbook to exit, then clean up after it")
    w.add_argument("--pid", type=int, required=True)
    w.add_argument("--state", type=Path, required=True)
    args = parser.parse_args(argv)
    return watch(args.pid, args.state)
