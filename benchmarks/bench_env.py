"""What the benchmarks that drive ansible-playbook share: the project root and its environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ansible_env() -> dict[str, str]:
    """This interpreter's bin (the project's .venv) first on PATH, the project's ansible.cfg."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["ANSIBLE_CONFIG"] = str(ROOT / "ansible.cfg")
    env["ANSIBLE_NOCOLOR"] = "1"
    return env
