#!/usr/bin/env python3
"""Byte-compile a virtualenv's site-packages once, leaving out what no process imports.

    compile_venv.py SITE_PACKAGES

bootstrap.sh installs the lock file with ``pip install --no-compile`` and then runs this.
pip byte-compiles every file it installs, one after another: ~27,500 files here, and half
the ``make setup`` of a fresh clone (~119 s of 200 on the 2-core machine). A third of
them are the modules of the collections the ``ansible`` package bundles
(``ansible_collections/<namespace>/<name>/plugins/modules/``): Ansible never imports a
module on the controller. It reads the module's source, zips it with its module_utils
(AnsiballZ) and runs it from the zip, where no byte code is written or read; ansible-doc
and ansible-lint read a module's documentation from its source. Nor are compiled: the
plugins of the ~100 bundled collections the project does not use (COLLECTIONS_USED), and the
test suites packages ship (folders named ``tests``), which nothing here imports.
Everything else is compiled, on every core: the controller's imports (ansible-core, the used
collections' plugins and module_utils, boto3), TensorFlow's, pytest's. Without their byte code
each process would compile what it imports at every start, since no process may write it
where PYTHONDONTWRITEBYTECODE is set (CI sets it). A file left out still imports: Python
compiles it then.

Exit status: compileall's (0 when every file compiled).
"""

from __future__ import annotations

import compileall
import re
import sys

# The collections the project's playbooks, roles and plugins name (namespace/name):
# tests/unit/test_compile_venv.py fails when a file of the repository names another one.
COLLECTIONS_USED = ("amazon/aws", "ansible/posix", "community/aws", "community/general")


def never_imported(site_packages: str) -> re.Pattern[str]:
    """The paths below `site_packages` that no process here imports, for compileall's rx.

    Anchored at `site_packages`, so that a folder above it (a checkout in a "tests" folder)
    leaves nothing out."""
    used = "|".join(re.escape(name) for name in COLLECTIONS_USED)
    return re.compile(
        re.escape(site_packages.rstrip("/"))
        + "/(?:"
        + r"ansible_collections/[^/]+/[^/]+/plugins/modules/"  # shipped as source, never imported
        + rf"|ansible_collections/(?!(?:{used})/)[^/]+/[^/]+/"  # a collection the project does not use
        # A package's own test suite. (Not "test": ansible-core's Jinja tests live in plugins/test.)
        + r"|(?:[^/]+/)*tests/"
        + ")"
    )


def compile_site_packages(site_packages: str) -> bool:
    """True when every file that a process may import compiled."""
    return compileall.compile_dir(site_packages, rx=never_imported(site_packages), quiet=1, workers=0)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    return 0 if compile_site_packages(argv[0]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
