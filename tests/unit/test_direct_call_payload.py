"""The direct call ships the host code as a zip (launch/direct_call.py FILES): every module
that a call's entry imports must be in it, or the call fails on the host."""

import subprocess
import sys
import zipfile

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
