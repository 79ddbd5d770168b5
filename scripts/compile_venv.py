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
and ansible-lint read a module's documentation from its source. Everything else is
compiled, on every core: the controller's imports (ansible-core, the collections' plugins
and module_utils, boto3), TensorFlow's, pytest's. Without their byte code each process
would compile what it imports at every start, since no process may write it where
PYTHONDONTWRITEBYTECODE is set (CI sets it).

Exit status: compileall's (0 when every file compiled).
"""

from __future__ import annotations

import compileall
import re
import sys

# A module of a bundled collection: its source is shipped, never imported here.
NEVER_IMPORTED = re.compile(r"/ansible_collections/[^/]+/[^/]+/plugins/modules/")


def compile_site_packages(site_packages: str) -> bool:
    """True when every file outside NEVER_IMPORTED compiled."""
    return compileall.compile_dir(site_packages, rx=NEVER_IMPORTED, quiet=1, workers=0)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    return 0 if compile_site_packages(argv[0]) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
