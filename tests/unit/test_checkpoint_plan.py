"""Timed checkpoints in a sweep: the plan's checks, the runs' flags, the record's figures."""

import re

import pytest

from dtfbench.plan.sweep import PlanError
from dtfbench.report import stats
from dtfbench.results import record
from dtfbench.results.sweep_resume import plan_sweep

HOSTS = [{"name": "localhost", "address": "127.0.0.1", "devices": 8, "device_type": "cpu"}]
BASE = {"gpus": 2, "num_ps": 1, "model": "trivial", "sweep_id": "s", "repetitions": 1}


def test_checkpoints_are_every_runs_flags_and_a_configuration_key():
    plan = plan_sweep({**BASE, "checkpoint_every_steps": "50", "checkpoint_dir": "/scratch/ckpt/"}, HOSTS)
    (run,) = plan["runs"]
    args = run["launch"]["args"]
    assert args[args.index("--checkpoint_every_steps") + 1] == "50"
    assert args[args.index("--checkpoint_dir") + 1] == "/scratch/ckpt"
    assert plan["checkpoint_dir"] == "/scratch/ckpt" and plan["sweep_config"]["checkpoint_every_steps"] == 50
    plain = plan_sweep(BASE, HOSTS)
    assert plain["checkpoint_dir"] is None and "--checkpoint_dir" not in plain["runs"][0]["launch"]["args"]
    assert run["run_id"] != plain["runs"][0]["run_id"]  # a run with saves is another run
    assert "checkpoint_every_steps" in stats.CONFIG_KEYS
    payload = {
        "run": dict(run, run_id="s-1"),
        "layout": {"num_workers": 2},
        "sweep_id": "s",
        "system": "local",
        "hosts": {"localhost": {"workers": [
            {"result": {"task_index": 0, "status": "ok", "images_per_sec": 10.0,
                        "checkpoints": {"saves": 2, "mean_seconds": 0.5, "max_seconds": 0.7, "gb": 0.1, "gb_per_s": 0.2}}},
            {"result": {"task_index": 1, "status": "ok", "images_per_sec": 10.0, "checkpoints": None}},
        ]}},
    }  # fmt: skip
    stored = record.build_record(payload)
    assert (stored["checkpoint_every_steps"], stored["checkpoint_saves"], stored["checkpoint_max_s"]) == (50, 2, 0.7)
    assert (stored["checkpoint_gb"], stored["checkpoint_gb_per_s"]) == (0.1, 0.2)


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"checkpoint_every_steps": 10}, "checkpoint_every_steps=10 needs checkpoint_dir, an absolute folder"),
        ({"checkpoint_every_secs": "x", "checkpoint_dir": "/c"}, "checkpoint_every_secs='x': give seconds above 0"),
        ({"checkpoint_dir": "/c"}, "checkpoint_dir=/c: nothing saves there"),
        ({"checkpoint_every_steps": 10, "checkpoint_dir": "/c", "workload": "cscs2017"},
         "checkpoint_every_steps=10: workload=cscs2017 does not time its checkpoints"),
        ({"checkpoint_every_secs": 60, "checkpoint_dir": "/c", "variable_update": "collective_all_reduce", "num_ps": 0},
         "checkpoint_every_secs=60: collective_all_reduce saves on every worker at the same step"),
    ],
)  # fmt: skip
def test_a_checkpoint_setting_that_cannot_work_is_refused_before_anything_starts(request_, message):
    with pytest.raises(PlanError, match=re.escape(message)):
        plan_sweep({**BASE, **request_}, HOSTS)
