"""The storage contract of the link probe's result (dtfbench.results.network): units, unknown, newest wins."""

import sqlite3

import pytest

from dtfbench.results import network, store


def probe(link=0.025, incast=0.024, rtt=0.2, hosts=None, **extra):
    hosts = hosts or {
        "node01": {"private_ip": "10.0.0.1", "send_gb_s": 0.025, "recv_gb_s": 0.025, "gb_s": 0.025, "rtt_ms": 0.2},
        "node02": {"private_ip": "10.0.0.2", "send_gb_s": 0.026, "recv_gb_s": 0.025, "gb_s": 0.025, "rtt_ms": 0.2},
    }
    document = network.unknown("placeholder")
    document.update(status="ok", why=None, link_gb_s=link, incast_gb_s=incast, rtt_ms=rtt, hosts=hosts, **extra)
    return document


def test_record_and_read_back_newest_first(tmp_path):
    db = tmp_path / "r.sqlite"
    assert network.read(db, "s1") is None and not db.exists()  # asking creates nothing
    network.record(db, "s1", probe(link=0.02))
    network.record(db, "s1", probe(link=0.03))  # a resumed sweep probed again: the newest counts
    network.record(db, "s2", network.unknown("one host: nothing to measure between"))
    assert network.read(db, "s1")["link_gb_s"] == 0.03
    m = network.measured(db, "s1")
    assert m.known and m.link_gb_s == 0.03 and m.host_gb_s == {"node01": 0.025, "node02": 0.025}
    # The planner's rate: the lower of point-to-point and incast (the PS's NIC takes the incast).
    assert m.planner_gb_s == 0.024
    other = network.measured(db, "s2")
    assert not other.known and other.planner_gb_s is None and other.why == "one host: nothing to measure between"
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT sweep_id, status, link_gb_s FROM network_probes ORDER BY rowid").fetchall()
    assert rows == [("s1", "ok", 0.02), ("s1", "ok", 0.03), ("s2", "unknown", None)]
    assert (
        conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0] == "14"
    )  # 8: the NIC figures; 9: the held-out accuracy; 10: storage; 11: cache; 12: stagings


def test_a_sweep_never_probed_is_unknown_with_why(tmp_path):
    db = tmp_path / "r.sqlite"
    store.connect(db).close()
    m = network.measured(db, "old-sweep")
    assert m.status == "unknown" and "no network probe recorded for sweep old-sweep" in m.why
    assert m.link_gb_s is None and m.planner_gb_s is None and not m.known


def test_incast_unknown_leaves_the_point_to_point_rate():
    m = network.Measured.of(probe(link=0.1, incast=None))
    assert m.planner_gb_s == 0.1


@pytest.mark.parametrize(
    "document, message",
    [
        ({"status": "maybe"}, "one of ok, unknown"),
        ({"status": "unknown"}, "must say why"),
        ({"status": "ok", "link_gb_s": -1.0}, "link_gb_s=-1.0: a number > 0"),
        ({"status": "ok", "link_gb_s": 0.1, "rtt_ms": "fast"}, "rtt_ms='fast'"),
        ({"status": "ok", "link_gb_s": None}, "must have link_gb_s"),
    ],
)
def test_bad_documents_are_refused_before_storing(tmp_path, document, message):
    with pytest.raises(ValueError, match=message):
        network.record(tmp_path / "r.sqlite", "s", document)
    assert network.read(tmp_path / "r.sqlite", "s") is None


def test_slow_hosts_under_half_the_median():
    hosts = {f"n{i}": {"gb_s": 0.1} for i in range(5)} | {"slow": {"gb_s": 0.04}, "half": {"gb_s": 0.05}}
    assert network.slow_hosts(hosts) == [{"host": "slow", "gb_s": 0.04, "median_gb_s": 0.1}]
    assert network.slow_hosts({"only": {"gb_s": 0.01}}) == []
    assert network.slow_hosts({"a": {"gb_s": None}, "b": {"why": "timed out"}}) == []
