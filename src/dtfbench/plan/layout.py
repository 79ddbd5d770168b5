"""The cluster layout: which task (parameter server or worker) runs on which host and port.

This is the one implementation of the layout (see ``docs/design.md``). It is a pure function
of its inputs and imports only the standard library: Ansible ships this file to targets as
``ansible.module_utils.dtfbench.plan.layout`` (``module_utils/dtfbench/plan`` is a symbolic
link to this folder), and Slurm batch scripts run a copy of this one file (roles/slurm_cluster's
``dtfbench_layout.py``) on the job's Python, which may lack dtfbench (a TF 1.1 module's 3.6):
keep it one file, importing nothing of dtfbench, in the syntax of that Python (pyproject.toml's
[tool.dtfbench.oldest-python]).

Rules (in order):

* Workers fill the hosts in order, ``devices // devices_per_worker`` workers per host, until
  ``gpus // devices_per_worker`` workers are placed.  The k-th worker on a host gets the
  device indices ``k*devices_per_worker .. (k+1)*devices_per_worker - 1``
  (``CUDA_VISIBLE_DEVICES``; empty on a CPU host).
* With ``ps_on_worker_nodes`` the parameter servers go round-robin over the worker hosts
  (each up to its ``max_ps``, default 1: more is an error); otherwise one per host that holds no
  worker, in host order.  A parameter server never gets a GPU (``CUDA_VISIBLE_DEVICES=""``).
* On each host the k-th worker listens on ``worker_port_base + k`` and the k-th parameter
  server on ``ps_port_base + k``.

Every error is a :class:`LayoutError` (a ``ValueError``) whose message names the input, what
is wrong with it and how to fix it, raised before anything starts.
"""

from __future__ import absolute_import, division, print_function

import argparse
import json
import re
import sys

__all__ = [
    "ARGUMENT_SPEC",
    "SPEC_OPTIONS",
    "LayoutError",
    "compute_layout",
    "expand_nodelist",
    "main",
    "planned_layout",
]

DEVICE_TYPES = ("gpu", "cpu")
DEFAULT_PS_PORT_BASE = 2230
DEFAULT_WORKER_PORT_BASE = 2220


# The inputs of compute_layout as an Ansible argument spec: the tf_cluster_spec module and its
# controller-side action plugin validate with this one spec (and SPEC_OPTIONS). Or, instead of
# them, a layout computed before (layout: the benchmark plan's, one per run), taken as it is.
ARGUMENT_SPEC = dict(
    layout=dict(type="dict"),
    hosts=dict(
        type="list",
        elements="dict",
        options=dict(
            name=dict(type="str", required=True),
            address=dict(type="str"),
            devices=dict(type="int", required=True),
            device_type=dict(type="str", choices=list(DEVICE_TYPES), default="gpu"),
            max_ps=dict(type="int", default=1),
        ),
    ),
    gpus=dict(type="int"),
    num_ps=dict(type="int"),
    devices_per_worker=dict(type="int", default=1),
    ps_on_worker_nodes=dict(type="bool", default=True),
    ps_port_base=dict(type="int", default=DEFAULT_PS_PORT_BASE),
    worker_port_base=dict(type="int", default=DEFAULT_WORKER_PORT_BASE),
)
# The inputs that compute a layout: none of them goes with a planned one (it was computed from them).
_INPUTS = ("hosts", "gpus", "num_ps", "devices_per_worker", "ps_on_worker_nodes", "ps_port_base", "worker_port_base")
SPEC_OPTIONS = dict(
    mutually_exclusive=[["layout", name] for name in _INPUTS],
    required_one_of=[["layout", "hosts"]],
    required_by={"hosts": ["gpus", "num_ps"]},
)
# What a layout holds (docs/design.md), and each of its tasks.
LAYOUT_KEYS = ("cluster_spec", "tasks", "hosts", "num_workers", "num_ps", "hosts_used")
TASK_KEYS = (
    "host",
    "address",
    "job",
    "task_index",
    "port",
    "endpoint",
    "cuda_visible_devices",
    "num_devices",
    "device_type",
)


