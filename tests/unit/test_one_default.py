"""One default per variable (issue #54): each of run-benchmark.yml's variables has its default in
one place - the system profile where it differs by system, else the plan's DEFAULTS
(src/dtfbench/plan/sweep.py) for what the plan reads, or the benchmark role's defaults/main.yml
for what the role reads. The playbook passes a value on only where it is given, the role passes
the plan's values on only where given, and the role's argument spec documents the role's own
defaults without a value of its own.

A second literal default anywhere, or a profile repeating the common default, fails here with
the variable and both places named.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from dtfbench.plan import sweep

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOK = ROOT / "playbooks" / "run-benchmark.yml"
PROFILES = sorted((ROOT / "playbooks" / "vars" / "systems").glob("*.yml"))
ROLE = ROOT / "roles" / "benchmark"
# "Not given": the values the role and the plan read as "nothing asked for".
NOT_GIVEN = ("", None)
# default(...) arguments that are not a literal: omit, the profile's, the accuracy dataset's, the
# "not given" marker, the empty list that two lists are joined over, and values computed from
# other variables.
NOT_LITERAL = re.compile(
    r"^(omit|''|\[\]$|system_defaults\.|accuracy_default|accuracy_data_dir|'real' if accuracy_default)"
)


def settings() -> dict[str, str]:
    """benchmark_X -> its template in run-benchmark.yml's set_fact."""
    (play,) = [p for p in yaml.safe_load(PLAYBOOK.read_text()) if "tasks" in p]
    (task,) = [t for t in play["tasks"] if "ansible.builtin.set_fact" in t and t.get("run_once") is True]
    return task["ansible.builtin.set_fact"]


def short_name(role_name: str) -> str:
    return role_name.removeprefix("benchmark_")


def test_the_playbook_gives_no_default_of_its_own():
    literal = {}
    for name, template in settings().items():
        for argument in re.findall(r"default\(([^()]*(?:\([^()]*\))?[^()]*)\)", str(template)):
            if not NOT_LITERAL.match(argument.strip()):
                literal[name] = argument
    assert literal == {}, f"run-benchmark.yml gives these a default of its own (pass default(omit)): {literal}"


def literal_defaults() -> dict[str, dict[str, object]]:
    """short name -> {place: value} for every place outside the profiles that gives a default."""
    found: dict[str, dict[str, object]] = {}
    role_defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    for name, value in role_defaults.items():
        if value not in NOT_GIVEN:
            found.setdefault(short_name(name), {})["roles/benchmark/defaults/main.yml"] = value
    for name, value in sweep.DEFAULTS.items():
        found.setdefault(name, {})["plan/sweep.py DEFAULTS"] = value
    return found


def test_each_variable_has_its_default_in_one_place_outside_the_profiles():
    twice = {name: places for name, places in literal_defaults().items() if len(places) > 1}
    assert twice == {}, f"defaults given in two places: {twice}"


def test_the_role_passes_the_plans_values_on_only_where_given():
    tasks = (ROLE / "tasks" / "main.yml").read_text()
    for name in sweep.DEFAULTS:
        assert f'{name}: "{{{{ benchmark_{name} | default(omit) }}}}"' in tasks, name


def test_the_role_spec_documents_its_defaults_and_repeats_no_plan_value():
    options = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    role_defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    wrong = {}
    for name, option in options.items():
        if short_name(name) in sweep.DEFAULTS and "default" in option:
            wrong[name] = f"default {option['default']!r}, but the plan holds it"
        elif "default" in option and name in role_defaults and option["default"] != role_defaults[name]:
            wrong[name] = f"documented {option['default']!r}, but defaults/main.yml has {role_defaults[name]!r}"
    assert wrong == {}, wrong


def test_a_profile_states_only_what_differs_from_the_common_default():
    common = {name: next(iter(places.values())) for name, places in literal_defaults().items()}
    repeats = []
    for profile in PROFILES:
        document = yaml.safe_load(profile.read_text())
        given = dict(document.get("system_defaults") or {})
        given.update({k: v for k, v in document.items() if k in ("launcher",)})
        for name, value in given.items():
            if name in common and value == common[name]:
                repeats.append(f"{profile.name}: {name}={value!r} is the common default already")
    assert repeats == [], repeats


def test_batch_size_and_num_ps_have_no_default_outside_the_profiles_and_the_plan():
    """Provisioning prices the aws profile's sweep: no third batch_size or num_ps of its own."""
    places = {
        "playbooks/provision-aws.yml": (ROOT / "playbooks" / "provision-aws.yml").read_text(),
        "roles/aws_cluster/defaults/main.yml": (ROOT / "roles" / "aws_cluster" / "defaults" / "main.yml").read_text(),
        "roles/benchmark/defaults/main.yml": (ROLE / "defaults" / "main.yml").read_text(),
    }
    found = {
        where: line.strip()
        for where, text in places.items()
        for line in text.splitlines()
        if re.search(r"\b(batch_size|num_ps)\b.*(default\(\d|: \d)", line)
    }
    assert found == {}, found
