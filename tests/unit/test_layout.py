"""The cluster layout (dtfbench layout): examples from the study, errors, and properties."""

import copy
import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dtfbench.plan.layout import LayoutError, compute_layout, expand_nodelist, main


def hosts_of(*devices, device_type="gpu"):
    return [
        {"name": "node%d" % (i + 1), "address": "10.0.0.%d" % (i + 1), "devices": d, "device_type": device_type}
        for i, d in enumerate(devices)
    ]


# ---- the output shape (docs/design.md) --------------------------------------------------


def test_design_example():
    layout = compute_layout(hosts_of(1, 1), gpus=2, num_ps=1)
    assert layout == {
        "cluster_spec": {"ps": ["10.0.0.1:2230"], "worker": ["10.0.0.1:2220", "10.0.0.2:2220"]},
        "tasks": [
            {
                "host": "node1",
                "address": "10.0.0.1",
                "job": "ps",
                "task_index": 0,
                "port": 2230,
                "endpoint": "10.0.0.1:2230",
                "cuda_visible_devices": "",
                "num_devices": 0,
                "device_type": "cpu",
            },
            {
                "host": "node1",
                "address": "10.0.0.1",
                "job": "worker",
                "task_index": 0,
                "port": 2220,
                "endpoint": "10.0.0.1:2220",
                "cuda_visible_devices": "0",
                "num_devices": 1,
                "device_type": "gpu",
            },
            {
                "host": "node2",
                "address": "10.0.0.2",
                "job": "worker",
                "task_index": 1,
                "port": 2220,
                "endpoint": "10.0.0.2:2220",
                "cuda_visible_devices": "0",
                "num_devices": 1,
                "device_type": "gpu",
            },
        ],
        "hosts": {
            "node1": [layout["tasks"][0], layout["tasks"][1]],
            "node2": [layout["tasks"][2]],
        },
        "num_workers": 2,
        "num_ps": 1,
        "hosts_used": ["node1", "node2"],
    }
    json.dumps(layout)


def test_workers_fill_hosts_in_order_with_their_device_indices():
    layout = compute_layout(hosts_of(4, 4, 4), gpus=6, num_ps=0)
    workers = [(t["host"], t["port"], t["cuda_visible_devices"]) for t in layout["tasks"]]
    assert workers == [
        ("node1", 2220, "0"),
        ("node1", 2221, "1"),
        ("node1", 2222, "2"),
        ("node1", 2223, "3"),
        ("node2", 2220, "0"),
        ("node2", 2221, "1"),
    ]
    assert layout["hosts_used"] == ["node1", "node2"]
    assert layout["cluster_spec"]["ps"] == []


def test_devices_per_worker_groups_device_indices():
    layout = compute_layout(hosts_of(4), gpus=4, num_ps=1, devices_per_worker=2)
    assert [(t["job"], t["cuda_visible_devices"], t["num_devices"]) for t in layout["tasks"]] == [
        ("ps", "", 0),
        ("worker", "0,1", 2),
        ("worker", "2,3", 2),
    ]


def test_p2_8xlarge_one_worker_of_8_gpus_per_node():
    hosts = hosts_of(8, 8, 8, 8)
    layout = compute_layout(hosts, gpus=32, num_ps=4, devices_per_worker=8)
    workers = [t for t in layout["tasks"] if t["job"] == "worker"]
    assert [w["host"] for w in workers] == ["node1", "node2", "node3", "node4"]
    assert all(w["cuda_visible_devices"] == "0,1,2,3,4,5,6,7" and w["num_devices"] == 8 for w in workers)
    assert [t["host"] for t in layout["tasks"] if t["job"] == "ps"] == ["node1", "node2", "node3", "node4"]
    assert layout["num_workers"] == 4


def test_daint_128_nodes_116_ps_on_worker_nodes():
    hosts = [
        {"name": "nid%05d" % i, "address": "nid%05d" % i, "devices": 1, "device_type": "gpu"} for i in range(1, 129)
    ]
    layout = compute_layout(hosts, gpus=128, num_ps=116)
    assert layout["num_workers"] == 128 and layout["num_ps"] == 116
    assert len(layout["cluster_spec"]["ps"]) == 116
    assert layout["cluster_spec"]["ps"][0] == "nid00001:2230"
    assert layout["cluster_spec"]["ps"][-1] == "nid00116:2230"
    assert len(set(layout["cluster_spec"]["ps"] + layout["cluster_spec"]["worker"])) == 244
    assert len(layout["hosts_used"]) == 128


