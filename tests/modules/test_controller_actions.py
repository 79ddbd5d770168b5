"""benchmark_plan, aws_cluster_plan and run_record run as action plugins on the controller
(plugins/action/), in place of their modules (library/, where their documentation lives): same
plan or record, same refusals, and no module payload shipped and run."""

import json
import os
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ACTIONS = os.path.join(REPO, "plugins", "action")

pytestmark = pytest.mark.ansible


def sweep_args(tmp_path, **overrides):
    hosts = [{"name": "node1", "address": "127.0.0.1", "devices": 2, "device_type": "cpu", "max_ps": 2}]
    args = dict(
        hosts=hosts,
        gpus="1,2",
        num_ps=1,
        model="small_cnn",
        repetitions=2,
        sweep_id="actions-test",
        results_db=str(tmp_path / "results.sqlite"),
    )
    args.update(overrides)
    return args


def aws_args(tmp_path, **overrides):
    args = dict(
        state="present",
        cluster_name="study",
        instance_type="p2.xlarge",
        instance_count=2,
        ssh_cidr="203.0.113.7/32",
        region="us-east-1",
        owner="alice",
        output_dir=str(tmp_path / "out"),
    )
    args.update(overrides)
    return args


def record_args(tmp_path, **overrides):
    """One finished run of one worker; a store of its own each call (a run is recorded once)."""
    worker = {
        "task_index": 0,
        "status": "ok",
        "images_per_sec": 812.5,
        "step_time": {"mean": 0.04},
        "config": {"cross_replica_sync": True, "image_size": 32},
    }
    stores = sorted(tmp_path.glob("store-*"))
    args = dict(
        run=dict(
            run_id="actions-r1", gpus=1, num_ps=1, variable_update="parameter_server", data="synthetic", repetition=1
        ),
        sweep_id="actions-test",
        system="local",
        results_db=str(tmp_path / f"store-{len(stores)}" / "results.sqlite"),
        layout=dict(hosts_used=["node1"], num_workers=1, cluster_spec={"worker": ["127.0.0.1:2220"]}),
        hosts={"node1": {"failure": "", "workers": [{"result": worker}]}},
    )
    (tmp_path / f"store-{len(stores)}").mkdir()
    args.update(overrides)
    return args


CASES = {
    # module name, arguments, what to compare (the AWS plan's expiry is "now + hours": it moves)
    "benchmark_plan": (
        sweep_args,
        lambda r: {
            k: r[k] for k in ("sweep_id", "runs", "total_runs", "pending_runs", "workload", "sweep_config", "notes")
        },
    ),
    "aws_cluster_plan": (aws_args, lambda r: {k: v for k, v in r["plan"].items() if k not in ("expiry", "tags")}),
    "run_record": (record_args, lambda r: {k: v for k, v in r["record"].items() if k != "id"}),
}


def run(adhoc, tmp_path, module, args, plugin):
    env = adhoc.env()
    if plugin:
        env["ANSIBLE_ACTION_PLUGINS"] = ACTIONS
    done = subprocess.run(
        adhoc.command(module, args, "-vvv"),
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    text = done.stdout
    result = json.loads(text[text.index("=> {") + 3 : text.rindex("}") + 1])
    return done.returncode, result, ("AnsiballZ_%s" % module) in text


@pytest.mark.parametrize("module", sorted(CASES))
def test_the_action_plugin_plans_what_the_module_plans(tmp_path, adhoc, module):
    make_args, plan_of = CASES[module]
    rc_module, by_module, shipped_module = run(adhoc, tmp_path, module, make_args(tmp_path), plugin=False)
    rc_plugin, by_plugin, shipped_plugin = run(adhoc, tmp_path, module, make_args(tmp_path), plugin=True)
    assert rc_module == 0 and rc_plugin == 0, (by_module, by_plugin)
    assert shipped_module and not shipped_plugin
    assert plan_of(by_plugin) == plan_of(by_module)
    assert by_plugin["changed"] is False


@pytest.mark.parametrize(
    "module, bad, words",
    [
        ("benchmark_plan", {"gpus": "0"}, "gpus"),
        ("benchmark_plan", {"launcher": "pbs"}, "launcher"),
        ("aws_cluster_plan", {"ssh_cidr": "0.0.0.0/0"}, "whole internet"),
        ("aws_cluster_plan", {"region": None}, "region"),
        ("run_record", {"layout": {"num_workers": 1}, "run": {"run_id": "no-gpus"}}, "cannot record the run"),
    ],
)
def test_the_action_plugin_refuses_what_the_module_refuses(tmp_path, adhoc, module, bad, words):
    make_args = CASES[module][0]
    args = {k: v for k, v in make_args(tmp_path, **bad).items() if v is not None}
    rc_module, by_module, _ = run(adhoc, tmp_path, module, args, plugin=False)
    rc_plugin, by_plugin, _ = run(adhoc, tmp_path, module, args, plugin=True)
    assert rc_module != 0 and rc_plugin != 0
    assert words in by_plugin["msg"]
    assert by_plugin["msg"] == by_module["msg"]
