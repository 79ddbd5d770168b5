"""The link probe without a test bed: its rounds (the bound), the summary of its figures, and
real transfers between loopback addresses (a port taken, a host that never comes)."""

import json
import socket
import threading

import pytest

from dtfbench.node import netprobe as node
from dtfbench.results import netprobe


@pytest.mark.parametrize("n", [2, 3, 4, 5, 16, 63, 64])
def test_rounds_are_disjoint_pairs_and_at_most_three_transfers(n):
    hosts = [f"h{i}" for i in range(n)]
    rounds = node.plan_rounds(hosts)
    assert node.transfer_rounds(hosts) == (1 if n == 2 else 3)  # whatever n: the probe's bound
    partners = {h: set() for h in hosts}
    for spec in rounds:
        if spec["kind"] in ("rtt", "pairs"):
            busy = [h for pair in spec["pairs"] for h in pair]
            assert len(busy) == len(set(busy))  # disjoint: they all run at once
            if spec["kind"] == "pairs":
                for a, b in spec["pairs"]:
                    partners[a].add(b)
                    partners[b].add(a)
        else:
            assert spec == {"kind": "incast", "receiver": "h0", "senders": hosts[1:]}
    assert all(partners[h] for h in hosts)  # every host is measured
    if n >= 4:
        # two partners (a slow host shows twice, its partners once); with an odd count, the one
        # left out of each pair round has one
        assert sum(len(p) < 2 for p in partners.values()) == (2 if n % 2 else 0)


def raw(rates, incast=None, rtt=0.1):
    """A conductor's result for 4 hosts: pair rounds (a, b), (c, d) then (b, c), (d, a)."""
    hosts = ["a", "b", "c", "d"]
    rounds = node.plan_rounds(hosts)
    figures = [{"a": {"rtt_ms": {"b": rtt}}, "c": {"rtt_ms": {"d": rtt}}, "b": {"rtt_ms": {}}, "d": {"rtt_ms": {}}}]
    for spec in rounds[1:3]:
        got = {h: {"received_gb_s": {}, "send_errors": {}} for h in hosts}
        for x, y in spec["pairs"]:
            got[y]["received_gb_s"][x] = min(rates[x], rates[y])
            got[x]["received_gb_s"][y] = min(rates[x], rates[y])
        figures.append(got)
    figures.append({"a": {"received_gb_s": incast or {}, "send_errors": {}}})
    return {
        "role": "conductor",
        "conductor": "a",
        "hosts": [[h, f"10.0.0.{i}"] for i, h in enumerate(hosts)],
        "joined": hosts,
        "missing": {},
        "rounds": rounds,
        "figures": figures,
        "duration_s": 2.0,
        "seconds": 7.5,
    }


def test_summary_finds_the_slow_host_not_its_partners():
    rates = {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.02}
    doc = netprobe.summarise(raw(rates, incast={"b": 0.03, "c": 0.03, "d": 0.02}))
    assert doc["status"] == "ok" and doc["rounds"] == 3
    assert {h: e["gb_s"] for h, e in doc["hosts"].items()} == {"a": 0.1, "b": 0.1, "c": 0.1, "d": 0.02}
    assert doc["link_gb_s"] == 0.1 and doc["incast_gb_s"] == pytest.approx(0.08) and doc["rtt_ms"] == 0.1
    assert [s["host"] for s in doc["slow_hosts"]] == ["d"]
    assert "WARNING: the private link of d reached" in netprobe.render(doc)


def test_summary_of_a_probe_that_could_not_run_is_unknown_with_why():
    doc = netprobe.summarise({"role": "conductor", "conductor": "a", "error": "cannot listen on 10.0.0.1:2220"})
    assert doc["status"] == "unknown" and "cannot listen on 10.0.0.1:2220" in doc["why"] and doc["link_gb_s"] is None
    assert netprobe.summarise({})["status"] == "unknown"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_probe(hosts, port, skip=(), duration=0.5):
    results = {}

    def one(name):
        results[name] = node.probe(name, hosts, port, duration=duration, join_timeout=1, timeout=30)

    threads = [threading.Thread(target=one, args=(h,)) for h, _ in hosts if h not in skip]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return results


def test_real_transfers_between_loopback_addresses():
    hosts = [["n1", "127.0.0.1"], ["n2", "127.0.0.2"], ["n3", "127.0.0.3"]]
    results = run_probe(hosts, free_port())
    doc = netprobe.summarise(json.loads(json.dumps(results["n1"])))  # as the module returns it
    assert doc["status"] == "ok", doc["why"]
    assert all(e["gb_s"] and e["gb_s"] > 0.01 for e in doc["hosts"].values())  # loopback: > 80 Mbit/s
    assert doc["incast"]["senders"] == ["n2", "n3"] and doc["incast_gb_s"] > 0.01
    assert doc["rtt_ms"] is not None and doc["rtt_ms"] < 50
    assert results["n2"]["role"] == "member" and "error" not in results["n2"]


def test_a_port_taken_and_a_host_that_never_comes_are_unknown_with_why():
    port = free_port()
    taken = socket.socket()
    taken.bind(("127.0.0.2", port))
    taken.listen(1)
    try:
        hosts = [["n1", "127.0.0.1"], ["n2", "127.0.0.2"], ["n3", "127.0.0.3"], ["n4", "127.0.0.4"]]
        results = run_probe(hosts, port, skip=("n4",))
    finally:
        taken.close()
    doc = netprobe.summarise(results["n1"])
    assert "cannot listen on 127.0.0.2:%d" % port in doc["hosts"]["n2"]["why"]
    assert "did not join" in doc["hosts"]["n4"]["why"]
    assert doc["status"] == "ok" and doc["hosts"]["n3"]["gb_s"] > 0.01  # the others are still measured
    # The conductor's own port taken: nothing is measured, and the document says why.
    taken = socket.socket()
    taken.bind(("127.0.0.1", port))
    taken.listen(1)
    try:
        results = run_probe(hosts[:2], port)
    finally:
        taken.close()
    doc = netprobe.summarise(results["n1"])
    assert doc["status"] == "unknown" and doc["why"].startswith("the conductor n1: cannot listen on 127.0.0.1")
    assert "the conductor n1 at 127.0.0.1:%d did not answer" % port in results["n2"]["error"]
