"""The link probe on the shaped test bed: real namespaces, real sshd, the kernel's tbf.

One 4-host test bed for the module, every private link shaped to 100 Mbit/s, node03's cut
to 25: probe-network.yml must read the shaped rate (point-to-point and incast, within 10% of
what TCP carries over it; node03 between half and 1.1x its 25 Mbit/s, for the reason at its
assertion), name node03 as far below the others, store it all under the probe's id, and leave
no listener or process of the probe behind. No TensorFlow: the probe is the whole test (~20 s).
"""

import contextlib
import json
import subprocess
import sys
import time

import pytest
import testbed as tb
from testbed_fixtures import measure_again_on_a_miss, module_testbed

from dtfbench.results import network

pytestmark = pytest.mark.ansible

SHAPED_MBIT, SLOW_MBIT = 100, 25
# What TCP delivers of a shaped link: payload over what tbf counts (1448 of 1514 bytes a segment).
GOODPUT = 1448 / 1514
# ansible.builtin.async_wrapper's `step`: how often its watcher looks whether the module ended.
ASYNC_WRAPPER_STEP_S = 5


@pytest.fixture(scope="module")
def shaped_bed(tmp_path_factory):
    yield from module_testbed(tmp_path_factory, hosts=4, link_mbit=SHAPED_MBIT)


def probe(project_root, ansible_env, bed, db, probe_id, *extra):
    return subprocess.run(
        [
            "ansible-playbook",
            "probe-network.yml",
            "-i",
            bed.inventory,
            "-e",
            f"results_db={db}",
            "-e",
            f"sweep_id={probe_id}",
            *extra,
        ],
        cwd=project_root,
        env=ansible_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def misses_the_shaped_rates(probed) -> str | None:
    """Why the link or the incast is not within 10% of what TCP carries over the shaped link."""
    measured = probed[2]
    carried = SHAPED_MBIT / 8e3 * GOODPUT  # GB/s
    if all(rate == pytest.approx(carried, rel=0.1) for rate in (measured.link_gb_s, measured.incast_gb_s)):
        return None
    return f"link {measured.link_gb_s}, incast {measured.incast_gb_s} GB/s, not {carried} +-10%"


def test_the_probe_reads_the_shaped_rate_and_names_the_slow_node(shaped_bed, project_root, ansible_env, tmp_path):
    bed = shaped_bed
    slow = next(n for n in bed.nodes if n["name"] == "node03")
    db = tmp_path / "results.sqlite"
    probe_ids = iter(["shaped-1", "shaped-2"])

    def probe_with_node03_slow():
        probe_id = next(probe_ids)
        for ns, dev in tb.private_link_ends(slow):
            tb.run("tc", *ns, "qdisc", "replace", "dev", dev, "root", *tb.tbf_args(SLOW_MBIT))
        try:
            done = probe(project_root, ansible_env, bed, db, probe_id)
        finally:
            bed.shape(SHAPED_MBIT)
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
        measured = network.measured(db, probe_id)
        assert measured.known, measured.why
        return probe_id, done, measured

    # A probe's 3 rounds of ~1 s are at the mercy of the other lane's load on the two cores (in a
    # full suite one read 14% low): a probe whose rates miss is run once more.
    probe_id, done, measured = measure_again_on_a_miss(probe_with_node03_slow, misses_the_shaped_rates)[-1]

    shaped = SHAPED_MBIT / 8e3  # GB/s
    # Within 10% of what TCP can carry (0.887 of the shaped rate seen with the suite's other lane
    # busy on both cores); the goal, within 10% of the shaped rate, is `make bench BENCH=netprobe`'s.
    assert measured.link_gb_s == pytest.approx(shaped * GOODPUT, rel=0.1)
    # Three senders into node01 share its 100 Mbit/s (node03 sends at most 25 of it).
    assert measured.incast_gb_s == pytest.approx(shaped * GOODPUT, rel=0.1)
    assert measured.document["incast"]["receiver"] == "node01"
    # node03 at 25 Mbit/s: its pairs send both ways at once, and on a link this slow each
    # direction's data waits in the queue ahead of the other direction's ACKs (docs/network.md):
    # it reads 0.7-0.96 of its rate.
    assert 0.5 * SLOW_MBIT / 8e3 <= measured.host_gb_s["node03"] <= 1.1 * SLOW_MBIT / 8e3
    # node03's partners reach the full rate with their other partner: only node03 is slow.
    assert [s["host"] for s in measured.slow_hosts] == ["node03"]
    assert "WARNING: the private link of node03 reached" in done.stdout
    assert measured.rtt_ms is not None and measured.rtt_ms < 50
    assert {h["private_ip"] for h in measured.document["hosts"].values()} == set(bed.private_ips)
    assert measured.document["rounds"] == 3 and measured.document["seconds"] < 30

    shown = subprocess.run(
        [sys.executable, "-m", "dtfbench", "netprobe", "show", "--db", str(db), "--sweep-id", probe_id, "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(shown.stdout)["link_gb_s"] == measured.link_gb_s

    # Nothing of the probe is left on the nodes: no listener on the port, no probe process.
    for node in bed.nodes:
        listening = tb.run("ip", "netns", "exec", node["netns"], "ss", "-ltn", "sport = :2220").stdout
        assert ":2220" not in listening, (node["name"], listening)
    # Ansible's async_wrapper looks at its module every 5 s (its `step`) and exits at the first
    # look after the module ended, which may come after the play's last poll of the job: allow it
    # that one look, no more.
    deadline = time.monotonic() + ASYNC_WRAPPER_STEP_S + 3
    for node in bed.nodes:
        inode = tb.netns_inode(node["netns"])
        while True:
            probes = [
                " ".join(tb.cmdline(pid))
                for pid in tb.pids_in_netns(inode)
                if any(word in " ".join(tb.cmdline(pid)) for word in ("link_probe", "async_wrapper", "AnsiballZ"))
            ]
            if not probes or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert probes == [], (node["name"], probes)


@contextlib.contextmanager
def port_held(node, port):
    """Another program listening on `node`'s private address at `port` while the block runs."""
    program = "import socket, sys, time; s = socket.create_server((sys.argv[1], int(sys.argv[2]))); "
    program += "print('up', flush=True); time.sleep(120)"
    with tb.listening(node, program, port, "up"):
        yield


def test_a_port_taken_on_the_conductor_is_unknown_and_never_fails(shaped_bed, project_root, ansible_env, tmp_path):
    bed = shaped_bed
    first = bed.nodes[0]
    db = tmp_path / "results.sqlite"
    with port_held(first, 2220):
        done = probe(project_root, ansible_env, bed, db, "taken", "-e", "network_probe_join_timeout=3")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    measured = network.measured(db, "taken")
    assert measured.status == "unknown" and f"cannot listen on {first['private_ip']}:2220" in measured.why
    assert "network: unknown (the conductor node01: cannot listen on" in done.stdout
    # network_probe_required=true: the same probe fails the play, saying why.
    with port_held(first, 2220):
        done = probe(
            project_root,
            ansible_env,
            bed,
            db,
            "required",
            "-e",
            "network_probe_required=true",
            "-e",
            "network_probe_join_timeout=3",
        )
    assert done.returncode != 0 and "network_probe_required=true: the link probe measured nothing" in done.stdout
