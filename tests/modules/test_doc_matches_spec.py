"""Every module's DOCUMENTATION options are its argument spec: names, types, defaults, choices.

The documentation (as ansible-doc reads it, doc fragments merged) and the spec the module
really builds (captured where it constructs its AnsibleModule, or, for an action plugin,
where it validates its arguments) must agree option by option and suboption by suboption:
a default documented as 120 that is 180 in the code, an option the code takes but the docs
never name, or a choice the docs offer that the code refuses, fails here.
"""

import glob
import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.ansible

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBRARIES = [os.path.join(REPO, "library")] + sorted(glob.glob(os.path.join(REPO, "roles", "*", "library")))
MODULE_FILES = {
    os.path.basename(path)[:-3]: path
    for library in LIBRARIES
    for path in sorted(glob.glob(os.path.join(library, "*.py")))
    if not os.path.basename(path).startswith("_")
}
ACTION_PLUGINS = os.path.join(REPO, "plugins", "action")

# Runs in a fresh interpreter: makes the project's module_utils importable as Ansible does,
# then runs the module (as __main__) or imports the action plugin, and stops it at the point
# where it hands its argument spec to Ansible. Prints the spec as JSON.
CAPTURE = r"""
import json, os, runpy, sys
import ansible.module_utils
from ansible.module_utils import basic

repo, name, module_file = sys.argv[1:4]
role_or_repo = os.path.dirname(os.path.dirname(module_file))
for folder in [os.path.join(repo, "module_utils"), os.path.join(role_or_repo, "module_utils")]:
    if os.path.isdir(folder):
        ansible.module_utils.__path__.append(folder)

class Captured(BaseException):
    pass

def capture(self, argument_spec=None, **kwargs):
    raise Captured(argument_spec)

basic.AnsibleModule.__init__ = capture
sys.argv = [module_file]
spec = None
try:
    runpy.run_path(module_file, run_name="__main__")
except Captured as done:
    spec = done.args[0]
where = module_file
action = os.path.join(repo, "plugins", "action", name + ".py")
if spec is None and os.path.exists(action):
    # An action plugin (dtfbench.adapters.action.ControllerAction): the spec it validates with.
    where = action
    spec = getattr(runpy.run_path(action)["ActionModule"], "argument_spec", None)
print(json.dumps({"spec": spec, "where": where}, default=repr))
"""


def captured_spec(name):
    proc = subprocess.run(
        [sys.executable, "-c", CAPTURE, REPO, name, MODULE_FILES[name]],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, "capturing the argument spec of %s failed:\n%s" % (name, proc.stderr)
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["spec"] is not None, (
        "%s: found no argument spec (neither an AnsibleModule in %s nor an ActionModule.argument_spec "
        "in plugins/action/%s.py)" % (name, MODULE_FILES[name], name)
    )
    return found["spec"]


@pytest.fixture(scope="module")
def docs(ansible_doc):
    """Every module's documentation as ansible-doc gives it (doc fragments merged)."""
    proc = ansible_doc("--json", *sorted(MODULE_FILES), library=os.pathsep.join(LIBRARIES), timeout=300)
    assert proc.returncode == 0, proc.stderr
    return {name: entry["doc"] for name, entry in json.loads(proc.stdout).items()}


def normal(option, doc):
    """The parts of one option that the docs and the spec both state, in one form."""
    kind = option.get("type") or "str"
    default = option.get("default")
    if kind in ("float", "int") and isinstance(default, (int, float)) and not isinstance(default, bool):
        default = float(default)
    return dict(
        type=kind,
        required=bool(option.get("required", False)),
        default=default,
        choices=sorted(map(str, option["choices"])) if option.get("choices") is not None else None,
        elements=option.get("elements"),
        aliases=sorted(option.get("aliases") or []),
    )


def differences(docs_options, spec_options, where=""):
    docs_options, spec_options = docs_options or {}, spec_options or {}
    found = []
    for name in sorted(set(spec_options) - set(docs_options)):
        found.append("%s%s: in the argument spec, not in DOCUMENTATION" % (where, name))
    for name in sorted(set(docs_options) - set(spec_options)):
        found.append("%s%s: in DOCUMENTATION, not in the argument spec" % (where, name))
    for name in sorted(set(docs_options) & set(spec_options)):
        documented, real = normal(docs_options[name], True), normal(spec_options[name], False)
        for key in documented:
            if documented[key] != real[key]:
                found.append(
                    "%s%s: %s is %r in DOCUMENTATION but %r in the argument spec"
                    % (where, name, key, documented[key], real[key])
                )
        found += differences(
            docs_options[name].get("suboptions"), spec_options[name].get("options"), "%s%s." % (where, name)
        )
    return found


def test_there_are_modules_to_check():
    assert {"tf_task", "tf_host_run", "tf_cluster_spec", "slurm_job"} <= set(MODULE_FILES)


@pytest.mark.parametrize("name", sorted(MODULE_FILES))
def test_documentation_options_match_the_argument_spec(docs, name):
    assert name in docs, "ansible-doc found no documentation for %s" % name
    found = differences(docs[name].get("options"), captured_spec(name))
    assert not found, "%s (%s): DOCUMENTATION and argument spec differ:\n  %s" % (
        name,
        os.path.relpath(MODULE_FILES[name], REPO),
        "\n  ".join(found),
    )
