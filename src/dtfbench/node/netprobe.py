"""The link probe's node side: timed TCP transfers between the nodes' private addresses.

Every node of the probe runs ``probe`` at once (the ``link_probe`` module, started on all of
them with ``async``). Each listens on its private address only, on one port, for the probe's
length only. The first node is the *conductor*: the others connect to it, and it starts each
round on all of them at the same moment (a ``go`` message, so no clocks need to agree), waits
for every node's figures, then starts the next. The rounds (``plan_rounds``):

1. ``rtt``: disjoint pairs, one small message back and forth ``RTT_EXCHANGES`` times (the
   network idle, so the round trip is the link's, not a queue's);
2. ``pairs``: the same disjoint pairs, each sending to the other for ``duration`` seconds in
   both directions at once: every node sends and receives;
3. ``pairs`` again with other partners (each node's second partner), so a slow node shows in
   both its pairs and a slow partner in only one;
4. ``incast``: every other node sends into the conductor at once (a PS's situation).

So the probe takes at most three transfer rounds of ``duration`` plus the round trips,
whatever the number of nodes: the pairs of a round run at the same time.

A receiver counts the bytes that arrive in a window of the transfer, from a quarter of
``duration`` after ``go`` (connection set-up and TCP's slow start are over) to nine tenths
(the senders stop at ``duration``): the rate is those bytes over the window's length, in
GB/s (10^9 bytes/s).

Standard library only, Python 3.6+ (it runs in Ansible's module on the nodes' Python);
shipped as ``ansible.module_utils.dtfbench.node.netprobe``.
"""

from __future__ import annotations

import json
import socket
import threading
import time

MAGIC = "DTFBPROBE1"
CHUNK = 256 * 1024
RTT_EXCHANGES = 20
WINDOW = (0.25, 0.9)  # the receiver's counting window, as shares of `duration` after `go`
GRACE_S = 0.5  # after `duration`, for the last bytes and the senders to close
GB = 1e9


def disjoint_pairs(hosts, shift=0):
    """Disjoint pairs of `hosts` (in order, starting `shift` places on, wrapping around)."""
    order = list(hosts[shift:]) + list(hosts[:shift])
    return [[order[i], order[i + 1]] for i in range(0, len(order) - 1, 2)]


def plan_rounds(hosts):
    """The probe's rounds for `hosts` (the first is the conductor and the incast's receiver)."""
    hosts = list(hosts)
    if len(hosts) < 2:
        return []
    first = disjoint_pairs(hosts)
    rounds = [{"kind": "rtt", "pairs": first}, {"kind": "pairs", "pairs": first}]
    if len(hosts) >= 3:
        rounds.append({"kind": "pairs", "pairs": disjoint_pairs(hosts, 1)})
        rounds.append({"kind": "incast", "receiver": hosts[0], "senders": hosts[1:]})
    return rounds


def transfer_rounds(hosts):
    """Rounds that move bulk data (the probe's time is about these times `duration`)."""
    return sum(1 for r in plan_rounds(hosts) if r["kind"] != "rtt")


# --------------------------------------------------------------------------- lines


class Lines:
    """JSON lines over a socket."""

    def __init__(self, sock):
        self.sock = sock
        self.buffer = b""
        self.lock = threading.Lock()

    def send(self, message):
        data = (json.dumps(message) + "\n").encode()
        with self.lock:
            self.sock.sendall(data)

    def receive(self, timeout):
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no message within %.0f s" % timeout)
            self.sock.settimeout(left)
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("the peer closed the connection")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line.decode())


def _close_after_peer(conn, timeout=5.0):
    """Close once the peer has: the side that closes first keeps the connection in TIME_WAIT,
    and on the listening side that is the probe's port (the TF worker port, taken next)."""
    try:
        conn.settimeout(timeout)
        while conn.recv(4096):
            pass
    except OSError:
        pass
    conn.close()


def _header(kind, round_index, sender):
    return ("%s %s %d %s\n" % (MAGIC, kind, round_index, sender)).encode()


def _read_header(conn, timeout=10.0):
    conn.settimeout(timeout)
    data = b""
    while b"\n" not in data:
        more = conn.recv(1)
        if not more:
            raise ConnectionError("closed before its header")
        data += more
        if len(data) > 512:
            raise ValueError("not a probe connection")
    parts = data.decode(errors="replace").split()
    if len(parts) != 4 or parts[0] != MAGIC:
        raise ValueError("not a probe connection: %r" % data[:64])
    return parts[1], int(parts[2]), parts[3]


# --------------------------------------------------------------------------- one node


