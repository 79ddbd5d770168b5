"""The NIC sampler (dtfbench.launch.nic_sampler): the interface lookup, /proc/net/dev, the
samples file, and the window arithmetic.

The transfer tests run the sampler program for real in a network namespace of their own
(``unshare --net``), where nothing but the test's own transfer crosses the loopback
interface, so the bytes it counts can be checked exactly; and on the oldest Python the nodes
run (3.6, TF 1.1's stack) where one is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dtfbench.launch import nic_sampler as ns
from dtfbench.linux import procfs
from dtfbench.results import record

SAMPLER = Path(ns.__file__)
PY36 = next(
    (p for p in ("/root/.pyenv/versions/3.6.15/bin/python", shutil.which("python3.6")) if p and Path(p).exists()), None
)

# ---- the interface lookup and /proc/net/dev, on this host ---------------------------------


def test_interface_of_finds_the_interface_of_each_address_this_host_has():
    pairs = ns.interface_addresses()
    assert ("lo", "127.0.0.1") in pairs
    for name, address in pairs:
        if address.startswith("fe80:"):
            continue  # link-local: the same address may sit on several interfaces
        found, ip = ns.interface_of(address)
        assert (found, ip) == (name, address)


def test_interface_of_loopback_names_and_an_address_no_interface_has():
    assert ns.interface_of("localhost") == ("lo", "127.0.0.1")
    assert ns.interface_of("127.0.0.2")[0] == "lo"  # lo carries all of 127/8
    name, why = ns.interface_of("192.0.2.254", addresses=[("eth0", "192.0.2.2")])
    assert name is None and why == "no interface of this host carries the TF address 192.0.2.254 (192.0.2.254)"
    name, why = ns.interface_of("no-such-host.invalid")
    assert name is None and why.startswith("the TF address no-such-host.invalid does not resolve")


def test_parse_addr_dump_reads_a_real_rtnetlink_answer_and_its_errors():
    # A hand-made RTM_NEWADDR (ifaddrmsg + IFA_ADDRESS + IFA_LOCAL) then NLMSG_DONE.
    import struct

    def attr(kind, value):
        return struct.pack("=HH", 4 + len(value), kind) + value + b"\0" * ((-len(value)) % 4)

    body = struct.pack("=BBBBI", socket.AF_INET, 24, 0, 0, 7)
    body += attr(1, socket.inet_aton("10.0.0.9")) + attr(2, socket.inet_aton("10.0.0.1"))
    message = struct.pack("=IHHII", 16 + len(body), 20, 2, 1, 0) + body
    done = struct.pack("=IHHII", 20, 3, 2, 1, 0) + b"\0" * 4
    found, ended = ns.parse_addr_dump(message + done)
    assert found == [(socket.AF_INET, 7, socket.inet_aton("10.0.0.1"))] and ended  # IFA_LOCAL wins
    error = struct.pack("=IHHII", 36, 2, 0, 1, 0) + struct.pack("=i", -13) + b"\0" * 16
    with pytest.raises(OSError):
        ns.parse_addr_dump(error)


def test_read_counters_reads_the_real_proc_net_dev():
    text = Path("/proc/net/dev").read_text()
    counters = ns.parse_net_dev(text)
    assert "lo" in counters and all(rx >= 0 and tx >= 0 for rx, tx in counters.values())
    rx, tx = ns.read_counters("lo")
    assert rx >= counters["lo"][0] and tx >= counters["lo"][1]
    assert ns.read_counters("no-such-if0") is None


def test_the_samplers_reader_gives_what_read_counters_gives_at_each_read(tmp_path):
    # The real file, read again through the same descriptor: the counters move on.
    reader = ns.CounterReader("lo")
    try:
        first, parsed = reader.read(), ns.read_counters("lo")
        assert first is not None and parsed[0] >= first[0] and parsed[1] >= first[1]
        again = reader.read()
        assert again[0] >= parsed[0] and again[1] >= parsed[1]
    finally:
        reader.close()
    missing = ns.CounterReader("no-such-if0")
    try:
        assert missing.read() is None
    finally:
        missing.close()
    # A host with many interfaces: the file is longer than one read, names share suffixes and
    # a long name starts its line; the interface's own line is found, whole.
    head = "Inter-|   Receive |  Transmit\n face |bytes    packets|bytes    packets\n"
    lines = ["  veth%d: %d 0 0 0 0 0 0 0 %d 0 0 0 0 0 0 0" % (i, i, 2 * i) for i in range(3000)]
    lines += ["  eth0: 7 0 0 0 0 0 0 0 9 0 0 0 0 0 0 0", "xeth0:1 0 0 0 0 0 0 0 1 0 0 0 0 0 0 0", "  bad0: 1 2"]
    fake = tmp_path / "dev"
    fake.write_text(head + "\n".join(lines) + "\n")
    assert len(fake.read_bytes()) > ns.CounterReader.CHUNK
    for name, expected in (
        ("eth0", (7, 9)),
        ("veth2999", (2999, 5998)),
        ("xeth0", (1, 1)),
        ("th0", None),
        ("bad0", None),
    ):
        reader = ns.CounterReader(name, str(fake))
        try:
            assert reader.read() == expected == ns.read_counters(name, str(fake)), name
        finally:
            reader.close()


# ---- a real transfer, counted by the real program ---------------------------------------

TRANSFER = textwrap.dedent(
    """
    import json, signal, socket, subprocess, sys, threading, time
    sampler, python, out, size, address = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    sys.path.insert(0, sampler.rsplit("/", 1)[0])
    import nic_sampler
    proc = subprocess.Popen([python, sampler, "--address", address, "--out", out, "--interval", "0.02"])
    time.sleep(1.0)
    quiet = (time.time() - 0.5, time.time())  # before the transfer: nothing crosses lo
    server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
    def serve():
        conn, _ = server.accept()
        conn.sendall(b"x" * size)
        conn.close()
    thread = threading.Thread(target=serve); thread.start()
    # Quiet margins (5 intervals) around the transfer: the counters are flat where the window
    # starts and ends, so interpolating there is exact whatever the transfer's speed.
    start = time.time()
    time.sleep(0.1)
    client = socket.create_connection(server.getsockname())
    got = 0
    while True:
        chunk = client.recv(1 << 20)
        if not chunk:
            break
        got += len(chunk)
    client.close(); thread.join()
    time.sleep(0.1)
    end = time.time()
    time.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(10)
    window = {"status": "ok", "start": start, "end": end}
    print(json.dumps({"got": got, "code": code, "busy": nic_sampler.host_figures(out, window),
                      "quiet": nic_sampler.host_figures(out, {"start": quiet[0], "end": quiet[1]})}))
    """
)


def _transfer(tmp_path, python, size=8 << 20, address="127.0.0.1"):
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed: scripts/test-deps.sh installs it")
    script = tmp_path / "transfer.py"
    script.write_text(TRANSFER)
    copy = tmp_path / "nic_sampler.py"  # the program stands alone, as on a node
    copy.write_text(SAMPLER.read_text())
    out = tmp_path / "nic.samples"
    done = subprocess.run(
        ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", python, str(script)]
        + [str(copy), python, str(out), str(size), address],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), out


def test_a_real_transfer_on_loopback_is_counted_over_its_window(tmp_path):
    size = 8 << 20
    result, out = _transfer(tmp_path, sys.executable, size)
    assert result["got"] == size and result["code"] == 0
    busy, quiet = result["busy"], result["quiet"]
    assert busy["status"] == "ok" and busy["interface"] == "lo", busy
    # On loopback every byte is sent and received: the payload, plus TCP/IP headers (64 KB
    # frames: well under 1%), plus the handshake.
    for key in ("rx_bytes", "tx_bytes"):
        assert size <= busy[key] <= size * 1.02, busy
    assert busy["rx_bytes_per_s"] == pytest.approx(busy["rx_bytes"] / busy["seconds"], rel=1e-4)
    assert quiet["status"] == "ok" and quiet["rx_bytes"] == 0 and quiet["tx_bytes"] == 0
    header, samples = ns.read_samples(str(out))
    assert header["interface"] == "lo" and header["status"] == "ok" and len(samples) > 20


@pytest.mark.skipif(PY36 is None, reason="no Python 3.6 on this machine (the TF 1.1 nodes' Python)")
def test_the_sampler_runs_on_python_3_6(tmp_path):
    result, _ = _transfer(tmp_path, PY36, 4 << 20)
    assert result["busy"]["status"] == "ok" and result["busy"]["rx_bytes"] >= 4 << 20


def test_a_host_without_the_address_writes_why_and_stops(tmp_path):
    out = tmp_path / "nic.samples"
    done = subprocess.run(
        [sys.executable, str(SAMPLER), "--address", "192.0.2.254", "--out", str(out)],
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 0
    figures = ns.host_figures(str(out), {"status": "ok", "start": 1.0, "end": 2.0})
    assert figures["status"] == "unknown"
    assert figures["reason"].startswith("no interface of this host carries the TF address 192.0.2.254")


SAMPLER_IN_A_FORK = """
import os, sys, time
from dtfbench.launch import nic_sampler
pid = os.fork()
if pid == 0:
    os._exit(nic_sampler.run("127.0.0.1", sys.argv[1], 0.05, 0, parent=os.getppid()))