def test_ps_on_separate_nodes_follow_the_worker_hosts():
    hosts = hosts_of(2, 2, 2, 2)
    layout = compute_layout(hosts, gpus=4, num_ps=2, ps_on_worker_nodes=False)
    assert layout["cluster_spec"] == {
        "ps": ["10.0.0.3:2230", "10.0.0.4:2230"],
        "worker": ["10.0.0.1:2220", "10.0.0.1:2221", "10.0.0.2:2220", "10.0.0.2:2221"],
    }
    assert layout["hosts"]["node3"][0]["cuda_visible_devices"] == ""


def test_ps_only_host_without_devices_and_cpu_hosts():
    hosts = [{"name": "ps", "devices": 0}] + hosts_of(3, 3, device_type="cpu")
    layout = compute_layout(hosts, gpus=6, num_ps=1, ps_on_worker_nodes=False)
    assert layout["cluster_spec"]["ps"] == ["ps:2230"]  # address defaults to the name
    workers = [t for t in layout["tasks"] if t["job"] == "worker"]
    assert all(w["cuda_visible_devices"] == "" and w["device_type"] == "cpu" for w in workers)
    assert layout["hosts_used"] == ["ps", "node1", "node2"]


def test_hosts_without_room_for_a_worker_are_skipped():
    layout = compute_layout(hosts_of(1, 8), gpus=8, num_ps=0, devices_per_worker=8)
    assert layout["hosts_used"] == ["node2"]


def test_string_integers_are_accepted():
    hosts = [{"name": "a", "devices": "2"}]
    assert compute_layout(hosts, "2", "1")["num_workers"] == 2


def test_input_is_not_modified():
    hosts = [{"name": "a", "devices": 2}]
    before = copy.deepcopy(hosts)
    compute_layout(hosts, 2, 1)
    assert hosts == before


# ---- errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (
            dict(hosts=hosts_of(1, 1), gpus=8, num_ps=3),
            "the allocated nodes are not enough for 8 workers of 1 device and 3 parameter servers "
            "(on the worker nodes): 2 hosts offer 2 devices, room for 2 workers of 1 device; add hosts "
            "or lower gpus/num_ps",
        ),
        (
            dict(hosts=hosts_of(1, 1, 1), gpus=2, num_ps=2, ps_on_worker_nodes=False),
            "the allocated nodes are not enough for 2 workers of 1 device and 2 parameter servers (on "
            "separate nodes): 3 hosts offer 3 devices; the workers need 2 hosts and the parameter "
            "servers 2 hosts more, but only 1 host is left",
        ),
        (
            dict(hosts=hosts_of(2, 2, 2), gpus=4, num_ps=3),
            "the workers occupy 2 hosts and each takes at most one parameter server; lower num_ps to 2",
        ),
        (
            dict(hosts=hosts_of(8), gpus=8, num_ps=1, devices_per_worker=3),
            "gpus=8 is not a multiple of devices_per_worker=3",
        ),
        (
            dict(hosts=hosts_of(16), gpus=16, num_ps=1),
            "port collision on host node1: its 16 workers use ports 2220-2235 (worker_port_base=2220) "
            "and its 1 parameter server use 2230-2230 (ps_port_base=2230), both want 2230",
        ),
        (dict(hosts=hosts_of(1), gpus=1, num_ps=1, ps_port_base=2220), "port collision on host node1"),
        (dict(hosts=hosts_of(2), gpus=2, num_ps=0, worker_port_base=65535), "ports out of range on host node1"),
        (
            dict(hosts=[{"name": "a", "devices": 1}, {"name": "a", "devices": 1}], gpus=1, num_ps=0),
            "duplicate host name 'a'",
        ),
        (
            dict(
                hosts=[
                    {"name": "a", "address": "10.0.0.1", "devices": 1},
                    {"name": "b", "address": "10.0.0.1", "devices": 1},
                ],
                gpus=1,
                num_ps=0,
            ),
            "duplicate host address '10.0.0.1'",
        ),
        (dict(hosts=hosts_of(1), gpus=0, num_ps=0), "gpus must be >= 1"),
        (dict(hosts=hosts_of(1), gpus=1, num_ps=-1), "num_ps must be >= 0"),
        (dict(hosts=hosts_of(1), gpus=1, num_ps=0, devices_per_worker=0), "devices_per_worker must be >= 1"),
        (dict(hosts=[], gpus=1, num_ps=0), "hosts is empty"),
        (dict(hosts="node1", gpus=1, num_ps=0), "hosts must be a list"),
        (dict(hosts=[{"name": "a"}], gpus=1, num_ps=0), "hosts[0] (a).devices is missing"),
        (dict(hosts=[{"name": "a", "devices": -1}], gpus=1, num_ps=0), "hosts[0] (a).devices must be >= 0"),
        (dict(hosts=[{"name": "a", "devices": True}], gpus=1, num_ps=0), "must be an integer"),
        (
            dict(hosts=[{"name": "a", "devices": 1, "device_type": "tpu"}], gpus=1, num_ps=0),
            "device_type must be one of gpu, cpu",
        ),
        (dict(hosts=[{"name": "a", "devices": 1, "gpus": 1}], gpus=1, num_ps=0), "unknown keys gpus"),
        (dict(hosts=[{"name": "a", "address": "10.0.0.1:22", "devices": 1}], gpus=1, num_ps=0), "without a port"),
        (dict(hosts=hosts_of(1), gpus=1, num_ps=0, ps_on_worker_nodes="yes"), "ps_on_worker_nodes must be a boolean"),
        (dict(hosts=hosts_of(1), gpus=1, num_ps=0, ps_port_base=0), "ps_port_base must be a TCP port"),
    ],
)
def test_errors(kwargs, expected):
    with pytest.raises(LayoutError) as info:
        compute_layout(**kwargs)
    assert expected in str(info.value)
    assert isinstance(info.value, ValueError)