class Node:
    """One node's part: its listener (bulk receiver, round-trip echo, the conductor's control)."""

    def __init__(self, me, hosts, port, duration, deadline):
        self.me = me
        self.hosts = dict(hosts)
        self.port = int(port)
        self.duration = float(duration)
        self.deadline = deadline
        self.arrivals = {}  # (round, sender) -> [(monotonic time, bytes)]
        self.members = {}  # conductor only: host -> Lines
        self.member_errors = {}  # conductor only: host -> why it cannot take part
        self.lock = threading.Lock()
        self.joined = threading.Condition(self.lock)
        self.stopping = False
        self.listener = None

    # The listener ------------------------------------------------------------

    def listen(self):
        """Bind to the private address only; None when that works, else why not."""
        address = self.hosts[self.me]
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((address, self.port))
            sock.listen(256)
        except OSError as err:
            return "cannot listen on %s:%d (%s)" % (address, self.port, err.strerror or err)
        sock.settimeout(0.2)
        self.listener = sock
        self.accepting = threading.Thread(target=self._accept, daemon=True)
        self.accepting.start()
        return None

    def close(self):
        """Stop listening (the port is free again when this returns)."""
        self.stopping = True
        if self.listener is not None:
            self.accepting.join(5)
            self.listener.close()

    def _accept(self):
        while not self.stopping and time.monotonic() < self.deadline:
            try:
                conn, _ = self.listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        try:
            kind, round_index, sender = _read_header(conn)
            if kind == "bulk":
                self._receive(conn, round_index, sender)
            elif kind == "rtt":
                self._echo(conn)
            elif kind == "ctrl":
                self._join(conn, sender)
                return  # the conductor keeps the control connection
        except (OSError, ValueError):
            pass
        try:
            conn.close()
        except OSError:
            pass

    def _receive(self, conn, round_index, sender):
        seen = []
        with self.lock:
            self.arrivals[(round_index, sender)] = seen
        buf = bytearray(CHUNK)
        conn.settimeout(self.duration + 10)
        while True:
            n = conn.recv_into(buf)
            if not n:
                return
            seen.append((time.monotonic(), n))

    def _echo(self, conn):
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.settimeout(10)
        while True:
            data = conn.recv(1)
            if not data:
                return
            conn.sendall(data)

    def _join(self, conn, host):
        lines = Lines(conn)
        try:
            hello = lines.receive(10)
        except (OSError, ValueError):
            conn.close()
            return
        with self.joined:
            if hello.get("why"):
                self.member_errors[host] = hello["why"]
            else:
                self.members[host] = lines
            self.joined.notify_all()
        if hello.get("why"):
            _close_after_peer(conn)

    def connect(self, target, timeout=5.0):
        """A connection to `target`'s probe port, from this node's private address."""
        return socket.create_connection(
            (self.hosts[target], self.port), timeout=timeout, source_address=(self.hosts[self.me], 0)
        )

    # A round ------------------------------------------------------------------

    def run_round(self, index, spec, go):
        """This node's part of round `index` (started at monotonic `go`): its figures."""
        if spec["kind"] == "rtt":
            rtt = {}
            for a, b in spec["pairs"]:
                if a == self.me:
                    rtt[b] = self._round_trip(b, index)
            return {"rtt_ms": rtt}
        targets = []
        if spec["kind"] == "pairs":
            for a, b in spec["pairs"]:
                if self.me in (a, b):
                    targets.append(b if a == self.me else a)
        elif self.me in spec["senders"]:
            targets.append(spec["receiver"])
        errors = {}
        threads = [threading.Thread(target=self._send, args=(t, index, go, errors), daemon=True) for t in targets]
        for t in threads:
            t.start()
        end = go + self.duration + GRACE_S
        for t in threads:
            t.join(max(0.0, end + 5 - time.monotonic()))
        time.sleep(max(0.0, end - time.monotonic()))
        start, stop = go + WINDOW[0] * self.duration, go + WINDOW[1] * self.duration
        received = {}
        with self.lock:
            for (r, sender), seen in self.arrivals.items():
                if r == index:
                    total = sum(n for t, n in list(seen) if start <= t < stop)
                    received[sender] = total / (stop - start) / GB
        return {"received_gb_s": received, "send_errors": errors}

    def _send(self, target, index, go, errors):
        end = go + self.duration
        chunk = b"\0" * CHUNK
        try:
            conn = self.connect(target)
        except OSError as err:
            errors[target] = "cannot connect to %s:%d (%s)" % (self.hosts[target], self.port, err.strerror or err)
            return
        try:
            conn.settimeout(self.duration + 5)
            conn.sendall(_header("bulk", index, self.me))
            while time.monotonic() < end:
                conn.sendall(chunk)
        except OSError as err:
            errors[target] = "sending to %s failed (%s)" % (target, err.strerror or err)
        finally:
            conn.close()

    def _round_trip(self, target, index):
        try:
            conn = self.connect(target)
        except OSError:
            return None
        try:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.settimeout(5)
            conn.sendall(_header("rtt", index, self.me))
            samples = []
            for _ in range(RTT_EXCHANGES):
                t = time.monotonic()
                conn.sendall(b"x")
                if not conn.recv(1):
                    return None
                samples.append((time.monotonic() - t) * 1000)
            samples.sort()
            return samples[len(samples) // 2]
        except OSError:
            return None
        finally:
            conn.close()


# --------------------------------------------------------------------------- the probe


def probe(me, hosts, port, duration=2.0, join_timeout=20.0, timeout=120.0):
    """Run this node's part of the probe; the conductor (the first of `hosts`) returns the raw
    figures of every node ({"role": "conductor", ...}), the others {"role": "member", ...}.

    `hosts`: [[name, private address], ...] in the same order on every node.
    """
    started = time.monotonic()
    order = [h for h, _ in hosts]
    node = Node(me, hosts, port, duration, started + timeout)
    why = node.listen()
    conductor = order[0]
    try:
        if me != conductor:
            return _member(node, conductor, why, join_timeout, started)
        if why:
            return {"role": "conductor", "conductor": me, "error": why, "seconds": time.monotonic() - started}
        return _conduct(node, order, join_timeout, started)
    finally:
        node.close()


def _member(node, conductor, why, join_timeout, started):
    deadline = time.monotonic() + join_timeout
    conn, last = None, None
    while conn is None and time.monotonic() < deadline:
        try:
            conn = node.connect(conductor, timeout=2)
        except OSError as err:
            last = err
            time.sleep(0.1)
    if conn is None:
        return {
            "role": "member",
            "error": "cannot reach the conductor %s at %s:%d (%s)"
            % (conductor, node.hosts[conductor], node.port, getattr(last, "strerror", None) or last),
        }
    lines = Lines(conn)
    try:
        conn.sendall(_header("ctrl", 0, node.me))
        lines.send({"why": why} if why else {"hello": node.me})
        if why:
            return {"role": "member", "error": why}
        # The conductor starts the first round once every node joined or join_timeout passed.
        wait = join_timeout + 5
        while True:
            try:
                message = lines.receive(max(1.0, min(wait, node.deadline - time.monotonic())))
            except socket.timeout:
                return {
                    "role": "member",
                    "error": "the conductor %s at %s:%d did not answer within %.0f s (is the port taken by "
                    "another program there?)" % (conductor, node.hosts[conductor], node.port, wait),
                }
            wait = node.duration + 30
            if message.get("end"):
                return {"role": "member", "seconds": time.monotonic() - started}
            go = time.monotonic()
            figures = node.run_round(message["round"], message["spec"], go)
            lines.send({"done": message["round"], "figures": figures})
    except (OSError, ValueError) as err:
        return {"role": "member", "error": "lost the conductor (%s)" % err}
    finally:
        conn.close()


def _conduct(node, order, join_timeout, started):
    others = [h for h in order if h != node.me]
    deadline = time.monotonic() + join_timeout
    with node.joined:
        while len(node.members) + len(node.member_errors) < len(others) and time.monotonic() < deadline:
            node.joined.wait(max(0.0, min(0.5, deadline - time.monotonic())))
        members = dict(node.members)
        missing = dict(node.member_errors)
    for host in others:
        if host not in members and host not in missing:
            missing[host] = "did not join within %.0f s" % join_timeout
    joined = [node.me] + [h for h in others if h in members]
    rounds = plan_rounds(joined)
    figures = []
    for index, spec in enumerate(rounds):
        taking_part = set(joined)
        for host in list(taking_part - {node.me}):
            try:
                members[host].send({"round": index, "spec": spec})
            except OSError as err:
                missing[host] = "lost its control connection (%s)" % err
                taking_part.discard(host)
        results = {node.me: node.run_round(index, spec, time.monotonic())}
        for host in sorted(taking_part - {node.me}):
            try:
                answer = members[host].receive(node.duration + 15)
                results[host] = answer["figures"]
            except (OSError, ValueError, KeyError) as err:
                missing[host] = "no figures for round %d (%s)" % (index, err)
        figures.append(results)
    for lines in members.values():
        try:
            lines.send({"end": True})
        except OSError:
            pass
    for lines in members.values():
        _close_after_peer(lines.sock)
    return {
        "role": "conductor",
        "conductor": node.me,
        "hosts": [[h, node.hosts[h]] for h in order],
        "joined": joined,
        "missing": missing,
        "rounds": rounds,
        "figures": figures,
        "duration_s": node.duration,
        "seconds": time.monotonic() - started,
    }
