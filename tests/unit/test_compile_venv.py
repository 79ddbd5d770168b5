"""scripts/compile_venv.py: the byte code bootstrap.sh writes after ``pip install --no-compile``.

Every file a process may import gets its byte code; the bundled collections' modules, which
Ansible only ships as source, do not. And the suite's own virtualenv has the byte code of what
every test's processes import: under PYTHONDONTWRITEBYTECODE, a file without it is compiled
again at each import.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPILE_VENV = ROOT / "scripts" / "compile_venv.py"


def compiled(source: Path) -> bool:
    return Path(importlib.util.cache_from_source(str(source))).is_file()


def test_everything_but_the_collections_modules_is_compiled(tmp_path):
    site = tmp_path / "site-packages"
    sources = {
        "pkg/__init__.py": True,
        "pkg/sub/mod.py": True,
        "ansible/modules/command.py": True,  # ansible-core's own: few, and imported by its tests
        "ansible_collections/ns/coll/plugins/action/act.py": True,
        "ansible_collections/ns/coll/plugins/module_utils/util.py": True,
        "ansible_collections/ns/coll/plugins/inventory/inv.py": True,
        "ansible_collections/ns/coll/plugins/modules/mod.py": False,
        "ansible_collections/ns/coll/plugins/modules/sub/nested.py": False,
    }
    for name in sources:
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("VALUE = 1\n")

    done = subprocess.run([sys.executable, str(COMPILE_VENV), str(site)], capture_output=True, text=True, timeout=120)

    assert done.returncode == 0, done.stdout + done.stderr
    assert {name: compiled(site / name) for name in sources} == sources


def test_a_file_that_does_not_compile_fails_the_step(tmp_path):
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "broken.py").write_text("def (:\n")
    done = subprocess.run([sys.executable, str(COMPILE_VENV), str(site)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "broken.py" in done.stdout + done.stderr


def test_the_suites_virtualenv_has_the_byte_code_of_what_its_processes_import():
    site = Path(sysconfig.get_paths()["purelib"])
    imported = [
        "ansible/__init__.py",
        "ansible/executor/task_executor.py",
        "botocore/__init__.py",
        "tensorflow/__init__.py",
        "ansible_collections/amazon/aws/plugins/module_utils/botocore.py",
        "ansible_collections/amazon/aws/plugins/inventory/aws_ec2.py",
    ]
    assert [name for name in imported if not compiled(site / name)] == []
