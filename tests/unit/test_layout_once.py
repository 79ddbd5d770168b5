"""The layout is computed once per run (issue #54): on the SSH path the plan (benchmark_plan) computes
each run's layout, with the port bases the run will use (the tf_cluster role's variables, which the
benchmark role passes to the plan where given), and the tf_cluster role runs that layout as it is:
tf_cluster_spec gets the planned layout and none of the inputs it would compute one from, so that a
second layout, and a mismatch between what the plan checked and what runs, cannot happen.

The chain is followed here as Ansible runs it: the benchmark role's templates rendered with Jinja,
the plan, the tf_cluster role's task rendered with the run's variables, tf_cluster_spec's arguments
validated with its argument spec and its computation called, with every call of compute_layout
counted.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from jinja2 import StrictUndefined
from jinja2.nativetypes import NativeEnvironment

import dtfbench.plan.layout as layout_module
import dtfbench.plan.sweep as sweep_module
from dtfbench.plan.layout import (
    ARGUMENT_SPEC,
    DEFAULT_PS_PORT_BASE,
    DEFAULT_WORKER_PORT_BASE,
    SPEC_OPTIONS,
    LayoutError,
    compute_layout,
    layout_from_params,
)
from dtfbench.plan.sweep import build_plan

ROOT = Path(__file__).resolve().parents[2]
TASKS = ROOT / "roles" / "benchmark" / "tasks"
RUN_YML = ROOT / "roles" / "tf_cluster" / "tasks" / "run.yml"
HOSTS = [{"name": f"node{i}", "address": f"10.0.0.{i}", "devices": 2, "max_ps": 2} for i in (1, 2, 3)]
OMIT = object()  # Ansible's omit: the option is left out of the task's arguments


class NotComputedHere(AssertionError):
    pass


def environment() -> NativeEnvironment:
    env = NativeEnvironment(undefined=StrictUndefined)

    def inputs_rendered(*_args, **_kwargs):
        raise NotComputedHere("tf_cluster rendered the hosts to compute a layout the plan computed already")

    env.filters["tf_node_specs"] = inputs_rendered
    return env


def render(template: str, variables: dict) -> object:
    return environment().from_string(template).render(omit=OMIT, **variables)


def rendered_args(args: dict, variables: dict) -> dict:
    """A task's arguments as Ansible hands them to the action: rendered, the omitted left out."""
    out = {name: render(str(value), variables) for name, value in args.items()}
    return {name: value for name, value in out.items() if value is not OMIT}


def task(path: Path, predicate) -> dict:
    (found,) = [t for t in yaml.safe_load(path.read_text()) if predicate(t)]
    return found


@pytest.fixture
def layouts_computed(monkeypatch) -> list:
    """Every compute_layout call from here on, by the plan (sweep) or by tf_cluster_spec (layout)."""
    calls = []

    def counted(*args, **kwargs):
        calls.append((args, kwargs))
        return compute_layout(*args, **kwargs)

    monkeypatch.setattr(layout_module, "compute_layout", counted)
    monkeypatch.setattr(sweep_module, "compute_layout", counted)
    return calls


def plan_arguments(role_vars: dict) -> dict:
    """The port bases the benchmark role's benchmark_plan task passes, rendered with `role_vars`."""
    plan_task = task(TASKS / "main.yml", lambda t: "benchmark_plan" in t)["benchmark_plan"]
    return rendered_args({k: plan_task[k] for k in ("ps_port_base", "worker_port_base")}, role_vars)


def tf_cluster_spec_answer(run: dict) -> dict:
    """What the tf_cluster role's tf_cluster_spec task answers for `run` on the SSH path: run_ssh.yml's
    variables for the role, the task's arguments rendered with them, validated, computed."""
    imported = task(TASKS / "run_ssh.yml", lambda t: "ansible.builtin.import_role" in t)
    role_vars = {"benchmark_run": run}
    role_vars.update(
        {name: render(str(value), role_vars) for name, value in imported["vars"].items() if "layout" in name}
    )
    spec_task = task(RUN_YML, lambda t: "tf_cluster_spec" in t)
    args = rendered_args(spec_task["tf_cluster_spec"], role_vars)
    validated = ArgumentSpecValidator(ARGUMENT_SPEC, **SPEC_OPTIONS).validate(args)
    assert not validated.error_messages, validated.error_messages
    return layout_from_params(validated.validated_parameters)


