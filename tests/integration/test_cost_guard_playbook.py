"""run-benchmark.yml with system=aws: the dollar guard, before the first run (#18 item 6).

The local inventory stands in for the EC2 nodes (``-e instance_type=...`` sets each node's
instance_type as the aws_ec2 inventory does): the guard prices the sweep's runs at that
type, prints the figure and refuses above max_cost_usd, before any run directory, result
or TF process exists. Each case stops before the first run: nothing heavy starts.
"""

from __future__ import annotations

import math

import pytest
from playbook_harness import extra_vars, run_sweep, small_run

from dtfbench.results import store

pytestmark = [pytest.mark.ansible]

BASE = [*extra_vars(system="aws", gpus="1,2"), *small_run(batch_size=None, warmup_steps=1, steps=2)]


def run_benchmark(tmp_path, *args):
    done, db, run_root, sweep_id = run_sweep(tmp_path, *BASE, *args, prefix="guard", timeout=300)
    output = done.stdout + done.stderr
    return done.returncode, " ".join(output.split()), db, run_root, sweep_id


def nothing_started(db, run_root, sweep_id, live_processes):
    assert not run_root.exists()
    assert not db.exists() or store.runs(store.connect(db)) == []
    assert [p for p in live_processes(sweep_id) if "dtfbench train" in p] == []


def test_a_sweep_above_max_cost_usd_is_refused_before_the_first_run(tmp_path, live_processes):
    rc, output, db, run_root, sweep_id = run_benchmark(
        tmp_path, "-e", "instance_type=p2.xlarge", "-e", "max_cost_usd=0.01"
    )
    assert rc != 0, output[-3000:]
    # 1 node x (2 runs x (60 s overhead + 3 steps)) at $0.90/h: about 3 cents.
    figure = __import__("re").search(
        r"predicted to cost \$([0-9.]+), above max_cost_usd=\$0.01; "
        r"raise it \(-e max_cost_usd=(\d+)\)",
        output,
    )
    assert figure, output[-3000:]
    assert 0.01 < float(figure.group(1)) < 0.1 and int(figure.group(2)) == math.ceil(float(figure.group(1)))
    assert "1 x p2.xlarge" in output and "published p2.xlarge table" in output and "Traceback" not in output
    nothing_started(db, run_root, sweep_id, live_processes)


@pytest.mark.parametrize(
    "args, message",
    [
        (["-e", "instance_type=g9.xlarge"], "no price for instance type 'g9.xlarge' in the price table"),
        ([], "the nodes' instance type is not known"),
        (
            ["-e", "instance_type=p2.xlarge", "-e", "price_usd_per_hour=-1"],
            "price_usd_per_hour=-1 must be a number above 0",
        ),
    ],
)
def test_an_unpriced_type_or_a_negative_price_is_one_clear_error(tmp_path, live_processes, args, message):
    rc, output, db, run_root, sweep_id = run_benchmark(tmp_path, *args)
    assert rc != 0 and message in output, output[-3000:]
    assert "Traceback" not in output
    nothing_started(db, run_root, sweep_id, live_processes)
