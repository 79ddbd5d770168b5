"""The link probe's controller side: the nodes' raw figures summarised, stored and shown.

    python -m dtfbench netprobe record --db results/results.sqlite --sweep-id ID < conductor.json
    python -m dtfbench netprobe record --db results/results.sqlite --sweep-id ID --unknown "network_probe=false"
    python -m dtfbench netprobe show --db results/results.sqlite --sweep-id ID [--json]

``record`` reads the conductor's result of the ``link_probe`` module (``dtfbench.node.netprobe``:
the rounds and every node's figures), makes the sweep's network document
(``dtfbench.results.network``: per host its send and receive rates and round trip, the
cluster's point-to-point and incast rates, the hosts far below the others), appends it to the
store and prints it as JSON (``document``, and ``lines``: what the playbook shows, the
warnings after the first line). With ``--unknown WHY`` it records that nothing was measured, and
why. Rates in GB/s (10^9 bytes/s); round trips in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping
from typing import Any

from . import network


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarise(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The network document (dtfbench.results.network) of the conductor's raw result."""
    if not isinstance(raw, Mapping) or raw.get("role") != "conductor":
        return network.unknown("the probe returned no result from its conductor (the first host)")
    if raw.get("error"):
        return network.unknown(f"the conductor {raw.get('conductor') or 'the first host'}: {raw['error']}")
    hosts = {
        name: {"private_ip": ip, "send_gb_s": None, "recv_gb_s": None, "gb_s": None, "rtt_ms": None, "why": None}
        for name, ip in raw["hosts"]
    }
    for host, why in (raw.get("missing") or {}).items():
        hosts[host]["why"] = why
    figures = raw.get("figures") or []
    pairs: list[dict[str, Any]] = []
    incast = None
    rtts: list[float] = []
    sent: dict[str, list[float]] = {h: [] for h in hosts}
    received: dict[str, list[float]] = {h: [] for h in hosts}

    def transfer(index, sender, receiver):
        got = (figures[index].get(receiver) or {}).get("received_gb_s") or {}
        errors = (figures[index].get(sender) or {}).get("send_errors") or {}
        rate = got.get(sender)
        why = errors.get(receiver) or hosts[sender]["why"] or hosts[receiver]["why"]
        if rate is None and not why:
            why = f"{receiver} counted nothing from {sender}"
        return (rate if rate else None), (None if rate else why)

    for index, spec in enumerate(raw.get("rounds") or []):
        if index >= len(figures):
            break
        if spec["kind"] == "rtt":
            for a, b in spec["pairs"]:
                rtt = ((figures[index].get(a) or {}).get("rtt_ms") or {}).get(b)
                if rtt is not None:
                    rtts.append(rtt)
                    for h in (a, b):
                        hosts[h]["rtt_ms"] = rtt if hosts[h]["rtt_ms"] is None else min(hosts[h]["rtt_ms"], rtt)
        elif spec["kind"] == "pairs":
            for a, b in spec["pairs"]:
                for sender, receiver in ((a, b), (b, a)):
                    rate, why = transfer(index, sender, receiver)
                    pairs.append({"round": index, "sender": sender, "receiver": receiver, "gb_s": rate, "why": why})
                    if rate:
                        sent[sender].append(rate)
                        received[receiver].append(rate)
        elif spec["kind"] == "incast":
            rates, whys = [], []
            for sender in spec["senders"]:
                rate, why = transfer(index, sender, spec["receiver"])
                if rate:
                    rates.append(rate)
                if why:
                    whys.append(f"{sender}: {why}")
            incast = {
                "receiver": spec["receiver"],
                "senders": list(spec["senders"]),
                "gb_s": sum(rates) if rates else None,
                "why": "; ".join(whys) or None,
            }
    for name, entry in hosts.items():
        # A host's rate is the best it reached with any partner: a slow partner drags one
        # pair down, a slow host both of its pairs.
        entry["send_gb_s"] = max(sent[name]) if sent[name] else None
        entry["recv_gb_s"] = max(received[name]) if received[name] else None
        known = [r for r in (entry["send_gb_s"], entry["recv_gb_s"]) if r]
        entry["gb_s"] = min(known) if known else None
        if entry["gb_s"] is None and not entry["why"]:
            entry["why"] = "no transfer to or from it succeeded"
    link = _median(e["gb_s"] for e in hosts.values())
    document = network.unknown("")
    document.update(
        status="ok" if link else "unknown",
        why=None
        if link
        else "no transfer between the nodes succeeded: "
        + "; ".join(f"{h}: {e['why']}" for h, e in hosts.items() if e["why"]),
        duration_s=raw.get("duration_s"),
        rounds=sum(1 for spec in raw.get("rounds") or [] if spec["kind"] != "rtt"),
        seconds=raw.get("seconds"),
        conductor=raw.get("conductor"),
        link_gb_s=link,
        incast_gb_s=incast["gb_s"] if incast and link else None,
        rtt_ms=_median(rtts),
        hosts=hosts,
        pairs=pairs,
        incast=incast,
        slow_hosts=network.slow_hosts(hosts),
        # Hosts that never reached the conductor's private address: TF's traffic cannot reach them either.
        unreached={h: why for h, why in (raw.get("missing") or {}).items() if h not in (raw.get("joined") or [])},
    )
    return document


