# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)
"""Filters between the inventory and the cluster layout.

tf_node_specs: inventory hosts -> the host list the cluster layout takes.
tf_run_outcomes: the hosts' view of one run -> what dtfbench record takes.
tf_measured_window: the run's workers' results -> the window of every host's NIC bytes.
(Each documented in <name>.yml beside this file: ansible-doc reads one document per filter there.)

One place decides which inventory variables describe a TF node:
  private_ip     address for TF traffic (falls back to ansible_host, then the name)
  tf_devices     device slots (GPUs, or CPU worker slots)
  tf_device_type gpu | cpu (default gpu)
  tf_max_ps      parameter servers the host may run beside its workers (default 1)
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

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
            "tf_run_outcomes": tf_run_outcomes,
            "tf_measured_window": tf_measured_window,
        }
