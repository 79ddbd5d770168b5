"""extra_vars_check reads the roles only for a name the playbooks themselves do not read.

Every entry point runs the check first (playbooks/extra-vars.yml). Parsing every role's tasks,
defaults, argument specs and templates with Jinja took ~0.2 s, which each sweep paid before its
first task on a node; the names users give (gpus, model, num_ps, ...) are read by the playbooks.
"""

import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.ansible


@pytest.fixture(scope="module")
def plugin():
    path = os.path.join(REPO, "plugins", "action", "extra_vars_check.py")
    spec = importlib.util.spec_from_file_location("extra_vars_check_action", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scanned(plugin):
    from ansible.parsing.dataloader import DataLoader

    known = plugin.KnownVariables(DataLoader(), [os.path.join(REPO, "roles")])
    known.playbook(os.path.join(REPO, "run-benchmark.yml"))
    return known


def test_the_names_users_give_need_no_role(plugin):
    known = scanned(plugin)
    assert plugin.unknown({"gpus": 4, "model": "trivial", "num_ps": 1, "network_probe": False}, known.names) == []
    # The roles were found, not read: a role's own variable is not known yet.
    assert "benchmark" in known.roles_to_read
    assert "benchmark_run_root" not in known.names


def test_a_name_only_a_role_reads_is_found_in_the_roles(plugin):
    known = scanned(plugin)
    assert plugin.unknown({"dtfbench_run_root": "/x"}, known.names) == ["dtfbench_run_root"]
    known.roles()
    assert known.roles_to_read == []
    # Read by the benchmark role's defaults, and tf_cluster's, which benchmark includes.
    assert plugin.unknown({"dtfbench_run_root": "/x", "tf_cluster_grace_period": 3}, known.names) == []
    assert plugin.closest("tf_cluster_grace_perod", known.names, known.read_by_plays) == "tf_cluster_grace_period"