def layout_from_params(params):
    """The validated parameters of ARGUMENT_SPEC's layout: the planned one as it is, else compute_layout's."""
    if params.get("layout") is not None:
        return planned_layout(params["layout"])
    return compute_layout(
        params["hosts"],
        params["gpus"],
        params["num_ps"],
        devices_per_worker=params["devices_per_worker"],
        ps_on_worker_nodes=params["ps_on_worker_nodes"],
        ps_port_base=params["ps_port_base"],
        worker_port_base=params["worker_port_base"],
    )


class LayoutError(ValueError):
    """The inputs admit no layout; the message says which input is wrong and how to fix it."""


def _as_int(value, what, minimum=None):
    """Return ``value`` as an int (ints and decimal strings accepted, bools refused)."""
    if isinstance(value, bool):
        raise LayoutError("%s must be an integer, got the boolean %r" % (what, value))
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str) and re.match(r"^\s*[+-]?\d+\s*$", value):
        result = int(value)
    else:
        raise LayoutError("%s must be an integer, got %r" % (what, value))
    if minimum is not None and result < minimum:
        raise LayoutError("%s must be >= %d, got %d" % (what, minimum, result))
    return result


def _plural(count, singular, plural=None):
    return "%d %s" % (count, singular if count == 1 else (plural or singular + "s"))


def _hosts_offer(count):
    return "%s offer%s" % (_plural(count, "host"), "s" if count == 1 else "")


def _normalise_hosts(hosts):
    if isinstance(hosts, (str, bytes)) or not isinstance(hosts, (list, tuple)):
        raise LayoutError(
            "hosts must be a list of {name, address, devices, device_type} mappings, got %s" % type(hosts).__name__
        )
    if not hosts:
        raise LayoutError(
            "hosts is empty: the layout needs at least one host; check the inventory group or the Slurm allocation"
        )
    result = []
    names = {}
    addresses = {}
    for position, host in enumerate(hosts):
        where = "hosts[%d]" % position
        if not isinstance(host, dict):
            raise LayoutError(
                "%s must be a mapping with name, address, devices and device_type, got %r" % (where, host)
            )
        unknown = sorted(set(host) - {"name", "address", "devices", "device_type", "max_ps"})
        if unknown:
            raise LayoutError(
                "%s has unknown keys %s; allowed: name, address, devices, "
                "device_type, max_ps" % (where, ", ".join(unknown))
            )
        name = host.get("name")
        if not isinstance(name, str) or not name.strip():
            raise LayoutError("%s.name must be a non-empty string, got %r" % (where, name))
        where = "hosts[%d] (%s)" % (position, name)
        address = host.get("address")
        if address is None or address == "":
            address = name
        if not isinstance(address, str) or not address.strip() or ":" in address:
            raise LayoutError(
                "%s.address must be a host name or IPv4 address without a port, got %r" % (where, address)
            )
        if "devices" not in host or host["devices"] is None:
            raise LayoutError(
                "%s.devices is missing: give the number of GPUs of the host "
                "(or CPU worker slots when device_type is cpu)" % where
            )
        devices = _as_int(host["devices"], "%s.devices" % where, minimum=0)
        device_type = host.get("device_type") or "gpu"
        # How many PSs the host may run beside its workers: one on a cluster node (the
        # study's launchers on Daint and EC2), several on a workstation (its local launcher).
        max_ps = host.get("max_ps")
        max_ps = 1 if max_ps is None else _as_int(max_ps, "%s.max_ps" % where, minimum=1)
        if device_type not in DEVICE_TYPES:
            raise LayoutError(
                "%s.device_type must be one of %s, got %r" % (where, ", ".join(DEVICE_TYPES), device_type)
            )
        if name in names:
            raise LayoutError(
                "duplicate host name %r: hosts[%d] and hosts[%d]; each host must "
                "appear once in hosts" % (name, names[name], position)
            )
        if address in addresses:
            raise LayoutError(
                "duplicate host address %r: hosts[%d] (%s) and %s; each host needs "
                "its own address (set address/private_ip per host)"
                % (address, addresses[address][0], addresses[address][1], where)
            )
        names[name] = position
        addresses[address] = (position, name)
        result.append(
            {"name": name, "address": address, "devices": devices, "device_type": device_type, "max_ps": max_ps}
        )
    return result