def _mbit(gb_s: float | None) -> str:
    return "unknown" if gb_s is None else f"{gb_s:.4g} GB/s ({gb_s * 8e3:.4g} Mbit/s)"


def render(document: Mapping[str, Any]) -> str:
    """The probe's figures in a few lines (the playbook's output, the report)."""
    if document.get("status") != "ok":
        return f"network: unknown ({document.get('why')})"
    incast = document.get("incast") or {}
    rounds = document.get("rounds")
    lines = [
        f"network ({len(document['hosts'])} hosts, {rounds} round{'' if rounds == 1 else 's'} of "
        f"{document.get('duration_s')} s, {document.get('seconds') or 0:.1f} s in all): "
        f"point-to-point {_mbit(document['link_gb_s'])}, "
        + (
            f"incast into {incast['receiver']} {_mbit(document.get('incast_gb_s'))}"
            if incast
            else "no incast (it needs 3 hosts)"
        )
        + ", round trip "
        + ("unknown" if document.get("rtt_ms") is None else f"{document['rtt_ms']:.3g} ms")
    ]
    lines += warnings(document)
    return "\n".join(lines)


def warnings(document: Mapping[str, Any]) -> list[str]:
    """One line per host whose link is far below the others' (``slow_hosts``)."""
    return [
        f"WARNING: the private link of {slow['host']} reached {_mbit(slow['gb_s'])}, under "
        f"{network.SLOW_SHARE:.0%} of the hosts' median {_mbit(slow['median_gb_s'])}: every synchronous "
        "step waits for the slowest node; check its NIC, cable and neighbours, or leave it out (nodes_group)"
        for slow in document.get("slow_hosts") or []
    ]


# The options of network_record (plugins/action/network_record.py, library/network_record.py).
ARGUMENT_SPEC = {
    "results_db": {"type": "str", "required": True},
    "sweep_id": {"type": "str", "required": True},
    "probe": {"type": "dict", "default": {}},
    "unknown": {"type": "str", "default": ""},
}


def record_probe(params: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep's network document from the conductor's ``probe`` (or ``unknown``: why nothing
    was measured), stored; ``document`` and ``lines`` (what the playbook shows). A ValueError
    (the store's StoreError is one) names what is wrong."""
    if params.get("unknown"):
        document = network.unknown(params["unknown"])
    else:
        document = summarise(params.get("probe") or {})
    network.record(params["results_db"], params["sweep_id"], document)
    return {"document": document, "lines": render(document).splitlines()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtfbench netprobe", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="summarise the conductor's result (stdin, JSON) and store it")
    rec.add_argument("--db", required=True)
    rec.add_argument("--sweep-id", required=True)
    rec.add_argument("--unknown", metavar="WHY", help="record that nothing was measured, and why (no stdin)")
    show = sub.add_parser("show", help="a sweep's stored probe")
    show.add_argument("--db", required=True)
    show.add_argument("--sweep-id", required=True)
    show.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "show":
        document = network.read(args.db, args.sweep_id)
        if document is None:
            print(f"netprobe: no network probe recorded for sweep {args.sweep_id} in {args.db}", file=sys.stderr)
            return 1
        print(json.dumps(document, indent=2) if args.json else render(document))
        return 0
    probe = {}
    if not args.unknown:
        text = sys.stdin.read()
        try:
            raw = json.loads(text) if text.strip() else {}
        except ValueError as err:
            print(f"netprobe: stdin is not the link_probe module's JSON result ({err})", file=sys.stderr)
            return 2
        probe = raw.get("probe", raw) if isinstance(raw, Mapping) else raw
    recorded = record_probe({"results_db": args.db, "sweep_id": args.sweep_id, "probe": probe, "unknown": args.unknown})
    print(json.dumps(recorded, sort_keys=True))
    return 0