@pytest.mark.parametrize("ports", [{}, {"tf_cluster_ps_port_base": 2350, "tf_cluster_worker_port_base": 2340}])
def test_the_ssh_run_path_computes_each_layout_once(layouts_computed, ports):
    role_vars = dict(benchmark_launcher="ssh", **ports)
    request = dict(sweep_id="s", gpus="2,4", num_ps="1,2", repetitions=2, **plan_arguments(role_vars))
    runs = build_plan(request, HOSTS)["runs"]
    planned = len(layouts_computed)
    assert planned == 4  # one a configuration (2 and 4 GPUs, 1 and 2 PSs), whatever its repetitions

    for run in runs:
        answer = tf_cluster_spec_answer(run)
        assert answer == run["layout"]
    assert len(layouts_computed) == planned, "tf_cluster computed a layout the plan had computed"

    # The ports the run listens on are the tf_cluster role's (its defaults where not given).
    ps_base = ports.get("tf_cluster_ps_port_base", DEFAULT_PS_PORT_BASE)
    worker_base = ports.get("tf_cluster_worker_port_base", DEFAULT_WORKER_PORT_BASE)
    for run in runs:
        expected = compute_layout(
            HOSTS,
            run["gpus"],
            run["num_ps"],
            devices_per_worker=run["devices_per_worker"],
            ps_on_worker_nodes=run["ps_on_worker_nodes"],
            ps_port_base=ps_base,
            worker_port_base=worker_base,
        )
        assert run["layout"] == expected
        ports = {job: sorted({t["port"] for t in expected["tasks"] if t["job"] == job}) for job in ("ps", "worker")}
        assert ports == {"ps": [ps_base, ps_base + 1][: len(ports["ps"])], "worker": [worker_base, worker_base + 1]}


def test_a_planned_layout_goes_without_the_inputs_of_another():
    """tf_cluster_spec refuses a planned layout beside any input that computes one: the layout it runs
    is the one given, or one it computes, never both to disagree."""
    planned = compute_layout(HOSTS, 2, 1)
    for name, value in dict(hosts=HOSTS, gpus=2, num_ps=1, ps_port_base=2230, worker_port_base=2220).items():
        validated = ArgumentSpecValidator(ARGUMENT_SPEC, **SPEC_OPTIONS).validate({"layout": planned, name: value})
        assert any("mutually exclusive" in m for m in validated.error_messages), (name, validated.error_messages)
    validated = ArgumentSpecValidator(ARGUMENT_SPEC, **SPEC_OPTIONS).validate({})
    assert validated.error_messages


def test_a_layout_whose_parts_disagree_is_refused():
    planned = compute_layout(HOSTS, 4, 1)
    assert layout_from_params({"layout": dict(planned, changed=False)}) == planned  # a registered result too
    wrong = dict(planned, cluster_spec={"ps": planned["cluster_spec"]["ps"], "worker": ["10.0.0.9:2220"]})
    with pytest.raises(LayoutError, match="cluster_spec"):
        layout_from_params({"layout": wrong})
    with pytest.raises(LayoutError, match="lacks tasks"):
        layout_from_params({"layout": {k: v for k, v in planned.items() if k != "tasks"}})


def test_the_role_alone_still_computes_its_layout():
    """launch.yml and the role's molecule scenario give no planned layout: the task computes one."""
    spec_task = task(RUN_YML, lambda t: "tf_cluster_spec" in t)["tf_cluster_spec"]
    variables = dict(
        tf_cluster_gpus=2,
        tf_cluster_num_ps=1,
        tf_cluster_devices_per_worker=1,
        tf_cluster_ps_on_worker_nodes=True,
        tf_cluster_ps_port_base=2330,
        tf_cluster_worker_port_base=2320,
        tf_cluster_nodes_group="tf_nodes",
        groups={"tf_nodes": ["node1"]},
        ansible_play_hosts_all=["node1"],
        hostvars={},
    )
    with pytest.raises(NotComputedHere):  # the hosts are rendered: the layout is computed
        rendered_args(spec_task, variables)
    args = rendered_args({k: v for k, v in spec_task.items() if k != "hosts"}, variables)
    assert "layout" not in args and args["ps_port_base"] == 2330 and args["worker_port_base"] == 2320


def test_the_plans_default_ports_are_the_tf_cluster_roles():
    """Where the tf_cluster role's port bases are not given, the plan takes the layout's defaults: they
    must be the role's, or the runs would listen elsewhere than its own default says."""
    defaults = yaml.safe_load((ROOT / "roles" / "tf_cluster" / "defaults" / "main.yml").read_text())
    assert (defaults["tf_cluster_ps_port_base"], defaults["tf_cluster_worker_port_base"]) == (
        DEFAULT_PS_PORT_BASE,
        DEFAULT_WORKER_PORT_BASE,
    )
    assert plan_arguments({"benchmark_launcher": "ssh"}) == {}