def _check_ports(host, workers, ps, worker_port_base, ps_port_base):
    """Refuse port ranges that collide or leave 1..65535 on one host."""
    worker_ports = set(range(worker_port_base, worker_port_base + workers))
    ps_ports = set(range(ps_port_base, ps_port_base + ps))
    for ports, job, base, count, option in (
        (worker_ports, "workers", worker_port_base, workers, "worker_port_base"),
        (ps_ports, "parameter servers", ps_port_base, ps, "ps_port_base"),
    ):
        if ports and max(ports) > 65535:
            raise LayoutError(
                "ports out of range on host %s: %s %s from %s=%d reach port %d > 65535; "
                "lower %s" % (host, count, job, option, base, max(ports), option)
            )
    clash = sorted(worker_ports & ps_ports)
    if clash:
        raise LayoutError(
            "port collision on host %s: its %s use ports %d-%d (worker_port_base=%d) and its "
            "%s use %d-%d (ps_port_base=%d), both want %s; move ps_port_base or "
            "worker_port_base apart by at least the tasks per host (e.g. ps_port_base=%d)"
            % (
                host,
                _plural(workers, "worker"),
                worker_port_base,
                worker_port_base + workers - 1,
                worker_port_base,
                _plural(ps, "parameter server"),
                ps_port_base,
                ps_port_base + ps - 1,
                ps_port_base,
                ", ".join(str(p) for p in clash[:4]) + (", ..." if len(clash) > 4 else ""),
                worker_port_base + workers,
            )
        )


def compute_layout(
    hosts,
    gpus,
    num_ps,
    devices_per_worker=1,
    ps_on_worker_nodes=True,
    ps_port_base=DEFAULT_PS_PORT_BASE,
    worker_port_base=DEFAULT_WORKER_PORT_BASE,
):
    """Return the cluster layout for ``gpus`` devices and ``num_ps`` parameter servers.

    ``hosts`` is the ordered list of ``{name, address, devices, device_type}`` (``address``
    defaults to ``name``, ``device_type`` to ``gpu``).  The result is the JSON-serialisable
    dict described in ``docs/design.md``.  Raises :class:`LayoutError`.
    """
    hosts = _normalise_hosts(hosts)
    gpus, num_ps, devices_per_worker = _checked_counts(gpus, num_ps, devices_per_worker)
    if not isinstance(ps_on_worker_nodes, bool):
        raise LayoutError("ps_on_worker_nodes must be a boolean, got %r" % (ps_on_worker_nodes,))
    ps_port_base, worker_port_base = _checked_port_bases(ps_port_base, worker_port_base)
    num_workers = _num_workers(gpus, devices_per_worker)

    workers_on, remaining = _place_workers(hosts, num_workers, devices_per_worker)
    worker_host_indices = [index for index, _ in workers_on]
    ps_host_indices, spare = _place_parameter_servers(hosts, worker_host_indices, num_ps, ps_on_worker_nodes)

    wanted = _wanted(num_workers, devices_per_worker, num_ps, ps_on_worker_nodes)
    if remaining:
        _refuse_too_few_workers(hosts, wanted, devices_per_worker)
    if ps_on_worker_nodes and num_ps > len(ps_host_indices):
        _refuse_too_few_ps_slots(hosts, wanted, worker_host_indices, ps_host_indices)
    if not ps_on_worker_nodes and num_ps > len(spare):
        _refuse_too_few_spare_hosts(hosts, wanted, worker_host_indices, num_ps, spare)
    _check_host_ports(hosts, workers_on, ps_host_indices, worker_port_base, ps_port_base)

    ps_tasks = _ps_tasks(hosts, ps_host_indices, ps_port_base)
    worker_tasks = _worker_tasks(hosts, workers_on, devices_per_worker, worker_port_base)
    return _layout(hosts, ps_tasks, worker_tasks, set(ps_host_indices) | set(worker_host_indices), num_workers, num_ps)


