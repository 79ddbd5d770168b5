# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""The NIC sampler: the bytes in and out of the interface that carries a host's TF address.

One program per host and run (docs/network.md, "The NIC sampler"): it finds the interface
that carries the host's ``private_ip`` (rtnetlink, standard library only), then appends
``time rx_bytes tx_bytes`` lines read from ``/proc/net/dev`` every ``--interval`` seconds to
its samples file until it is stopped (SIGTERM, the launcher's stop) or ``--max-runtime``
passes. It samples the whole run; what counts is the bytes over the workers' measured window,
which only the workers know (``measured_window``) and which ``host_figures`` cuts out of the
samples once the run is over. A host that runs only parameter servers has no measured
window of its own, and an external program (tf_cnn_benchmarks) does not announce its own:
one window for every host, the span of the workers' measured steps (the first worker's first
to the last worker's last).

The SSH launcher runs it in a fork of the task's supervisor (``run``, from the code it
imported already); the Slurm job runs its copy under the job's root as a program, so it
stands alone:
standard library only, imports nothing of dtfbench, Python 3.5-compatible (TF 1.1's 3.6).
What cannot be measured is ``{"status": "unknown", "reason": ...}``, never an exception.

usage: python dtfbench_nic_sampler.py --address ADDRESS --out FILE [--interval S] [--max-runtime S]
"""

import json
import os
import re
import signal
import socket
import struct
import sys
import time

NET_DEV = "/proc/net/dev"
DEFAULT_INTERVAL = 0.1
# The name the Slurm job gives the program on the node.
PROGRAM_NAME = "dtfbench_nic_sampler.py"

# rtnetlink (linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h).
_NETLINK_ROUTE = 0
_RTM_NEWADDR, _RTM_GETADDR = 20, 22
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_NLMSG_HEADER = struct.Struct("=IHHII")  # length, type, flags, seq, pid
_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefixlen, flags, scope, index
_RTATTR = struct.Struct("=HH")  # length, type


def unknown(reason):
    return {"status": "unknown", "reason": reason}


def _align(length):
    return (length + 3) & ~3


def parse_addr_dump(data):
    """[(family, interface index, address bytes)] of the RTM_NEWADDR messages in one rtnetlink
    answer, and whether the dump ended (NLMSG_DONE); an NLMSG_ERROR raises OSError."""
    found, offset, done = [], 0, False
    while offset + _NLMSG_HEADER.size <= len(data):
        length, kind = _NLMSG_HEADER.unpack_from(data, offset)[:2]
        if length < _NLMSG_HEADER.size:
            break
        if kind == _NLMSG_DONE:
            done = True
            break
        if kind == _NLMSG_ERROR:
            code = struct.unpack_from("=i", data, offset + _NLMSG_HEADER.size)[0]
            if code:
                raise OSError(-code, "rtnetlink RTM_GETADDR failed")
        elif kind == _RTM_NEWADDR:
            family, _prefix, _flags, _scope, index = _IFADDRMSG.unpack_from(data, offset + _NLMSG_HEADER.size)
            attrs, local, address = offset + _NLMSG_HEADER.size + _IFADDRMSG.size, None, None
            while attrs + _RTATTR.size <= offset + length:
                attr_length, attr_type = _RTATTR.unpack_from(data, attrs)
                if attr_length < _RTATTR.size:
                    break
                value = data[attrs + _RTATTR.size : attrs + attr_length]
                if attr_type == _IFA_LOCAL:
                    local = value
                elif attr_type == _IFA_ADDRESS:
                    address = value
                attrs += _align(attr_length)
            # IFA_LOCAL is the interface's own address where it differs from IFA_ADDRESS (the
            # peer of a point-to-point link).
            if local or address:
                found.append((family, index, local or address))
        offset += _align(length)
    return found, done


def interface_addresses():
    """[(interface name, address text)] of every address of this network namespace (IPv4 and
    IPv6, secondary ones too) from rtnetlink; raises OSError where it cannot be read."""
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_ROUTE)
    try:
        sock.bind((0, 0))
        body = _IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        sock.send(
            _NLMSG_HEADER.pack(_NLMSG_HEADER.size + len(body), _RTM_GETADDR, _NLM_F_REQUEST | _NLM_F_DUMP, 1, 0) + body
        )
        entries, done = [], False
        while not done:
            found, done = parse_addr_dump(sock.recv(65536))
            entries.extend(found)
    finally:
        sock.close()
    names, pairs = {}, []
    for family, index, raw in entries:
        if index not in names:
            try:
                names[index] = socket.if_indextoname(index)
            except OSError:
                continue
        pairs.append((names[index], socket.inet_ntop(family, raw)))
    return pairs


def _canonical(address):
    """The address in inet_ntop's spelling, or None when it is no IP address."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            return socket.inet_ntop(family, socket.inet_pton(family, address))
        except (OSError, ValueError):
            continue
    return None


def resolve(address):
    """The IP addresses a TF address (an IP address or a host name) stands for."""
    canonical = _canonical(address)
    if canonical is not None:
        return [canonical]
    found = []
    for _family, _kind, _proto, _name, sockaddr in socket.getaddrinfo(address, None):
        text = _canonical(sockaddr[0].split("%")[0])
        if text is not None and text not in found:
            found.append(text)
    return found


def interface_of(address, addresses=None):
    """(the interface name, the IP it carries) for a host's TF address, or (None, why not).

    A loopback address (the local system: TF traffic on 127.0.0.1) is the loopback
    interface's, which carries the whole 127.0.0.0/8 while it holds 127.0.0.1 only.
    """
    try:
        ips = resolve(address)
    except (OSError, UnicodeError) as error:
        return None, "the TF address %s does not resolve: %s" % (address, error)
    if not ips:
        return None, "the TF address %s resolves to no IP address" % address
    try:
        pairs = interface_addresses() if addresses is None else addresses
    except (OSError, AttributeError, ValueError) as error:
        return None, "the interfaces' addresses cannot be read (rtnetlink): %s" % error
    for ip in ips:
        for name, carried in pairs:
            if carried == ip:
                return name, ip
    for ip in ips:
        if ip.startswith("127.") or ip == "::1":
            for name, carried in pairs:
                if carried in ("127.0.0.1", "::1"):
                    return name, ip
    return None, "no interface of this host carries the TF address %s (%s)" % (address, ", ".join(ips))


def parse_net_dev(text):
    """{interface: (rx_bytes, tx_bytes)} from the text of /proc/net/dev."""
    counters = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 9:
            continue
        try:
            counters[name.strip()] = (int(fields[0]), int(fields[8]))
        except ValueError:
            continue
    return counters


def read_counters(interface, path=NET_DEV):
    """(rx_bytes, tx_bytes) of one interface now, or None when /proc/net/dev does not list it."""
    with open(path) as handle:
        return parse_net_dev(handle.read()).get(interface)


class CounterReader:
    """read_counters() at every sample, for less: the file stays open and is read again from
    its start (the kernel writes /proc/net/dev anew then), only as far as the interface's line,
    which alone is parsed. The sampler wakes ten times a second beside the training, on cores
    the training uses: this read costs less than half the CPU of opening and parsing the file.
    None where the file does not list the interface, or its line is not the counters' (as
    parse_net_dev skips such a line)."""

    CHUNK = 65536

    def __init__(self, interface, path=NET_DEV):
        self.fd = os.open(path, os.O_RDONLY)
        # A whole line, to its newline: a read may end inside one.
        self.line = re.compile(rb"^ *" + re.escape(interface.encode()) + rb":([^\n]*)\n", re.M)

    def read(self):
        os.lseek(self.fd, 0, os.SEEK_SET)
        text = b""
        while True:
            chunk = os.read(self.fd, self.CHUNK)
            if not chunk:
                return None
            text += chunk
            found = self.line.search(text)
            if found is not None:
                fields = found.group(1).split()
                try:
                    return int(fields[0]), int(fields[8])
                except (IndexError, ValueError):
                    return None

    def close(self):
        os.close(self.fd)


# ---- the samples file ------------------------------------------------------------------


def read_samples(path):
    """(the header, [(time, rx, tx)]) of a samples file; a torn last line (a sampler killed
    mid-write) is left out. Raises IOError/OSError/ValueError for a missing or foreign file."""
    with open(path) as handle:
        lines = handle.read().split("\n")
    header = json.loads(lines[0])
    samples = []
    for line in lines[1:]:
        fields = line.split()
        if len(fields) != 3:
            continue
        try:
            samples.append((float(fields[0]), int(fields[1]), int(fields[2])))
        except ValueError:
            continue
    return header, samples


def counters_at(samples, moment):
    """(rx, tx) at a moment inside the samples' span, interpolated linearly between the two
    samples around it; None outside the span."""
    if not samples or moment < samples[0][0] or moment > samples[-1][0]:
        return None
    for (t0, rx0, tx0), (t1, rx1, tx1) in zip(samples, samples[1:]):
        if t0 <= moment <= t1:
            share = (moment - t0) / (t1 - t0) if t1 > t0 else 0.0
            return rx0 + (rx1 - rx0) * share, tx0 + (tx1 - tx0) * share
    return samples[-1][1], samples[-1][2]


def measured_window(results):
    """The span of the workers' measured steps, from the first worker's first to the last
    worker's last: {"start", "end", "workers"} (epoch seconds, each host's clock), or
    unknown(why). ``results``: the workers' result documents (None for a worker without one).

    The union, not the span every worker shares: with asynchronous parameter servers a worker
    beside its PS (its traffic on loopback) can finish its measured steps before a remote one,
    whose traffic is what the PS's NIC carries, has begun its own."""
    spans = []
    for position, result in enumerate(results):
        window = result.get("measured_window") if isinstance(result, dict) else None
        if not isinstance(window, dict) or window.get("start") is None or window.get("end") is None:
            index = result.get("task_index", position) if isinstance(result, dict) else position
            return unknown(
                "worker %s's result has no measured window (a failed run or a program that reports none)" % index
            )
        spans.append((float(window["start"]), float(window["end"])))
    if not spans:
        return unknown("no worker result")
    start, end = min(s for s, _ in spans), max(e for _, e in spans)
    if end <= start:
        return unknown("the workers' measured window is empty (%.6f..%.6f)" % (start, end))
    return {"status": "ok", "start": start, "end": end, "workers": len(spans)}


def bytes_over(samples, start, end):
    """The bytes in and out between start and end: {"rx_bytes", "tx_bytes", "seconds",
    "rx_bytes_per_s", "tx_bytes_per_s", "samples"}, or unknown(why) when the samples do not
    span the window."""
    if len(samples) < 2:
        return unknown("fewer than 2 samples")
    if start < samples[0][0] or end > samples[-1][0]:
        return unknown(
            "the samples span %.3f..%.3f but the measured window is %.3f..%.3f (clocks apart, or the sampler "
            "started late or ended early)" % (samples[0][0], samples[-1][0], start, end)
        )
    first, last = counters_at(samples, start), counters_at(samples, end)
    seconds = end - start
    rx, tx = last[0] - first[0], last[1] - first[1]
    if rx < 0 or tx < 0:
        return unknown("the interface's counters went back (the interface was reset during the run)")
    return {
        "status": "ok",
        "rx_bytes": int(round(rx)),
        "tx_bytes": int(round(tx)),
        "seconds": round(seconds, 6),
        "rx_bytes_per_s": rx / seconds,
        "tx_bytes_per_s": tx / seconds,
        "samples": sum(1 for t, _, _ in samples if start <= t <= end),
    }


def host_figures(path, window):
    """One host's NIC figures for a run: the samples file cut to the measured window.

    {"status": "ok", "interface", "address", "rx_bytes", "tx_bytes", "seconds",
    "rx_bytes_per_s", "tx_bytes_per_s", "samples", "interval"} or {"status": "unknown",
    "reason"} (and what is known)."""
    if not isinstance(window, dict) or window.get("status", "ok") != "ok":
        reason = window.get("reason") if isinstance(window, dict) else None
        return unknown("no measured window: %s" % (reason or "the run gave none"))
    try:
        header, samples = read_samples(path)
    except (OSError, ValueError) as error:
        return unknown("the NIC samples %s cannot be read: %s" % (path, error))
    if header.get("status") != "ok":
        return dict(header, status="unknown")
    figures = bytes_over(samples, float(window["start"]), float(window["end"]))
    for key in ("interface", "address", "interval"):
        figures[key] = header.get(key)
    return figures


# ---- the program -----------------------------------------------------------------------


class _Stop(Exception):
    pass


def _stop(_number, _frame):
    raise _Stop()


def sample(address, out, interval, max_runtime, net_dev=NET_DEV, parent=None):
    """Write the header, then one line per interval until SIGTERM or max_runtime, or until
    the process ``parent`` is no longer this one's parent (its supervisor, whose stop it would
    otherwise never get); exit 0 (a host that cannot be measured writes why in its header and
    stops at once)."""
    interface, detail = interface_of(address)
    header = {"status": "ok", "address": address, "interval": interval}
    if interface is None:
        header = dict(header, status="unknown", reason=detail)
    else:
        header.update(interface=interface, ip=detail)
        try:
            if read_counters(interface, net_dev) is None:
                header = dict(header, status="unknown", reason="%s does not list interface %s" % (net_dev, interface))
        except OSError as error:
            header = dict(header, status="unknown", reason="%s cannot be read: %s" % (net_dev, error))
    with open(out, "w") as handle:
        handle.write(json.dumps(header, sort_keys=True) + "\n")
        handle.flush()
        if header["status"] != "ok":
            return 0
        reader = CounterReader(interface, net_dev)
        deadline = time.time() + max_runtime if max_runtime > 0 else None
        try:
            while True:
                counters = reader.read()
                if counters is not None:
                    handle.write("%.6f %d %d\n" % (time.time(), counters[0], counters[1]))
                    handle.flush()
                if deadline is not None and time.time() >= deadline:
                    return 0
                if parent is not None and os.getppid() != parent:
                    return 0
                time.sleep(interval)
        except _Stop:
            # One last sample: the window may end just before the stop.
            counters = reader.read()
            if counters is not None:
                handle.write("%.6f %d %d\n" % (time.time(), counters[0], counters[1]))
                handle.flush()
        finally:
            reader.close()
    return 0


def main(argv=None):
    # Here, not at the top: every tf_host_run call imports this module for host_figures.
    import argparse

    parser = argparse.ArgumentParser(prog=PROGRAM_NAME, description=__doc__.splitlines()[0])
    parser.add_argument("--address", required=True, help="the host's TF (private) address")
    parser.add_argument("--out", required=True, help="the samples file")
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL, help="seconds between samples")
    parser.add_argument("--max-runtime", type=float, default=0.0, help="stop after this many seconds (0: never)")
    args = parser.parse_args(argv)
    if args.interval <= 0:
        parser.error("--interval must be > 0, got %s" % args.interval)
    return run(args.address, args.out, args.interval, args.max_runtime)


def run(address, out, interval, max_runtime, parent=None):
    """Sample (``sample``) until SIGTERM, SIGINT or SIGHUP, max_runtime or the end of
    ``parent``; the exit status, 0."""
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, _stop)
    try:
        return sample(address, out, interval, max_runtime, parent=parent)
    except _Stop:
        return 0


if __name__ == "__main__":
    sys.exit(main())
