# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)
"""Filters between the inventory and the cluster layout.

tf_node_specs: inventory hosts -> the host list the cluster layout takes.
tf_host_outcome: one host's calls of one run -> its outcome (what the tf_cluster role keeps).
tf_run_outcomes: the hosts' view of one run -> what dtfbench store add takes (a finished run's hosts).
tf_measured_window: the run's workers' results -> the window of every host's NIC bytes.
(Each documented in <name>.yml beside this file: ansible-doc reads one document per filter there.)

One place decides which inventory variables describe a TF node:
  private_ip     address for TF traffic (falls back to ansible_host, then the name)
  tf_devices     device slots (GPUs, or CPU worker slots)
  tf_device_type gpu | cpu (default gpu)
  tf_max_ps      parameter servers the host may run beside its workers (default 1)
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleFilterError

from dtfbench.contract.outcomes import busy_port
from dtfbench.launch import nic_sampler


def tf_node_specs(host_names, hostvars):
    specs = []
    for name in host_names:
        hv = hostvars[name]
        if "tf_devices" not in hv:
            raise AnsibleFilterError(
                f"host {name} has no tf_devices: set it in the inventory to the GPUs the host has "
                f"(or the CPU worker slots, with tf_device_type: cpu)"
            )
        try:
            devices = int(hv["tf_devices"])
        except (TypeError, ValueError):
            raise AnsibleFilterError(f"host {name}: tf_devices={hv['tf_devices']!r} is not an integer") from None
        spec = {
            "name": name,
            "address": str(hv.get("private_ip") or hv.get("ansible_host") or name),
            "devices": devices,
            "device_type": str(hv.get("tf_device_type", "gpu")),
        }
        if "tf_max_ps" in hv:
            spec["max_ps"] = hv["tf_max_ps"]
        specs.append(spec)
    return specs


def _busy_text(host, busy):
    if busy.get("claimed_by"):  # another sweep's run holds it: busy_port says what to do
        return busy_port(busy, host)
    return busy_port(busy, host) + (
        f": stop what listens there (ss -ltnp 'sport = :{busy['port']}') or move the "
        "ports with tf_cluster_ps_port_base / tf_cluster_worker_port_base"
    )


def tf_host_outcome(host, check, run, stop, hosts_lost, in_layout, run_complete, rescued_failure="", rescued_at=None):
    """One host's outcome of a tf_cluster run, from what its calls returned (each a registered
    result, ``{skipped: true}`` where the call did not run): its workers' results (the stored ones
    of a run that had completed), why its part failed (empty when it did not) and when, and its
    NIC figures. The cause, first found first: a host of the run that left the play, a port taken
    or a disk without room here (nothing started), the wait's failure (the rescue's message and
    time), a task that died by itself before the stop."""
    check, run, stop = check or {}, run or {}, stop or {}
    if run_complete:
        results = [{"result": result} for result in check.get("stored_results") or []]
    else:
        results = list(run.get("workers") or [])
    lost_here = bool(hosts_lost) and in_layout
    busy, room = list(check.get("busy") or []), check.get("room_problem") or ""
    died = list(stop.get("died") or [])
    if lost_here:
        failure = "not started: %s, %s of this run, left the play (unreachable or failed)" % (
            ", ".join(hosts_lost),
            "a host" if len(hosts_lost) == 1 else "hosts",
        )
        failed_at = time.time()
    elif busy or room:
        failure = "; ".join([_busy_text(host, entry) for entry in busy] + ([room] if room else []))
        failed_at = time.time()
    elif run.get("failed"):
        failure, failed_at = rescued_failure, rescued_at
    elif died:
        failure = "; ".join(entry["msg"] for entry in died)
        failed_at = min((entry["ended"] for entry in died if entry.get("ended")), default=time.time())
    else:
        failure, failed_at = "", ""
    return {
        "results": results,
        "failure": failure,
        "failed_at": failed_at,
        "nic": {host: stop["nic"]} if "nic" in stop else {},
    }


def tf_run_outcomes(all_hosts, hostvars, active_hosts):
    """What each host of the play saw of one tf_cluster run: its failure and its workers.

    A host that dropped out of the play (unreachable, or failed outside the role's rescue)
    has no say of its own, so its absence is the failure.
    """
    outcomes = {}
    for name in all_hosts:
        if name not in active_hosts:
            outcomes[name] = {"failure": "host left the play (unreachable or failed)", "workers": []}
            continue
        hv = hostvars[name]
        runs = hv.get("tf_cluster_worker_runs") or {}
        outcomes[name] = {
            "failure": hv.get("tf_cluster_failure") or "",
            "failed_at": hv.get("tf_cluster_failed_at") or None,
            "workers": list(runs.get("results") or []),
            "nic": dict(hv.get("tf_cluster_nic") or {}),
        }
    return outcomes


def tf_measured_window(worker_runs):
    """The span of the measured steps of the run's workers (what tf_host_run returned for each,
    ``{result, ...}``), first to last: {status: ok, start, end, workers}, or {status: unknown,
    reason} (dtfbench.launch.nic_sampler)."""
    return nic_sampler.measured_window([run.get("result") if isinstance(run, dict) else None for run in worker_runs])


class FilterModule:
    def filters(self):
        return {
            "tf_node_specs": tf_node_specs,
            "tf_host_outcome": tf_host_outcome,
            "tf_run_outcomes": tf_run_outcomes,
            "tf_measured_window": tf_measured_window,
        }
