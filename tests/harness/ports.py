"""Loopback ports for the tests' own TF tasks and servers."""

from __future__ import annotations

import socket


def free_ports(count: int) -> list[int]:
    """`count` loopback ports nobody listens on now (bound together while picked, so all distinct)."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()
