"""A shared file system on the test bed, and another job's reads on it (issue #55, items 3 and 5).

node01 serves its local disk's folder at /mnt/shared on every node (tests/testbed/shared_fs.py:
sshfs over its private link); node02 trains from the shared copy and from a copy on its own disk,
each with and without node03 reading the same location beside the run (background_io). The store
must tell all four apart: the storage each run read (the shared server named) and the reader.
"""

import shutil
import uuid

import pytest
from digits_dataset import make_digits
from playbook_harness import extra_vars, run_playbook, small_run, strict_inventory_env
from testbed_fixtures import testbed_factory  # noqa: F401

from dtfbench.report import stats
from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]


def test_runs_from_a_shared_and_a_local_copy_with_and_without_background_reads(
    testbed_factory, tmp_path, live_processes
):
    bed = testbed_factory(hosts=3)
    shared = bed.share("node01")
    make_digits(shared / "digits")
    sweep_id = f"pytest-shared-{uuid.uuid4().hex[:6]}"
    db = tmp_path / "results.sqlite"
    shutil.copytree(shared / "digits", bed.local_ssd("node02") / "digits")
    # A reader's node without the local copy stops the sweep before its first run, naming it.
    refused = run_playbook(
        "run-benchmark.yml", "-i", bed.inventory, "--limit", "node02,node03",
        *extra_vars(system="testbed", gpus=1, data="real", network_probe="false", data_dir="/mnt/local_ssd/digits",
                    background_io="node03", sweep_id=sweep_id, results_db=db),
        *small_run(), env=strict_inventory_env(), timeout=300,
    )  # fmt: skip
    assert refused.returncode != 0 and "no train-* TFRecord shards in data_dir=/mnt/local_ssd/digits on node03" in (
        refused.stdout
    ), refused.stdout[-3000:]
    assert "Start run" not in refused.stdout and (not db.exists() or store.runs(store.connect(db)) == [])
    # A local copy on each node: node03's reader reads its own, as another job on its node would.
    shutil.copytree(shared / "digits", bed.local_ssd("node03") / "digits")
    done = run_playbook(
        "run-benchmark.yml",
        "-i", bed.inventory,
        # node01 serves (its own reads would be local); node03 reads beside the runs and runs no task.
        "--limit", "node02,node03",
        *extra_vars(
            system="testbed", gpus=1, num_ps=1, data="real", cache="cold", network_probe="false",
            data_dir="/mnt/shared/digits,/mnt/local_ssd/digits", background_io="none,node03",
            background_io_mb_per_s=50, sweep_id=sweep_id, results_db=db,
        ),
        *small_run(),
        env=strict_inventory_env(),
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    runs = store.runs(store.connect(db))
    server = f"root@{bed.nodes[0]['private_ip']}:/mnt/local_ssd/shared"
    seen = {}
    for run in runs:
        assert run["status"] == "ok" and run["hosts"] == ["node02"], (run["run_id"], run["reason"], run["hosts"])
        seen[(run["storage"], run["background_io"])] = run["background_io_mb_per_s"]
    local = next(s for s, _ in seen if not s.startswith("fuse.sshfs"))
    assert sorted(seen, key=str) == sorted(
        [(f"fuse.sshfs {server}", None), (f"fuse.sshfs {server}", "node03"), (local, None), (local, "node03")], key=str
    ), seen
    # The reader read while the runs measured, within its bound; the runs without it record none.
    for (_, background), rate in seen.items():
        assert (rate is None) if background is None else (0 < rate <= 50 * 1.05), seen
    # Four configurations, never averaged together.
    assert len(stats.summarise(runs)) == 4
    assert live_processes(sweep_id) == []  # the readers among them