def planned_layout(layout):
    """``layout``, a layout computed before (compute_layout's, or tf_cluster_spec's registered
    result), as it is: its keys (LAYOUT_KEYS) and nothing is computed again. Only its shape is
    checked, and that its parts agree (cluster_spec, hosts and the counts are those of its tasks):
    a LayoutError names what is wrong."""
    if not isinstance(layout, dict):
        raise LayoutError("layout must be a mapping (a cluster layout), got %s" % type(layout).__name__)
    missing = [key for key in LAYOUT_KEYS if key not in layout]
    if missing:
        raise LayoutError(
            "layout is not a cluster layout: it lacks %s; give the layout as computed "
            "(tf_cluster_spec, benchmark_plan's runs[].layout), or leave layout out to compute one" % ", ".join(missing)
        )
    tasks = layout["tasks"]
    if not isinstance(tasks, list) or not all(isinstance(t, dict) and all(k in t for k in TASK_KEYS) for t in tasks):
        raise LayoutError("layout.tasks must be a list of tasks, each with %s" % ", ".join(TASK_KEYS))
    by_job = dict((job, [t for t in tasks if t["job"] == job]) for job in ("ps", "worker"))
    per_host = {}
    for task in tasks:
        per_host.setdefault(task["host"], []).append(task)
    derived = {
        "cluster_spec": dict((job, [t["endpoint"] for t in by_job[job]]) for job in by_job),
        "num_ps": len(by_job["ps"]),
        "num_workers": len(by_job["worker"]),
        "hosts": per_host,
        "hosts_used": sorted(per_host),
    }
    given = dict(
        (key, sorted(layout[key]) if key == "hosts_used" and isinstance(layout[key], list) else layout[key])
        for key in derived
    )
    wrong = [key for key in sorted(derived) if given[key] != derived[key]]
    if len(tasks) != len(by_job["ps"]) + len(by_job["worker"]):
        wrong.insert(0, "tasks (a job other than ps and worker)")
    if wrong:
        raise LayoutError(
            "layout's %s do%s not agree with its tasks: give the layout unchanged, as computed, "
            "or leave layout out to compute one" % (", ".join(wrong), "es" if len(wrong) == 1 else "")
        )
    return dict((key, layout[key]) for key in LAYOUT_KEYS)


def _checked_counts(gpus, num_ps, devices_per_worker):
    """gpus, num_ps and devices_per_worker as ints in range: each wrong one named before any placement."""
    gpus = _as_int(gpus, "gpus")
    if gpus < 1:
        raise LayoutError("gpus must be >= 1 (the total number of devices to train on), got %d" % gpus)
    num_ps = _as_int(num_ps, "num_ps")
    if num_ps < 0:
        raise LayoutError("num_ps must be >= 0 (0 for collective_all_reduce or independent), got %d" % num_ps)
    devices_per_worker = _as_int(devices_per_worker, "devices_per_worker")
    if devices_per_worker < 1:
        raise LayoutError("devices_per_worker must be >= 1, got %d" % devices_per_worker)
    return gpus, num_ps, devices_per_worker


def _checked_port_bases(ps_port_base, worker_port_base):
    """The two port bases as TCP ports (1..65535): a task's port is its base plus its index on the host."""
    ps_port_base = _as_int(ps_port_base, "ps_port_base")
    worker_port_base = _as_int(worker_port_base, "worker_port_base")
    for option, value in (("ps_port_base", ps_port_base), ("worker_port_base", worker_port_base)):
        if not 1 <= value <= 65535:
            raise LayoutError("%s must be a TCP port in 1..65535, got %d" % (option, value))
    return ps_port_base, worker_port_base


def _num_workers(gpus, devices_per_worker):
    """How many workers drive the gpus: a worker takes devices_per_worker devices, so gpus must divide."""
    if gpus % devices_per_worker:
        lower = gpus - gpus % devices_per_worker
        raise LayoutError(
            "gpus=%d is not a multiple of devices_per_worker=%d: every worker drives "
            "devices_per_worker devices; use gpus=%s%d or change devices_per_worker"
            % (
                gpus,
                devices_per_worker,
                ("%d or " % lower) if lower else "",
                lower + devices_per_worker,
            )
        )
    return gpus // devices_per_worker


