"""What the benchmarks share: the project root, ansible-playbook's environment, free ports."""

from __future__ import annotations

import os
import socket
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


def free_ports(count: int) -> list[int]:
    """`count` loopback ports that were free a moment ago (bound together, so all distinct)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
