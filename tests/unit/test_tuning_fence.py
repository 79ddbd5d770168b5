"""The fence around the tuning that leans on other projects' workings (docs/performance.md,
"Tuning"): what is kept names the internals it relies on, and this test fails at once, naming
the member, when an ansible-core upgrade takes one away or changes how it is called; what was
removed stays out (no code-object rewrites, no thread that changes Ansible's constants).
"""

import ast
import inspect
from pathlib import Path

from ansible.plugins.action import ActionBase
from ansible.plugins.shell.sh import ShellModule

ROOT = Path(__file__).resolve().parents[2]

# The direct call (src/dtfbench/adapters/host_action.py): each protected member of ActionBase it
# calls, with the keyword parameters it passes.
ACTION_BASE_MEMBERS = {
    "_low_level_execute_command": {"cmd", "sudoable", "in_data"},
    "_compute_environment_string": set(),
    "_is_pipelining_enabled": {"module_style"},
    "_execute_module": {"module_name", "module_args", "task_vars"},
}


def test_the_direct_calls_ansible_internals_are_there():
    for name, keywords in ACTION_BASE_MEMBERS.items():
        member = getattr(ActionBase, name, None)
        assert callable(member), f"ansible-core's ActionBase has no {name} any more: the direct call needs it"
        parameters = set(inspect.signature(member).parameters)
        assert keywords <= parameters, f"ActionBase.{name} no longer takes {sorted(keywords - parameters)}"
    parameters = set(inspect.signature(ShellModule.build_module_command).parameters)
    assert {"env_string", "shebang", "cmd", "arg_path"} <= parameters, parameters


def test_the_direct_call_uses_only_the_fenced_internals():
    """A new protected member used by the direct call must be added above (and to the docs)."""
    tree = ast.parse((ROOT / "src/dtfbench/adapters/host_action.py").read_text())
    own = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    used = {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
        and node.attr.startswith("_")
        and callable(getattr(ActionBase, node.attr, None))
    }
    assert used - own <= set(ACTION_BASE_MEMBERS), sorted(used - own - set(ACTION_BASE_MEMBERS))


def python_files():
    for folder in ("src", "plugins", "library", "module_utils"):
        yield from (path for path in (ROOT / folder).rglob("*.py") if path.is_file())


def test_nothing_rewrites_code_objects_or_sets_ansibles_constants():
    found = []
    for path in python_files():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            for target in targets:
                if isinstance(target, ast.Attribute) and target.attr == "__code__":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: assigns a code object")
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == "C"
                    and target.attr.isupper()
                ):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: sets ansible.constants.{target.attr}")
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "replace":
                if any(keyword.arg and keyword.arg.startswith("co_") for keyword in node.keywords):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: replaces a code object's fields")
    assert not found, found
