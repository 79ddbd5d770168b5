"""scripts/compile_venv.py: the byte code bootstrap.sh writes after ``pip install --no-compile``.

Every file a process may import gets its byte code; the bundled collections' modules, which
Ansible only ships as source, do not. And the suite's own virtualenv has the byte code of what
every test's processes import: under PYTHONDONTWRITEBYTECODE, a file without it is compiled
again at each import.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMPILE_VENV = ROOT / "scripts" / "compile_venv.py"
_spec = importlib.util.spec_from_file_location("compile_venv", COMPILE_VENV)
compile_venv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compile_venv)


def compiled(source: Path) -> bool:
    return Path(importlib.util.cache_from_source(str(source))).is_file()


def test_everything_but_modules_unused_collections_and_test_suites_is_compiled(tmp_path):
    # Below a folder named "tests": only what is below site-packages decides.
    site = tmp_path / "tests" / "site-packages"
    sources = {
        "pkg/__init__.py": True,
        "pkg/sub/mod.py": True,
        "pkg/testing/util.py": True,  # a package's test helpers, which others import
        "pkg/test_util.py": True,
        "pkg/tests/test_pkg.py": False,
        "pkg/sub/tests/test_mod.py": False,
        "ansible/plugins/test/core.py": True,  # ansible-core's Jinja tests, imported by every playbook run
        "ansible/modules/command.py": True,  # ansible-core's own: few, and imported by its tests
        "ansible_collections/amazon/aws/plugins/action/act.py": True,
        "ansible_collections/amazon/aws/plugins/module_utils/util.py": True,
        "ansible_collections/amazon/aws/plugins/inventory/inv.py": True,
        "ansible_collections/ansible/posix/plugins/callback/cb.py": True,
        "ansible_collections/amazon/aws/plugins/modules/mod.py": False,
        "ansible_collections/amazon/aws/plugins/modules/sub/nested.py": False,
        "ansible_collections/amazon/awsx/plugins/action/act.py": False,  # not amazon.aws
        "ansible_collections/cisco/ios/plugins/module_utils/util.py": False,
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


def test_every_collection_the_repository_names_is_compiled():
    # A name like amazon.aws.ec2_instance in any tracked file, whose namespace.name is a
    # collection the ansible package bundles (not a Python import: `from ansible.utils.<module>`
    # is ansible-core's own package).
    site = Path(sysconfig.get_paths()["purelib"]) / "ansible_collections"
    bundled = {f"{c.parent.name}.{c.name}" for c in site.glob("*/*") if c.is_dir()}
    assert len(bundled) > 50, sorted(bundled)  # the ansible package is installed here
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    named = set()
    for name in files:
        path = ROOT / name
        if path.suffix in (".yml", ".yaml", ".py", ".j2", ".cfg", ".md", ".sh") and path.is_file():
            text = path.read_text(errors="replace")
            named |= {
                m.group(1) for m in re.finditer(r"(?<!from )(?<!import )\b([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+", text)
            }
    used = named & bundled
    assert "amazon.aws" in used
    assert sorted(used - {c.replace("/", ".") for c in compile_venv.COLLECTIONS_USED}) == [], (
        "add them to COLLECTIONS_USED"
    )


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
