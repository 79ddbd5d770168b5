"""sweep_marker through its action plugin: the direct call (no AnsiballZ) does what the module does.

plugins/action/sweep_marker.py marks every host twice a sweep (present before the first run,
absent after the last); like tf_host_run it pipes its stdlib-only host code to the host's
Python (src/dtfbench/adapters/host_action.py) instead of paying AnsiballZ. These tests run
ad-hoc ``ansible localhost -c local`` with the project's action plugins, with and without
pipelining, and check from ``-vvv`` which path ran: a mark and its removal, a stale mark of a
killed controller removed by the second call, and a bad option refused before anything is
written.
"""

import json
import os
import socket
import subprocess
import sys

import pytest

from dtfbench.launch import sweep_marker

pytestmark = pytest.mark.ansible

DIRECT = "sweep_marker: direct call with"
MODULE = "sweep_marker: the module runs"


PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Mark
      sweep_marker: {{sweep_id: now, run_root: "{root}"}}
      register: marked
    - name: Keep what it said
      ansible.builtin.copy: {{content: "{{{{ marked | to_json }}}}", dest: "{out}/marked.json", mode: "0644"}}
    - name: Unmark
      sweep_marker: {{sweep_id: now, run_root: "{root}", state: absent}}
      register: unmarked
    - name: Keep what it said
      ansible.builtin.copy: {{content: "{{{{ unmarked | to_json }}}}", dest: "{out}/unmarked.json", mode: "0644"}}
"""


def sweep(tmp_path, adhoc, root, pipelining):
    """(marked, unmarked, output): one ansible-playbook that marks and unmarks, as a sweep does."""
    playbook = tmp_path / "mark.yml"
    playbook.write_text(PLAYBOOK.format(root=root, out=tmp_path))
    env = adhoc.action_env(pipelining)
    command = [adhoc.tool("ansible-playbook"), "-i", "localhost,", "-M", adhoc.library, "-vvv", str(playbook)]
    command += ["-e", f"ansible_python_interpreter={sys.executable}"]
    proc = subprocess.run(command, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=180)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-4000:]
    return (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("marked", "unmarked")), output


def mark(tmp_path, adhoc, args):
    """(rc, result, output) of one ad-hoc sweep_marker task through the action plugin."""
    proc = subprocess.run(
        adhoc.command("sweep_marker", args, "-vvv"),
        cwd=str(tmp_path),
        env=adhoc.action_env(True),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, adhoc.result(proc), proc.stdout + proc.stderr


def ended_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


@pytest.mark.parametrize("pipelining", [True, False])
def test_a_mark_and_its_removal_with_a_stale_mark_of_a_killed_controller(tmp_path, adhoc, pipelining):
    root = tmp_path / "runs"
    # A sweep of this machine whose ansible-playbook is gone left its mark.
    stale = sweep_marker.present(str(root), "killed", sweep_marker.controller_identity(ended_pid()))["marker"]

    (marked, unmarked), output = sweep(tmp_path, adhoc, root, pipelining)
    # Three calls (the mark, the stale mark's removal, the unmark): each the direct call, or the module.
    assert output.count(DIRECT) == (3 if pipelining else 0) and output.count(MODULE) == (0 if pipelining else 3)
    assert ("AnsiballZ_sweep_marker" in output) is not pipelining
    assert marked["changed"] and marked["removed"] == [os.path.basename(stale)] and marked["others"] == [], marked
    assert [s["sweep_id"] for s in marked["stale"]] == ["killed"]
    assert os.path.dirname(marked["marker"]) == str(root / "_sweeps")
    assert os.path.basename(marked["marker"]).startswith(f"now--{socket.gethostname()}--")
    assert unmarked["changed"] and unmarked["marker"] == marked["marker"], unmarked
    assert not (root / "_sweeps").exists()  # the last mark took its folder


def test_a_bad_option_is_one_error_before_anything_is_written(tmp_path, adhoc):
    root = tmp_path / "runs"
    rc, done, output = mark(tmp_path, adhoc, dict(sweep_id="s", run_root=str(root), state="gone"))
    assert rc != 0 and "state" in done["msg"] and "present, absent" in done["msg"], done
    assert DIRECT not in output  # refused on the controller
    assert not root.exists()
