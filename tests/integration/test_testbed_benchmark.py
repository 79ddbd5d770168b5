"""run-benchmark.yml across 4 test-bed hosts over real SSH: up, benchmark, down, twice in a row.

Each host is a network namespace with its own sshd, hostname and local disk
(tests/testbed/testbed.py), one CPU worker slot each: gpus=4 puts one worker on every host,
the PS(s) on the first host(s). TF traffic must go over the private addresses (the
ClusterSpec in the results store, and each worker's own flags in its result), the run files
onto each host's own /mnt/local_ssd, and nothing may be left once the test bed is down.
"""

import ipaddress
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from playbook_harness import extra_vars, run_playbook, small_run, strict_inventory_env
from testbed_fixtures import testbed_factory  # noqa: F401

from dtfbench.report import analysis
from dtfbench.results import network, store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

# Round 1 through the test bed's YAML inventory with 1 PS, round 2 through the ip_pairs
# plugin and the IP files with 2 PSs (on node01 and node02), as EC2 nodes launched by hand
# (system=aws, each host's instance_type set as the aws_ec2 inventory sets it): recorded as
# system aws-p2.xlarge, the name the report maps to the study's published p2.xlarge series.
# Round 1 measures the links before its first run (the link probe, on by default, on the TF
# worker port the run then takes); round 2 skips it (network_probe=false: unknown, with why),
# and runs collective_all_reduce beside the PS mode: a ring of the 4 workers, no PS.
ROUNDS = [
    ("hosts.yml", 1, ["-e", "system=testbed"], "testbed"),
    (
        "testbed.ip_pairs.yml",
        2,
        [
            *("-e", "system=aws", "-e", "instance_type=p2.xlarge", "-e", "network_probe=false"),
            *("-e", "variable_update=parameter_server,collective_all_reduce"),
        ],
        "aws-p2.xlarge",
    ),
]
RING = "collective_all_reduce"


def test_benchmark_across_four_hosts_twice(testbed_factory, tmp_path, live_processes):
    for round_no, (inventory_file, num_ps, system_args, recorded_system) in enumerate(ROUNDS, start=1):
        bed = testbed_factory(hosts=4)
        private_net = ipaddress.ip_network(bed.state["private_net"])
        sweep_id = f"pytest-testbed-{uuid.uuid4().hex[:8]}"
        db = tmp_path / f"results-{round_no}.sqlite"

        done = run_playbook(
            "run-benchmark.yml",
            "-i",
            bed.dir / inventory_file,
            *system_args,
            *extra_vars(gpus=4, num_ps=num_ps, sweep_id=sweep_id, results_db=db),
            *small_run(),
            env=strict_inventory_env(),
            timeout=480,
        )
        assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]

        runs = store.runs(store.connect(db))
        assert len(runs) == (2 if round_no == 2 else 1), [r["variable_update"] for r in runs]
        rings = [r for r in runs if r["variable_update"] == RING]
        (run,) = [r for r in runs if r["variable_update"] != RING]
        assert all(r["status"] == "ok" for r in runs), [r["reason"] for r in runs]
        assert run["system"] == recorded_system and run["sweep_id"] == sweep_id
        assert analysis.analyse(runs).ref_system(recorded_system) == (
            None if recorded_system == "testbed" else "aws-p2.xlarge"
        )
        assert run["hosts"] == ["node01", "node02", "node03", "node04"]
        # Each host's instance type (the inventory's, read once a sweep) is in every run's record.
        types = {host: doc.get("instance_type") for host, doc in run["environment"].items()}
        if recorded_system == "aws-p2.xlarge":
            assert types == dict.fromkeys(run["hosts"], "p2.xlarge"), types
        else:
            assert "p2.xlarge" not in types.values(), types
        assert sorted(run["environment"]) == run["hosts"]
        assert run["num_workers"] == 4 and run["num_ps"] == num_ps
        assert len(run["images_per_sec_per_worker"]) == 4 and all(r > 0 for r in run["images_per_sec_per_worker"])

        # The ClusterSpec: every endpoint on a private address, one worker per host, the
        # PSs on the first hosts (they share the worker nodes, the study's best setting).
        spec = run["cluster_spec"]
        private = {n["name"]: n["private_ip"] for n in bed.nodes}
        assert spec["worker"] == [f"{private[f'node0{i}']}:2220" for i in (1, 2, 3, 4)]
        assert spec["ps"] == [f"{private[f'node0{i}']}:2230" for i in range(1, num_ps + 1)]
        for endpoint in spec["worker"] + spec["ps"]:
            assert ipaddress.ip_address(endpoint.rsplit(":", 1)[0]) in private_net
        assert not any(ip in json.dumps(spec) for ip in bed.public_ips)

        # What each worker itself was started with, as it reported it.
        for index, result in enumerate(run["worker_results"]):
            assert result["task_index"] == index and result["status"] == "ok"
            assert result["config"]["worker_hosts"].split(",") == spec["worker"]
            assert result["config"]["ps_hosts"].split(",") == spec["ps"]
            assert result["num_workers"] == 4

        # Each worker ran on its own host and kept its files on that host's own disk.
        for index in range(4):
            node = f"node0{index + 1}"
            run_dir = bed.local_ssd(node) / "dtfbench" / "runs" / run["run_id"]
            assert (run_dir / f"worker-{index}.json").is_file(), sorted(p.name for p in run_dir.parent.rglob("*"))
            others = [f"node0{i + 1}" for i in range(4) if i != index]
            assert not any(
                (bed.local_ssd(o) / "dtfbench" / "runs" / run["run_id"] / f"worker-{index}.json").exists()
                for o in others
            )
        assert not (Path("/tmp/dtfbench/runs") / run["run_id"]).exists()

        # The ring over the same SSH path: workers only, on the private addresses.
        for ring in rings:
            assert ring["num_ps"] == 0 and ring["num_workers"] == 4 and ring["hosts"] == run["hosts"]
            assert ring["cluster_spec"]["worker"] == spec["worker"] and not ring["cluster_spec"].get("ps")
            assert len(ring["images_per_sec_per_worker"]) == 4 and min(ring["images_per_sec_per_worker"]) > 0
            for index, result in enumerate(ring["worker_results"]):
                assert result["task_index"] == index and result["config"]["variable_update"] == RING
                assert not result["config"].get("ps_hosts"), result["config"]
            assert sorted(ring["nic"]) == ring["hosts"] and all(n["status"] == "ok" for n in ring["nic"].values())
        assert "img/s total" in done.stdout

        measured = network.measured(db, sweep_id)
        if round_no == 1:
            assert measured.known, measured.why
            assert sorted(measured.host_gb_s) == ["node01", "node02", "node03", "node04"]
            assert {h["private_ip"] for h in measured.document["hosts"].values()} == set(bed.private_ips)
            assert measured.incast_gb_s and measured.rtt_ms is not None
            assert "network (4 hosts, 3 rounds of 2.0 s" in done.stdout
        else:
            assert measured.status == "unknown" and measured.why == "network_probe=false"
            assert "network: unknown (network_probe=false)" in done.stdout

        bed.down()
        assert bed.leftovers() == []
        assert live_processes(sweep_id) == []
        assert live_processes(str(bed.dir)) == []
        assert not any(name.startswith(bed.state["prefix"] + "-") for name in bed_names())


def bed_names():
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True).stdout or "[]")
    netns = json.loads(subprocess.run(["ip", "-j", "netns", "list"], capture_output=True, text=True).stdout or "[]")
    return [link["ifname"] for link in links] + [ns["name"] for ns in netns]