print(pid, flush=True)
time.sleep(60)
"""


def test_a_sampler_in_a_fork_ends_when_its_parent_goes(tmp_path):
    """tf_host_run runs the sampler in a fork of its supervisor: the supervisor's end (a
    SIGKILL: nothing else stops the sampler then) ends it within an interval."""
    out = tmp_path / "nic.samples"
    parent = subprocess.Popen([sys.executable, "-c", SAMPLER_IN_A_FORK, str(out)], stdout=subprocess.PIPE, text=True)
    sampler = int(parent.stdout.readline())

    def samples():
        # The sampler creates its file, then writes the header: a look in between reads "".
        try:
            return len(ns.read_samples(str(out))[1])
        except (OSError, ValueError):
            return 0

    try:
        deadline = time.monotonic() + 10
        while samples() < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert samples() >= 3
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while procfs.alive(sampler) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not procfs.alive(sampler), "the sampler outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if procfs.alive(sampler):
            os.kill(sampler, signal.SIGKILL)


def test_bad_input_is_one_error():
    done = subprocess.run(
        [sys.executable, str(SAMPLER), "--address", "127.0.0.1", "--out", "/dev/null", "--interval", "0"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "--interval must be > 0, got 0.0" in done.stderr


# ---- the window arithmetic --------------------------------------------------------------


def test_measured_window_spans_every_workers_measured_steps():
    results = [
        {"task_index": 0, "measured_window": {"start": 10.0, "end": 20.0}},
        {"task_index": 1, "measured_window": {"start": 10.5, "end": 19.0}},
    ]
    assert ns.measured_window(results) == {"status": "ok", "start": 10.0, "end": 20.0, "workers": 2}
    # Asynchronous PSs: the worker beside the PS is done before the remote one begins.
    apart = ns.measured_window([results[0], {"task_index": 1, "measured_window": {"start": 21.0, "end": 30.0}}])
    assert (apart["start"], apart["end"]) == (10.0, 30.0)
    missing = ns.measured_window(results + [{"task_index": 2, "status": "failed"}])
    assert missing["status"] == "unknown" and missing["reason"].startswith("worker 2's result has no measured window")
    assert ns.measured_window(results + [None])["reason"].startswith("worker 2's result")
    assert ns.measured_window([{"measured_window": {"start": 5.0, "end": 5.0}}])["status"] == "unknown"
    assert ns.measured_window([])["status"] == "unknown"


SAMPLES = [(10.0, 0, 0), (11.0, 1000, 100), (12.0, 3000, 300), (13.0, 3000, 300)]


def test_counters_are_interpolated_between_samples():
    assert ns.counters_at(SAMPLES, 10.5) == (500.0, 50.0)
    assert ns.counters_at(SAMPLES, 12.0) == (3000, 300)
    assert ns.counters_at(SAMPLES, 9.9) is None and ns.counters_at(SAMPLES, 13.1) is None


def test_bytes_over_the_window_and_what_it_cannot_tell():
    figures = ns.bytes_over(SAMPLES, 10.5, 12.5)
    assert figures["rx_bytes"] == 2500 and figures["tx_bytes"] == 250 and figures["seconds"] == 2.0
    assert figures["rx_bytes_per_s"] == 1250.0 and figures["samples"] == 2
    late = ns.bytes_over(SAMPLES, 9.0, 12.0)
    assert (
        late["status"] == "unknown"
        and "the samples span 10.000..13.000 but the measured window is 9.000..12.000" in late["reason"]
    )
    reset = ns.bytes_over([(0.0, 500, 5), (1.0, 10, 1)], 0.0, 1.0)
    assert reset["status"] == "unknown" and "went back" in reset["reason"]
    assert ns.bytes_over(SAMPLES[:1], 10.0, 10.0)["status"] == "unknown"


def test_a_torn_last_line_and_a_missing_file(tmp_path):
    path = tmp_path / "nic.samples"
    path.write_text(json.dumps({"status": "ok", "interface": "eth0"}) + "\n10.0 0 0\n12.0 2000 20\n12.5 99")
    header, samples = ns.read_samples(str(path))
    assert samples == [(10.0, 0, 0), (12.0, 2000, 20)]
    figures = ns.host_figures(str(path), {"status": "ok", "start": 10.0, "end": 12.0})
    assert figures["status"] == "ok" and figures["rx_bytes"] == 2000 and figures["interface"] == "eth0"
    gone = ns.host_figures(str(tmp_path / "none"), {"status": "ok", "start": 1.0, "end": 2.0})
    assert gone["status"] == "unknown" and "cannot be read" in gone["reason"]
    no_window = ns.host_figures(str(path), {"status": "unknown", "reason": "worker 1's result has no measured window"})
    assert no_window == {"status": "unknown", "reason": "no measured window: worker 1's result has no measured window"}


def test_the_record_keeps_every_host_and_names_the_busiest():
    hosts = {
        "node1": {"nic": {"node1": {"status": "ok", "rx_bytes_per_s": 2e8, "tx_bytes_per_s": 0.0}}},
        "node2": {"nic": {"node2": {"status": "ok", "rx_bytes_per_s": 1.1e8, "tx_bytes_per_s": 1.1e8}}},
        "node3": {"nic": {"node3": {"status": "unknown", "reason": "no interface"}}},
    }
    columns = record._nic(hosts)
    assert columns["nic_busiest_host"] == "node2"
    # The most bytes in and out together: 0.22 GB/s against node1's 0.2 (whose in alone is higher).
    assert columns["nic_rx_gb_per_s"] == pytest.approx(0.11) and columns["nic_tx_gb_per_s"] == pytest.approx(0.11)
    assert set(columns["nic"]) == {"node1", "node2", "node3"}
    none = record._nic({"node3": hosts["node3"]})
    assert none["nic_busiest_host"] is None and none["nic"] == {
        "node3": {"status": "unknown", "reason": "no interface"}
    }
