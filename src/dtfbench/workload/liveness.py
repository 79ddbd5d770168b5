"""Bounded waiting: is a peer's port up, and a watchdog that ends a stuck process.

TensorFlow's distributed runtime can wait forever (CreateSession polls unreachable
workers without a deadline; a collective or a queue op can block on a dead peer). Every
wait in dtfbench is therefore bounded twice: by TF's own timeouts where they exist
(operation_timeout_in_ms, RunOptions, collective timeouts) and by this watchdog, which
turns "nothing happened for N seconds" into an error line and exit 1.

A process that cannot run at all (stopped by SIGSTOP, stuck in the kernel) cannot fire its
own watchdog: the watchdog's thread therefore also beats a heartbeat file (the path in
HEARTBEAT_ENV, given by the launcher), which the launcher's wait watches
(dtfbench.launch.host_run: a heartbeat still for stall_timeout is a frozen task).
"""

import json
import os
import socket
import struct
import threading
import time

from .errors import RunFailure

# The launcher's name for the heartbeat file (dtfbench.launch.task.HEARTBEAT_ENV).
HEARTBEAT_ENV = "DTFBENCH_TASK_HEARTBEAT"
HEARTBEAT_EVERY = 1.0
# The heartbeat is rewritten in place, padded to this size: never a half-written file or a
# temporary one left behind by a kill, and one write a second.
HEARTBEAT_BYTES = 256


# What a probe of a peer's port found (port_state).
OPEN, CLOSED, SILENT = "open", "closed", "silent"


def port_state(address, timeout=1.0):
    """OPEN when something accepts TCP connections at address (a cluster.Address); CLOSED when
    its host answers that nothing listens there (the connection refused: the process is gone);
    SILENT when no answer came within timeout, or the host cannot be reached: no proof either
    way, since a saturated link (the very regime a benchmark of the network drives) can hold a
    handshake back for longer than a probe waits."""
    try:
        with socket.create_connection((address.host, address.port), timeout=timeout) as conn:
            # Close with a reset, not FIN: probes then leave no TIME_WAIT sockets behind
            # (a PS probing many workers for hours would otherwise pile up thousands).
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return OPEN
    except ConnectionRefusedError:
        return CLOSED
    except OSError:
        return SILENT


def port_open(address, timeout=1.0):
    """True when something accepts TCP connections at address."""
    return port_state(address, timeout) == OPEN


def wait_for_ports(peers, timeout, poll=0.25, clock=time.monotonic):
    """Wait until every (label, Address) in peers accepts connections, at most ``timeout`` s.

    Raises RunFailure naming the first peer still down.
    """
    deadline = clock() + timeout
    pending = list(peers)
    while pending:
        pending = [(label, address) for label, address in pending if not port_open(address, timeout=poll * 4)]
        if not pending:
            return
        if clock() >= deadline:
            label, address = pending[0]
            raise RunFailure(
                f"{label} ({address}) did not come up within {timeout:g} s (--startup_timeout);"
                " check that it was started and that the port is reachable",
                peer=label,
            )
        time.sleep(poll)


class Watchdog:
    """A daemon thread that calls ``on_expire(what, seconds)`` when an armed bound passes.

    ``arm(seconds, what)`` (re)starts the bound, ``disarm()`` stops it. on_expire is expected
    to report and end the process (os._exit), because the main thread is stuck in TF.
    ``heartbeat``: a file to rewrite every HEARTBEAT_EVERY s with what the process is doing
    (the last ``what`` armed), its mtime the time of the beat; None: none.
    """

    def __init__(self, on_expire, poll=0.2, heartbeat=None):
        self._on_expire = on_expire
        self._poll = poll
        self._lock = threading.Lock()
        self._deadline = None
        self._what = None
        self._seconds = None
        self._heartbeat = None
        self._last_beat = 0.0
        if heartbeat:
            try:
                self._heartbeat = os.open(heartbeat, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            except OSError:
                pass  # no heartbeat: the launcher then bounds the task by its run timeout only
        self._beat()
        self._thread = threading.Thread(target=self._run, name="dtfbench-watchdog", daemon=True)
        self._thread.start()

    def arm(self, seconds, what):
        with self._lock:
            self._deadline = time.monotonic() + seconds
            self._what = what
            self._seconds = seconds

    def disarm(self):
        with self._lock:
            self._deadline = None

    def _beat(self):
        if self._heartbeat is None or time.monotonic() - self._last_beat < HEARTBEAT_EVERY:
            return
        self._last_beat = time.monotonic()
        with self._lock:
            what = self._what if self._deadline is not None else None
        line = json.dumps({"time": time.time(), "doing": what or "between bounded waits"})
        data = line.encode("utf-8")[: HEARTBEAT_BYTES - 1].ljust(HEARTBEAT_BYTES - 1) + b"\n"
        try:
            os.pwrite(self._heartbeat, data, 0)
        except OSError:
            try:  # a full disk: the mtime alone still says that the process runs
                os.utime(self._heartbeat)
            except OSError:
                pass

    def _run(self):
        while True:
            time.sleep(self._poll)
            self._beat()
            with self._lock:
                expired = self._deadline is not None and time.monotonic() >= self._deadline
                what, seconds = self._what, self._seconds
                if expired:
                    self._deadline = None
            if expired:
                self._on_expire(what, seconds)