def test_port_collision_only_where_tasks_share_a_host():
    # 16 workers per host are fine without a PS on that host.
    layout = compute_layout(hosts_of(16, 16, 0), gpus=32, num_ps=1, ps_on_worker_nodes=False)
    assert layout["cluster_spec"]["ps"] == ["10.0.0.3:2230"]
    # ... and with PSs when the bases are apart.
    compute_layout(hosts_of(16), gpus=16, num_ps=1, ps_port_base=2300)


# ---- properties ---------------------------------------------------------------------------


@st.composite
def layout_inputs(draw):
    count = draw(st.integers(1, 8))
    hosts = [
        {
            "name": "h%d" % i,
            "address": "10.1.0.%d" % i,
            "devices": draw(st.integers(0, 9)),
            "device_type": draw(st.sampled_from(["gpu", "cpu"])),
        }
        for i in range(count)
    ]
    devices_per_worker = draw(st.integers(1, 4))
    gpus = devices_per_worker * draw(st.integers(1, 12))
    num_ps = draw(st.integers(0, 6))
    ps_on_worker_nodes = draw(st.booleans())
    return dict(
        hosts=hosts,
        gpus=gpus,
        num_ps=num_ps,
        devices_per_worker=devices_per_worker,
        ps_on_worker_nodes=ps_on_worker_nodes,
    )


def try_layout(kwargs):
    try:
        return compute_layout(**kwargs)
    except LayoutError:
        return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layout_inputs())
