"""A sweep whose hosts differ (#20): a warning before the first run, or a refusal.

Two test-bed hosts (tests/testbed) made to differ in one field the environment collector
reads: node02's own ~/.bashrc (bash reads it for every command sshd runs) exports
OMP_NUM_THREADS, as a node's shell profile may. With strict_environment=true the sweep is
refused before anything starts, naming the field and both hosts; without it, the warning
comes before the first run, the run goes on, and the store keeps each host's environment.
"""

import uuid

import pytest
from playbook_harness import extra_vars, run_playbook, small_run
from testbed_fixtures import testbed_factory  # noqa: F401

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

# No link probe: the environment check comes before it, and what it measures is
# test_network_testbed's (it adds seconds to every sweep on more than one host).
SMALL = [*extra_vars(system="testbed", gpus=2, network_probe="false"), *small_run(warmup_steps=1, steps=2)]


def export_on(bed, node, line):
    """Put `line` first in the node's ~/.bashrc (before its 'not interactive: return'), in place:
    the file is bind-mounted over the node's ~/.bashrc, so it keeps its inode."""
    path = bed.dir / "nodes" / node / "bashrc"
    text = path.read_text()
    with path.open("r+") as handle:
        handle.write(line + "\n" + text)


def test_hosts_that_differ_are_named_and_refused_under_strict_environment(testbed_factory, tmp_path, live_processes):
    bed = testbed_factory(hosts=2)
    export_on(bed, "node02", "export OMP_NUM_THREADS=3")
    inventory = ["-i", str(bed.dir / "hosts.yml")]
    db = tmp_path / "results.sqlite"

    strict_id = f"pytest-envstrict-{uuid.uuid4().hex[:8]}"
    refused = run_playbook(
        "run-benchmark.yml",
        *inventory,
        *SMALL,
        "-e",
        "strict_environment=true",
        "-e",
        f"sweep_id={strict_id}",
        "-e",
        f"results_db={db}",
        timeout=480,
    )
    text = " ".join(refused.stdout.split())
    assert refused.returncode != 0, refused.stdout[-3000:]
    assert (
        "strict_environment=true: the sweep's hosts differ in env.OMP_NUM_THREADS "
        "(env.OMP_NUM_THREADS: (unset) on node01; 3 on node02)"
    ) in text, refused.stdout[-3000:]
    assert "TASK [tf_cluster" not in refused.stdout and not db.exists()

    sweep_id = f"pytest-envwarn-{uuid.uuid4().hex[:8]}"
    done = run_playbook(
        "run-benchmark.yml", *inventory, *SMALL, "-e", f"sweep_id={sweep_id}", "-e", f"results_db={db}", timeout=480
    )
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    text = " ".join(done.stdout.split())
    warning = (
        "WARNING: the hosts of this sweep differ in env.OMP_NUM_THREADS (env.OMP_NUM_THREADS: "
        "(unset) on node01; 3 on node02)"
    )
    assert warning in text, done.stdout[-5000:]
    assert text.index(warning) < text.index("TASK [tf_cluster")  # before the first run

    [run] = store.runs(store.connect(db))
    assert run["status"] == "ok", run["reason"]
    environments = run["environment"]
    assert sorted(environments) == ["node01", "node02"]
    assert {host: doc["host"] for host, doc in environments.items()} == {"node01": "node01", "node02": "node02"}
    assert environments["node02"]["env"]["OMP_NUM_THREADS"] == "3"
    assert "OMP_NUM_THREADS" not in environments["node01"]["env"]
    assert live_processes(sweep_id) == []
