"""The direct call ships the host code as a zip (launch/direct_call.py FILES): every module
that a call's entry imports must be in it, or the call fails on the host."""

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from dtfbench.launch import direct_call


def test_the_payload_holds_everything_host_run_imports(tmp_path):
    archive = tmp_path / "payload.zip"
    archive.write_bytes(direct_call.payload())
    names = zipfile.ZipFile(archive).namelist()
    assert f"{direct_call.PACKAGE}/launch/host_run.py" in names
    # Isolated (-I -S): nothing but the zip and the standard library can be imported; every
    # call's entry is there.
    entries = "; ".join(
        f"from {direct_call.PACKAGE}.{module} import direct_entry" for module in direct_call.CALLS.values()
    )
    program = f"import sys; sys.path.insert(0, sys.argv[1]); {entries}; print('ok')"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", program, str(archive)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_the_zip_is_made_when_the_strategy_loads_the_plugins_class(tmp_path):
    """Ansible's strategy loads an action plugin's class in ansible-playbook's own process, then
    forks a worker per host and task: a zip made with the class is inherited by every worker,
    which then makes none of its own."""
    root = Path(__file__).resolve().parents[2]
    program = (
        "from ansible.plugins.loader import action_loader, init_plugin_loader\n"
        "init_plugin_loader()\n"
        "for name in ('tf_host_run', 'sweep_marker'):\n"
        "    assert action_loader.get(name, class_only=True) is not None, name\n"
        "from dtfbench.launch import direct_call\n"
        "def refused(*args, **kwargs):\n"
        "    raise AssertionError('a zip was made after the plugins were loaded')\n"
        "direct_call.zipfile.ZipFile = refused\n"
        "for name in direct_call.CALLS:\n"
        "    direct_call.script(name, {}, False)\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        cwd=root,
        env=dict(os.environ, ANSIBLE_CONFIG=str(root / "ansible.cfg"), ANSIBLE_LOCAL_TEMP=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
