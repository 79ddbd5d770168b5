#!/usr/bin/env python3
"""A moto server on loopback: the EC2 and S3 APIs the AWS tests and benchmarks call.

    python tests/aws/moto_server.py            # serves until interrupted, prints its endpoint

The server is a child process of ours (``python -m moto.server``) on 127.0.0.1 and a free
port, in its own process group so that stopping it leaves nothing behind. Everything that
talks to it gets the standard variables (``AWS_ENDPOINT_URL`` and fake credentials), so
the project's playbooks run unchanged against it, exactly as a user's would against AWS.

moto hands out real-looking *public* addresses for instances: never connect to them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

REGION = "us-east-1"
# Recognisable fake credentials: tests search all output for the secret (it must never
# appear), so it is long and unique.
ACCESS_KEY_ID = "AKIADTFBENCHTESTING1"
SECRET_ACCESS_KEY = "dtfbench-fake-secret-6f1c0e2b9a7d4e58b3c1"


def _free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class MotoServer:
    """One moto server process; ``env`` holds what a client needs to reach it.

    ``host`` is loopback unless the caller's own hosts must reach it: the test bed's nodes
    live in network namespaces and reach the controller only at its address on the test
    bed's public bridge, so a test that syncs data onto them serves moto there.
    """

    def __init__(self, log_path: Path | None = None, host: str = "127.0.0.1"):
        self.host = host
        self.port = _free_port(host)
        self.endpoint = f"http://{host}:{self.port}"
        self.log_path = log_path
        self.process: subprocess.Popen | None = None

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            # No config or credentials files of the user's may leak into a test.
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def start(self, timeout: float = 30.0) -> MotoServer:
        log = open(self.log_path, "ab") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            self._wait_until_it_answers(timeout)
        except BaseException:  # also an interrupt while waiting: never leave the child behind
            self.stop()
            raise
        return self

    def _wait_until_it_answers(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto server exited with {self.process.returncode}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"moto server did not answer on {self.endpoint} in {timeout:.0f} s")

    def reset(self) -> None:
        """Forget every resource (instances, buckets, ...): each test starts from nothing."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


@contextmanager
def moto_server(log_path: Path | None = None, host: str = "127.0.0.1"):
    server = MotoServer(log_path, host).start()
    try:
        yield server
    finally:
        server.stop()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def main() -> int:
    # A plain kill stops the server too: the child is in its own session and would outlive us.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with moto_server() as server:
            for name, value in server.env.items():
                if "SECRET" not in name:
                    print(f"export {name}={value}")
            print("# serving; Ctrl-C stops it", flush=True)
            signal.pause()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
