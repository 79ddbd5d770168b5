"""tf_cluster_spec through Ansible: the module, and the action plugin that the project's
ansible.cfg runs in its place on the controller, return what dtfbench.plan.layout computes."""

import json
import os
import subprocess
import sys

import pytest
from playbook_harness import extra_vars, run_playbook

from dtfbench.plan.layout import compute_layout

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.ansible

HOSTS = [
    {"name": "node1", "address": "10.0.0.1", "devices": 2, "device_type": "gpu"},
    {"name": "node2", "address": "10.0.0.2", "devices": 2, "device_type": "gpu"},
    {"name": "ps1", "address": "10.0.0.3", "devices": 0, "device_type": "cpu"},
]
KEYS = ("cluster_spec", "tasks", "hosts", "num_workers", "num_ps", "hosts_used")


@pytest.fixture(params=["module", "action plugin"])
def run_layout(request, run_module, monkeypatch):
    """tf_cluster_spec as the module (library/) or as the action plugin (plugins/action/)."""
    if request.param == "action plugin":
        monkeypatch.setenv("ANSIBLE_ACTION_PLUGINS", os.path.join(REPO, "plugins", "action"))
    else:
        monkeypatch.delenv("ANSIBLE_ACTION_PLUGINS", raising=False)

    return lambda args, **kwargs: run_module("tf_cluster_spec", args, **kwargs)


@pytest.mark.parametrize("plugin", [False, True])
def test_the_action_plugin_runs_in_place_of_the_module(tmp_path, adhoc, plugin):
    """With the plugin enabled no module is shipped and run (no AnsiballZ payload)."""
    env = adhoc.env()
    if plugin:
        env["ANSIBLE_ACTION_PLUGINS"] = os.path.join(REPO, "plugins", "action")
    done = subprocess.run(
        adhoc.command("tf_cluster_spec", dict(hosts=HOSTS, gpus=2, num_ps=1), "-vvv"),
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert '"10.0.0.1:2220"' in done.stdout
    assert ("AnsiballZ_tf_cluster_spec" in done.stdout) is not plugin


def test_module_utils_is_a_relative_link_to_the_one_layout():
    link = os.path.join(REPO, "module_utils", "dtfbench", "plan")
    assert os.path.islink(link)
    assert not os.path.isabs(os.readlink(link))
    assert os.path.samefile(os.path.join(link, "layout.py"), os.path.join(REPO, "src", "dtfbench", "plan", "layout.py"))


@pytest.mark.parametrize("check", [False, True])
def test_layout_matches_compute_layout(run_layout, check):
    args = dict(hosts=HOSTS, gpus=4, num_ps=1, ps_on_worker_nodes=False)
    rc, result = run_layout(args, check=check)
    assert rc == 0, result
    assert result["changed"] is False
    expected = compute_layout(HOSTS, 4, 1, ps_on_worker_nodes=False)
    assert {key: result[key] for key in KEYS} == expected
    assert result["cluster_spec"] == {
        "ps": ["10.0.0.3:2230"],
        "worker": ["10.0.0.1:2220", "10.0.0.1:2221", "10.0.0.2:2220", "10.0.0.2:2221"],
    }


def test_defaults_and_type_conversion(run_layout):
    # INI inventories give strings; address and device_type have defaults.
    hosts = [{"name": "a", "devices": "8"}, {"name": "b", "devices": "8"}]
    rc, result = run_layout(dict(hosts=hosts, gpus="16", num_ps="2", devices_per_worker="8"))
    assert rc == 0, result
    assert result["cluster_spec"] == {"ps": ["a:2230", "b:2230"], "worker": ["a:2220", "b:2220"]}
    eight = "0,1,2,3,4,5,6,7"
    assert [t["cuda_visible_devices"] for t in result["tasks"]] == ["", "", eight, eight]


def test_layout_error_is_the_failure_message(run_layout):
    rc, result = run_layout(dict(hosts=HOSTS[:1], gpus=8, num_ps=3))
    assert rc != 0
    assert result["msg"].startswith("the allocated nodes are not enough for 8 workers")
    assert "add hosts or lower gpus/num_ps" in result["msg"]


def test_argument_validation(run_layout):
    rc, result = run_layout(dict(hosts=[{"name": "a", "devices": 1, "device_type": "tpu"}], gpus=1, num_ps=0))
    assert rc != 0 and "device_type" in result["msg"] and "tpu" in result["msg"]
    rc, result = run_layout(dict(hosts=[{"name": "a", "devices": 1}], gpus=1))
    assert rc != 0 and "num_ps" in result["msg"]


def test_a_planned_layout_is_returned_as_it_is(run_layout):
    # The benchmark plan's layout of a run (its own port bases): taken, nothing computed again.
    planned = compute_layout(HOSTS, 4, 1, ps_on_worker_nodes=False, ps_port_base=2350, worker_port_base=2340)
    rc, result = run_layout(dict(layout=planned))
    assert rc == 0, result
    assert {key: result[key] for key in KEYS} == planned
    rc, result = run_layout(dict(layout=planned, gpus=4))
    assert rc != 0 and "mutually exclusive" in result["msg"], result


def test_the_action_plugins_failure_obeys_failed_when(tmp_path, adhoc):
    """As a module's would: the Slurm role reads the message of a layout that does not fit."""
    play = tmp_path / "play.yml"
    play.write_text(
        json.dumps(
            [
                {
                    "hosts": "localhost",
                    "gather_facts": False,
                    "tasks": [
                        {
                            "tf_cluster_spec": {"hosts": [{"name": "a", "devices": 1}], "gpus": 5, "num_ps": 1},
                            "register": "layout",
                            "failed_when": False,
                        },
                        {
                            "ansible.builtin.assert": {
                                "that": [
                                    "layout.msg is search('not enough for 5 workers')",
                                    "layout.cluster_spec is not defined",
                                ]
                            }
                        },
                    ],
                }
            ]
        )
    )
    env = dict(adhoc.env(), ANSIBLE_ACTION_PLUGINS=os.path.join(REPO, "plugins", "action"))
    done = run_playbook(
        play,
        *("-i", "localhost,", "-c", "local", "-M", adhoc.library),
        *extra_vars(ansible_python_interpreter=sys.executable),
        env=env,
        cwd=tmp_path,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