def _place_workers(hosts, num_workers, devices_per_worker):
    """Workers fill the hosts in order: ([(host index, workers on it)], workers left without a host)."""
    workers_on = []
    remaining = num_workers
    for index, host in enumerate(hosts):
        if remaining == 0:
            break
        slots = min(host["devices"] // devices_per_worker, remaining)
        if slots:
            workers_on.append((index, slots))
            remaining -= slots
    return workers_on, remaining


def _place_parameter_servers(hosts, worker_host_indices, num_ps, ps_on_worker_nodes):
    """The host index of each parameter server, and the hosts without a worker (spare; [] when the
    PSs share the worker hosts). Fewer than num_ps where the hosts run out: the caller says so."""
    if ps_on_worker_nodes:
        # Round-robin over the worker hosts, each up to its max_ps.
        ps_host_indices = []
        room = {index: hosts[index]["max_ps"] for index in worker_host_indices}
        while len(ps_host_indices) < num_ps and any(room.values()):
            for index in worker_host_indices:
                if len(ps_host_indices) < num_ps and room[index]:
                    ps_host_indices.append(index)
                    room[index] -= 1
        return ps_host_indices, []
    used = set(worker_host_indices)
    spare = [index for index in range(len(hosts)) if index not in used]
    return spare[:num_ps], spare


def _wanted(num_workers, devices_per_worker, num_ps, ps_on_worker_nodes):
    """What the layout asks of the hosts, in words, for the errors that say they are too few."""
    placement = "on the worker nodes" if ps_on_worker_nodes else "on separate nodes"
    wanted = "%s of %s" % (_plural(num_workers, "worker"), _plural(devices_per_worker, "device"))
    if num_ps:
        wanted += " and %s (%s)" % (_plural(num_ps, "parameter server"), placement)
    return wanted


def _refuse_too_few_workers(hosts, wanted, devices_per_worker):
    """LayoutError: the hosts' devices cannot hold every worker."""
    total_devices = sum(host["devices"] for host in hosts)
    capacity = sum(host["devices"] // devices_per_worker for host in hosts)
    raise LayoutError(
        "the allocated nodes are not enough for %s: %s %s, room for %s of %s; "
        "add hosts or lower gpus/num_ps%s"
        % (
            wanted,
            _hosts_offer(len(hosts)),
            _plural(total_devices, "device"),
            _plural(capacity, "worker"),
            _plural(devices_per_worker, "device"),
            "" if devices_per_worker == 1 else "/devices_per_worker",
        )
    )


def _refuse_too_few_ps_slots(hosts, wanted, worker_host_indices, ps_host_indices):
    """LayoutError: the worker hosts' max_ps slots cannot hold every parameter server."""
    limits = sorted({hosts[index]["max_ps"] for index in worker_host_indices})
    each = (
        "at most one parameter server"
        if limits == [1]
        else "at most its max_ps parameter servers (%s)" % ", ".join(map(str, limits))
    )
    raise LayoutError(
        "the allocated nodes are not enough for %s: the workers occupy %s and each takes "
        "%s; lower num_ps to %d, raise the hosts' max_ps (inventory: tf_max_ps), or set "
        "ps_on_worker_nodes=false and add hosts for the parameter servers"
        % (wanted, _plural(len(worker_host_indices), "host"), each, len(ps_host_indices))
    )


def _refuse_too_few_spare_hosts(hosts, wanted, worker_host_indices, num_ps, spare):
    """LayoutError: too few hosts are left beside the workers' for one parameter server each."""
    total_devices = sum(host["devices"] for host in hosts)
    raise LayoutError(
        "the allocated nodes are not enough for %s: %s %s; the workers need %s and "
        "the parameter servers %s more, but only %s left; add hosts or lower gpus/num_ps "
        "(or set ps_on_worker_nodes=true)"
        % (
            wanted,
            _hosts_offer(len(hosts)),
            _plural(total_devices, "device"),
            _plural(len(worker_host_indices), "host"),
            _plural(num_ps, "host"),
            _plural(len(spare), "host is", "hosts are"),
        )
    )


def _check_host_ports(hosts, workers_on, ps_host_indices, worker_port_base, ps_port_base):
    """Check every used host's port ranges (_check_ports) before any task is built."""
    ps_count = {}
    for index in ps_host_indices:
        ps_count[index] = ps_count.get(index, 0) + 1
    worker_count = dict(workers_on)
    for index in sorted(set(worker_count) | set(ps_count)):
        _check_ports(
            hosts[index]["name"], worker_count.get(index, 0), ps_count.get(index, 0), worker_port_base, ps_port_base
        )


def _ps_tasks(hosts, ps_host_indices, ps_port_base):
    """The parameter server tasks, numbered in placement order; the k-th on a host listens on ps_port_base + k."""
    ps_tasks = []
    next_ps_port = {}
    for task_index, index in enumerate(ps_host_indices):
        host = hosts[index]
        port = ps_port_base + next_ps_port.get(index, 0)
        next_ps_port[index] = next_ps_port.get(index, 0) + 1
        ps_tasks.append(_task(host, "ps", task_index, port, "", 0, "cpu"))
    return ps_tasks


def _worker_tasks(hosts, workers_on, devices_per_worker, worker_port_base):
    """The worker tasks, numbered in host order; the k-th on a host gets its k-th block of devices."""
    worker_tasks = []
    for index, count in workers_on:
        host = hosts[index]
        for k in range(count):
            if host["device_type"] == "gpu":
                first = k * devices_per_worker
                visible = ",".join(str(d) for d in range(first, first + devices_per_worker))
            else:
                visible = ""
            worker_tasks.append(
                _task(
                    host,
                    "worker",
                    len(worker_tasks),
                    worker_port_base + k,
                    visible,
                    devices_per_worker,
                    host["device_type"],
                )
            )
    return worker_tasks


def _layout(hosts, ps_tasks, worker_tasks, used, num_workers, num_ps):
    """The layout dict (docs/design.md) of the tasks; `used`: the indices of the hosts that run any."""
    tasks = ps_tasks + worker_tasks
    hosts_used = [host["name"] for index, host in enumerate(hosts) if index in used]
    per_host = dict((name, []) for name in hosts_used)
    for task in tasks:
        per_host[task["host"]].append(task)
    return {
        "cluster_spec": {"ps": [t["endpoint"] for t in ps_tasks], "worker": [t["endpoint"] for t in worker_tasks]},
        "tasks": tasks,
        "hosts": per_host,
        "num_workers": num_workers,
        "num_ps": num_ps,
        "hosts_used": hosts_used,
    }


def _task(host, job, task_index, port, visible, num_devices, device_type):
    return {
        "host": host["name"],
        "address": host["address"],
        "job": job,
        "task_index": task_index,
        "port": port,
        "endpoint": "%s:%d" % (host["address"], port),
        "cuda_visible_devices": visible,
        "num_devices": num_devices,
        "device_type": device_type,
    }


# --------------------------------------------------------------------------------------------
# Command line (the Slurm path): python -m dtfbench layout


def _split_outside_brackets(text):
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise LayoutError("nodelist %r has an unmatched ']'" % text)
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth:
        raise LayoutError("nodelist %r has an unmatched '['" % text)
    parts.append("".join(current))
    return [part.strip() for part in parts if part.strip()]


def expand_nodelist(text):
    """Expand a Slurm host list (``nid0[0001-0003,0007],login1``) to names, in order."""
    names = []
    for part in _split_outside_brackets(text):
        match = re.match(r"^([^\[\]]*)\[([^\[\]]+)\](.*)$", part)
        if not match:
            if "[" in part or "]" in part:
                raise LayoutError("nodelist entry %r is not a Slurm host list" % part)
            names.append(part)
            continue
        prefix, ranges, rest = match.groups()
        suffixes = expand_nodelist(rest) if rest else [""]
        for item in ranges.split(","):
            item = item.strip()
            bounds = re.match(r"^(\d+)(?:-(\d+))?$", item)
            if not bounds:
                raise LayoutError("nodelist range %r in %r is not N or N-M" % (item, part))
            low, high = bounds.group(1), bounds.group(2) or bounds.group(1)
            if int(high) < int(low):
                raise LayoutError("nodelist range %r in %r runs backwards" % (item, part))
            width = len(low)
            for number in range(int(low), int(high) + 1):
                for suffix in suffixes:
                    names.append("%s%0*d%s" % (prefix, width, number, suffix))
    return names


def _parser():
    parser = argparse.ArgumentParser(
        prog="dtfbench layout",
        description="Compute the TensorFlow cluster layout (who runs where on which port) and "
        "print it as JSON (see docs/design.md).",
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--hosts-json",
        metavar="FILE|-",
        help="JSON list of {name, address, devices, device_type}, or {\"hosts\": [...]}; '-' reads stdin",
    )
    source.add_argument(
        "--nodelist",
        metavar="NODES",
        help="comma-separated node names, Slurm ranges allowed "
        "(nid0[0001-0128]); needs --address-same-as-name and "
        "--devices-per-node",
    )
    parser.add_argument(
        "--address-same-as-name", action="store_true", help="with --nodelist: the TF address of a node is its name"
    )
    parser.add_argument(
        "--devices-per-node", type=int, metavar="N", help="with --nodelist: devices (GPUs or CPU slots) of every node"
    )
    parser.add_argument(
        "--device-type",
        choices=DEVICE_TYPES,
        default="gpu",
        help="with --nodelist: device type of every node (default gpu)",
    )
    parser.add_argument("--gpus", type=int, required=True, help="devices to use in total")
    parser.add_argument("--num-ps", type=int, required=True, help="parameter servers (>= 0)")
    parser.add_argument("--devices-per-worker", type=int, default=1)
    placement = parser.add_mutually_exclusive_group()
    placement.add_argument(
        "--ps-on-worker-nodes",
        dest="ps_on_worker_nodes",
        action="store_true",
        default=True,
        help="parameter servers share the worker nodes (default)",
    )
    placement.add_argument(
        "--ps-on-separate-nodes",
        dest="ps_on_worker_nodes",
        action="store_false",
        help="one parameter server per extra node after the worker nodes",
    )
    parser.add_argument("--ps-port-base", type=int, default=DEFAULT_PS_PORT_BASE)
    parser.add_argument("--worker-port-base", type=int, default=DEFAULT_WORKER_PORT_BASE)
    parser.add_argument(
        "--format",
        choices=("json", "tsv", "flags"),
        default="json",
        help="json: the layout (default); tsv: one task a line: host address "
        "job task_index port cuda_visible_devices('-' if empty) "
        "num_devices; flags: --ps_hosts=... --worker_hosts=...",
    )
    return parser


def _read_hosts(args, parser):
    if args.hosts_json is not None:
        for flag in ("address_same_as_name", "devices_per_node"):
            if getattr(args, flag):
                parser.error("--%s goes with --nodelist, not --hosts-json" % flag.replace("_", "-"))
        try:
            if args.hosts_json == "-":
                data = json.load(sys.stdin)
            else:
                with open(args.hosts_json) as handle:
                    data = json.load(handle)
        except (OSError, ValueError) as error:
            parser.error("--hosts-json %s: %s" % (args.hosts_json, error))
        if isinstance(data, dict) and "hosts" in data:
            data = data["hosts"]
        return data
    if not args.address_same_as_name:
        parser.error(
            "--nodelist needs --address-same-as-name (node names are the TF "
            "addresses; other address schemes: use --hosts-json)"
        )
    if args.devices_per_node is None:
        parser.error("--nodelist needs --devices-per-node N")
    return [
        {"name": name, "address": name, "devices": args.devices_per_node, "device_type": args.device_type}
        for name in expand_nodelist(args.nodelist)
    ]


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        hosts = _read_hosts(args, parser)
        layout = compute_layout(
            hosts,
            args.gpus,
            args.num_ps,
            devices_per_worker=args.devices_per_worker,
            ps_on_worker_nodes=args.ps_on_worker_nodes,
            ps_port_base=args.ps_port_base,
            worker_port_base=args.worker_port_base,
        )
    except LayoutError as error:
        sys.stderr.write("dtfbench layout: error: %s\n" % error)
        return 2
    if args.format == "json":
        sys.stdout.write(json.dumps(layout, indent=2, sort_keys=True) + "\n")
    elif args.format == "tsv":
        for task in layout["tasks"]:
            sys.stdout.write(
                "\t".join(
                    str(v)
                    for v in (
                        task["host"],
                        task["address"],
                        task["job"],
                        task["task_index"],
                        task["port"],
                        task["cuda_visible_devices"] or "-",
                        task["num_devices"],
                    )
                )
                + "\n"
            )
    else:
        sys.stdout.write(
            "--ps_hosts=%s --worker_hosts=%s\n"
            % (",".join(layout["cluster_spec"]["ps"]), ",".join(layout["cluster_spec"]["worker"]))
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
