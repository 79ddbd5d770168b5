"""Host lists, cluster identity, bounded waiting (no TF)."""

import json
import socket
import threading
import time

import pytest

from dtfbench.workload.cluster import Address, build_cluster, parse_address, parse_host_list
from dtfbench.workload.errors import RunFailure, UsageError
from dtfbench.workload.liveness import CLOSED, OPEN, SILENT, Watchdog, port_open, port_state, wait_for_ports
from dtfbench.workload.ps_task import SILENT_PROBES, silent_after, went_away
from dtfbench.workload.reporting import describe_peer


def test_parse_host_list():
    assert parse_host_list("--ps_hosts", "a:1, b.example.org:2230") == [Address("a", 1), Address("b.example.org", 2230)]
    assert parse_host_list("--ps_hosts", "") == []
    assert str(parse_address("--ps_hosts", "[::1]:2222")) == "[::1]:2222"
    with pytest.raises(UsageError, match="IPv6"):
        parse_address("--ps_hosts", "[::1]2222")


def test_cluster_identity():
    cluster = build_cluster("worker", 0, "n1:2230,n2:2230", "n1:2220,n2:2220,n3:2220")
    assert cluster.is_chief and cluster.num_ps == 2 and cluster.num_workers == 3
    assert str(cluster.own_address) == "n1:2220"
    assert cluster.as_dict() == {"ps": ["n1:2230", "n2:2230"], "worker": ["n1:2220", "n2:2220", "n3:2220"]}
    assert cluster.address_of("ps", 1) == "n2:2230" and cluster.address_of("ps", 5) is None
    ps = build_cluster("ps", 1, "n1:2230,n2:2230", "n1:2220")
    assert not ps.is_chief and str(ps.own_address) == "n2:2230"


def test_describe_peer_in_tf_messages():
    cluster = build_cluster("worker", 0, "127.0.0.1:2230", "127.0.0.1:2220,127.0.0.1:2221")
    message = "From /job:worker/replica:0/task:0: Socket closed ... remote target /job:ps/replica:0/task:0 while"
    assert describe_peer(message, cluster) == "ps 0 (127.0.0.1:2230)"
    assert (
        describe_peer("failed to connect to all addresses; ipv4:127.0.0.1:2221", cluster) == "worker 1 (127.0.0.1:2221)"
    )
    assert describe_peer("nothing useful", cluster) is None


def _listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_port_probe_and_wait():
    sock = _listener()
    up = Address("127.0.0.1", sock.getsockname()[1])
    try:
        assert port_open(up)
        wait_for_ports([("ps 0", up)], timeout=2)
    finally:
        sock.close()
    assert not port_open(up)
    started = time.monotonic()
    with pytest.raises(RunFailure, match=r"ps 0 \(127\.0\.0\.1:\d+\) did not come up within 0\.5 s"):
        wait_for_ports([("ps 0", up)], timeout=0.5, poll=0.05)
    assert time.monotonic() - started < 5


def test_a_probe_tells_a_refused_port_from_one_that_does_not_answer():
    """A PS calls a worker gone on a refused connection at once, but not on one probe that got
    no answer: a listener whose queue is full (a host too busy to answer, as behind a saturated
    link) drops the handshake, and the probe times out while the process lives."""
    sock = _listener()
    address = Address("127.0.0.1", sock.getsockname()[1])
    assert port_state(address) == OPEN
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(0)  # a queue of one, never accepted
    queued = []
    try:
        for _ in range(3):
            waiting = socket.socket()
            waiting.setblocking(False)
            waiting.connect_ex(busy.getsockname())
            queued.append(waiting)
        time.sleep(0.2)
        started = time.monotonic()
        assert port_state(Address("127.0.0.1", busy.getsockname()[1]), timeout=0.3) == SILENT
        assert time.monotonic() - started >= 0.25
    finally:
        for waiting in queued:
            waiting.close()
        busy.close()
        sock.close()
    assert port_state(address) == CLOSED


def probes(*states):
    """The PS's count of unanswered probes in a row after each of `states`."""
    silent, counts = 0, []
    for state in states:
        silent = silent_after(state, silent)
        counts.append(silent)
    return counts


def test_a_ps_takes_a_worker_for_gone_only_after_three_silent_probes_or_one_refused():
    assert SILENT_PROBES == 3
    # A saturated link: probes that get no answer, then one that does. Never gone.
    assert max(probes(SILENT, SILENT, OPEN, SILENT, SILENT, OPEN)) < SILENT_PROBES
    # A host that stopped answering altogether: gone at the third probe, not before.
    assert probes(OPEN, SILENT, SILENT, SILENT) == [0, 1, 2, SILENT_PROBES]
    # A killed worker's port refuses: gone at once, whatever came before.
    assert probes(OPEN, SILENT, CLOSED) == [0, 1, SILENT_PROBES]
    assert probes(CLOSED) == [SILENT_PROBES]


def test_watchdog_fires_once_and_can_be_disarmed():
    fired = []
    event = threading.Event()

    def on_expire(what, seconds):
        fired.append((what, seconds))
        event.set()

    dog = Watchdog(on_expire, poll=0.02)
    dog.arm(10, "never")
    dog.disarm()
    dog.arm(0.1, "step 3")
    assert event.wait(5)
    time.sleep(0.2)
    assert fired == [("step 3", 0.1)]


def test_watchdog_beats_its_heartbeat_with_what_it_waits_for(tmp_path):
    heartbeat = tmp_path / "task.heartbeat"
    dog = Watchdog(lambda what, seconds: None, poll=0.02, heartbeat=str(heartbeat))
    first = heartbeat.stat().st_mtime_ns  # the first beat, at once
    dog.arm(60, "step 7")
    deadline = time.monotonic() + 10
    while heartbeat.stat().st_mtime_ns == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert heartbeat.stat().st_mtime_ns > first
    beat = json.loads(heartbeat.read_text())
    assert beat["doing"] == "step 7" and abs(beat["time"] - time.time()) < 10
    assert heartbeat.stat().st_size == 256  # rewritten in place, one size


def test_a_worker_killed_between_two_probes_is_named_beside_the_one_seen_gone():
    """Worker 1 came up and was killed between two of the PS's probes (its port never seen
    open), worker 0 (seen) then ended on its own: the PS names both, not worker 0 alone."""
    workers = {0: "127.0.0.1:2220", 1: "127.0.0.1:2221", 2: "127.0.0.1:2222"}
    message, peer = went_away(workers, gone=[0], unseen=[1])
    assert message == (
        "worker 0 (127.0.0.1:2220) and worker 1 (127.0.0.1:2221, never seen open by this PS) "
        "went away before finishing; stopping this PS"
    )
    assert peer == "worker 0 and worker 1"
    assert went_away(workers, gone=[2], unseen=[])[1] == "worker 2"