def test_layout_properties(kwargs):
    layout = try_layout(kwargs)
    assume(layout is not None)
    hosts = {h["name"]: h for h in kwargs["hosts"]}
    order = [h["name"] for h in kwargs["hosts"]]
    tasks = layout["tasks"]
    ps = [t for t in tasks if t["job"] == "ps"]
    workers = [t for t in tasks if t["job"] == "worker"]
    dpw = kwargs["devices_per_worker"]

    # Counts and order: PSs first, then workers, indices contiguous from 0 per job.
    assert tasks == ps + workers
    assert [t["task_index"] for t in ps] == list(range(kwargs["num_ps"]))
    assert [t["task_index"] for t in workers] == list(range(kwargs["gpus"] // dpw))
    assert layout["num_workers"] == len(workers) and layout["num_ps"] == len(ps)
    # The cluster spec is the tasks' endpoints.
    assert layout["cluster_spec"]["ps"] == ["%s:%d" % (t["address"], t["port"]) for t in ps]
    assert layout["cluster_spec"]["worker"] == [t["endpoint"] for t in workers]
    # host:port unique.
    endpoints = [(t["host"], t["port"]) for t in tasks]
    assert len(set(endpoints)) == len(endpoints)
    # Worker order follows host order.
    positions = [order.index(t["host"]) for t in workers]
    assert positions == sorted(positions)
    # Every requested device used exactly once; never more than a host offers; PS no GPU.
    used = {}
    for worker in workers:
        assert worker["num_devices"] == dpw
        host = hosts[worker["host"]]
        if host["device_type"] == "gpu":
            indices = [int(i) for i in worker["cuda_visible_devices"].split(",")]
            assert len(indices) == dpw
            for index in indices:
                assert 0 <= index < host["devices"]
                assert (worker["host"], index) not in used
                used[(worker["host"], index)] = worker["task_index"]
        else:
            assert worker["cuda_visible_devices"] == ""
    per_host_workers = {}
    for worker in workers:
        per_host_workers[worker["host"]] = per_host_workers.get(worker["host"], 0) + 1
    for name, count in per_host_workers.items():
        assert count * dpw <= hosts[name]["devices"]
    assert sum(per_host_workers.values()) * dpw == kwargs["gpus"]
    for task in ps:
        assert task["cuda_visible_devices"] == "" and task["num_devices"] == 0
    # PS placement.
    worker_hosts = set(per_host_workers)
    ps_hosts = [t["host"] for t in ps]
    assert len(set(ps_hosts)) == len(ps_hosts)
    if kwargs["ps_on_worker_nodes"]:
        assert set(ps_hosts) <= worker_hosts
    else:
        assert not set(ps_hosts) & worker_hosts
    # Per-host view and hosts_used agree with the tasks, in host order.
    assert layout["hosts_used"] == [n for n in order if n in worker_hosts | set(ps_hosts)]
    assert list(layout["hosts"]) == layout["hosts_used"]
    assert sorted((t["job"], t["task_index"]) for h in layout["hosts"].values() for t in h) == sorted(
        (t["job"], t["task_index"]) for t in tasks
    )
    # Ports: the k-th task of a job on a host gets base + k.
    for host_tasks in layout["hosts"].values():
        for job, base in (("ps", 2230), ("worker", 2220)):
            ports = [t["port"] for t in host_tasks if t["job"] == job]
            assert ports == list(range(base, base + len(ports)))
    # Stable: same input, same output.
    assert compute_layout(**copy.deepcopy(kwargs)) == layout


@settings(max_examples=400, deadline=None)
@given(layout_inputs())
def test_layout_exists_exactly_when_capacity_allows(kwargs):
    """The layout fails only for the documented reasons."""
    hosts, dpw = kwargs["hosts"], kwargs["devices_per_worker"]
    workers = kwargs["gpus"] // dpw
    slots, worker_hosts, left = 0, 0, workers
    for host in hosts:
        take = min(host["devices"] // dpw, left)
        if take:
            worker_hosts += 1
            left -= take
        slots += host["devices"] // dpw
    if kwargs["ps_on_worker_nodes"]:
        feasible = slots >= workers and kwargs["num_ps"] <= worker_hosts
        # 11+ workers on a host with a PS collide with ports 2230+.
        per_host = [min(h["devices"] // dpw, workers) for h in hosts]
        assume(max(per_host) <= 10 or not feasible)
    else:
        feasible = slots >= workers and kwargs["num_ps"] <= len(hosts) - worker_hosts
    layout = try_layout(kwargs)
    assert (layout is not None) == feasible, kwargs


@given(st.lists(st.integers(0, 9), min_size=1, max_size=6), st.integers(1, 6))
def test_too_few_devices_is_always_the_not_enough_error(devices, extra):
    hosts = hosts_of(*devices)
    gpus = sum(devices) + extra
    with pytest.raises(LayoutError, match="the allocated nodes are not enough for"):
        compute_layout(hosts, gpus, 0)


# ---- nodelist and command line --------------------------------------------------------


def test_expand_nodelist():
    assert expand_nodelist("nid0[0001-0003,0007],login1") == ["nid00001", "nid00002", "nid00003", "nid00007", "login1"]
    assert expand_nodelist("a,b , c") == ["a", "b", "c"]
    assert expand_nodelist("gpu[8-10]") == ["gpu8", "gpu9", "gpu10"]
    assert expand_nodelist("r[1-2]n[01-02]") == ["r1n01", "r1n02", "r2n01", "r2n02"]
    for bad in ("a[1-2", "a]", "a[x]", "a[3-1]"):
        with pytest.raises(LayoutError):
            expand_nodelist(bad)


def run_cli(argv, stdin=None):
    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                rc = main(argv)
            except SystemExit as exit:
                rc = exit.code
    finally:
        sys.stdin = old_stdin
    return rc, out.getvalue(), err.getvalue()


def test_cli_nodelist_json():
    rc, out, err = run_cli(
        [
            "--nodelist",
            "nid0[0001-0004]",
            "--address-same-as-name",
            "--devices-per-node",
            "1",
            "--gpus",
            "4",
            "--num-ps",
            "2",
        ]
    )
    assert rc == 0, err
    layout = json.loads(out)
    assert layout == compute_layout(
        [
            {"name": n, "address": n, "devices": 1, "device_type": "gpu"}
            for n in ["nid00001", "nid00002", "nid00003", "nid00004"]
        ],
        4,
        2,
    )


def test_cli_hosts_json_stdin_tsv_and_flags(tmp_path):
    hosts = json.dumps({"hosts": hosts_of(2, 2)})
    rc, out, err = run_cli(["--hosts-json", "-", "--gpus", "4", "--num-ps", "1", "--format", "tsv"], stdin=hosts)
    assert rc == 0, err
    assert out.splitlines()[:2] == ["node1\t10.0.0.1\tps\t0\t2230\t-\t0", "node1\t10.0.0.1\tworker\t0\t2220\t0\t1"]
    path = tmp_path / "hosts.json"
    path.write_text(json.dumps(hosts_of(1, 1, 1)))
    rc, out, err = run_cli(
        ["--hosts-json", str(path), "--gpus", "2", "--num-ps", "1", "--ps-on-separate-nodes", "--format", "flags"]
    )
    assert rc == 0, err
    assert out.strip() == ("--ps_hosts=10.0.0.3:2230 --worker_hosts=10.0.0.1:2220,10.0.0.2:2220")


def test_cli_errors():
    rc, out, err = run_cli(
        ["--nodelist", "a,b", "--address-same-as-name", "--devices-per-node", "1", "--gpus", "8", "--num-ps", "3"]
    )
    assert rc == 2 and out == ""
    assert err.startswith("dtfbench layout: error: the allocated nodes are not enough for 8 workers")
    rc, out, err = run_cli(["--nodelist", "a,b", "--devices-per-node", "1", "--gpus", "1", "--num-ps", "0"])
    assert rc == 2 and "--address-same-as-name" in err


def test_a_workstation_may_run_several_parameter_servers():
    # The study's local launcher: PSs at 2230, 2231, ... beside the workers on one machine.
    local = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu", "max_ps": 8}]
    layout = compute_layout(local, gpus=2, num_ps=2)
    assert layout["cluster_spec"]["ps"] == ["127.0.0.1:2230", "127.0.0.1:2231"]
    assert layout["cluster_spec"]["worker"] == ["127.0.0.1:2220", "127.0.0.1:2221"]
    with pytest.raises(LayoutError, match=r"at most its max_ps parameter servers \(8\); lower num_ps to 8"):
        compute_layout(local, gpus=2, num_ps=9)


def test_max_ps_fills_round_robin_and_respects_each_hosts_room():
    hosts = [{"name": "a", "devices": 1, "max_ps": 2}, {"name": "b", "devices": 1, "max_ps": 1}]
    layout = compute_layout(hosts, gpus=2, num_ps=3)
    assert [t["host"] for t in layout["tasks"] if t["job"] == "ps"] == ["a", "b", "a"]
    with pytest.raises(LayoutError, match="lower num_ps to 3"):
        compute_layout(hosts, gpus=2, num_ps=4)
