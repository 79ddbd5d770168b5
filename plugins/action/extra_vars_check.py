# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)
"""extra_vars_check on the controller: name the -e variables that no part of this run reads.

Ansible takes any ``-e name=value`` and ignores a name nothing reads, so ``-e gpu=2`` or
``-e modle=resnet50`` ran the defaults with exit 0. The known names are not kept in a list of
their own: they are read from what declares them, the playbooks given on the command line
(with the playbooks they import), every role those reach (tasks, defaults, vars, templates and
meta/argument_specs.yml), and the variable files they include (playbooks/vars/systems/*.yml):
every variable a template or condition there reads, and every variable a vars block, a vars
file or an argument spec defines. The module's documentation is library/extra_vars_check.py.
"""

from __future__ import annotations

import difflib
import glob
import os

import jinja2
from ansible import constants as C
from ansible import context
from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase
from ansible.utils.vars import load_extra_vars
from jinja2 import nodes

ARGUMENT_SPEC = dict(strict=dict(type="bool", default=False))

# Values that Ansible evaluates as bare Jinja expressions (no braces).
CONDITIONAL_KEYS = frozenset(("when", "failed_when", "changed_when", "until", "that"))
IMPORT_PLAYBOOK = frozenset(("import_playbook", "ansible.builtin.import_playbook"))
INCLUDE_ROLE = frozenset(("include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role"))
INCLUDE_VARS = frozenset(("include_vars", "ansible.builtin.include_vars"))
ROLE_FOLDERS = ("tasks", "handlers", "defaults", "vars", "meta")


class KnownVariables:
    """The variable names a set of playbooks (and the roles and variable files they reach) uses."""

    def __init__(self, loader, roles_paths):
        self.loader = loader
        self.roles_paths = roles_paths
        self.jinja = jinja2.Environment(extensions=["jinja2.ext.loopcontrols", "jinja2.ext.do"])
        self.names = set()
        self.read_by_plays = set()  # read in the playbooks themselves: the names users give
        self.seen = set()
        self.roles_to_read = []  # the roles the playbooks reach, read only when needed (roles())

    def load(self, path):
        try:
            return self.loader.load_from_file(path)
        except AnsibleError:
            return None

    def once(self, key):
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def playbook(self, path):
        if self.once(("playbook", path)):
            self.walk(self.load(path), os.path.dirname(path), in_play=True)

    def role(self, name):
        if "{{" not in name and self.once(("role", name)):
            self.roles_to_read.append(name)

    def roles(self):
        """Read the roles the playbooks reach, and the roles those reach."""
        while self.roles_to_read:
            self.read_role(self.roles_to_read.pop(0))

    def read_role(self, name):
        for root in self.roles_paths:
            folder = os.path.join(root, name)
            if not os.path.isdir(folder):
                continue
            for sub in ROLE_FOLDERS:
                for path in sorted(glob.glob(os.path.join(folder, sub, "*.yml"))):
                    data = self.load(path)
                    if sub in ("defaults", "vars") and isinstance(data, dict):
                        self.names.update(data)
                    if sub == "meta" and os.path.basename(path) == "argument_specs.yml":
                        for entry in ((data or {}).get("argument_specs") or {}).values():
                            self.names.update((entry or {}).get("options") or {})
                    self.walk(data, folder)
            for path in sorted(glob.glob(os.path.join(folder, "templates", "**", "*"), recursive=True)):
                if os.path.isfile(path):
                    with open(path, encoding="utf-8", errors="replace") as handle:
                        self.template(handle.read())
            return

    def vars_files(self, spec, base):
        """The variable files an include_vars may load: its path's folder up to the first template."""
        if isinstance(spec, dict):
            path = spec.get("file") or spec.get("dir") or spec.get("_raw_params")
            is_folder = bool(spec.get("dir"))
        else:
            path, is_folder = spec, False
        if not isinstance(path, str):
            return
        if "{{" in path:
            files = sorted(glob.glob(os.path.join(base, os.path.dirname(path.split("{{")[0]), "*.yml")))
        elif is_folder:
            files = sorted(glob.glob(os.path.join(base, path, "*.yml")))
        else:
            files = [os.path.join(base, path)]
        for name in files:
            if self.once(("vars", name)):
                data = self.load(name)
                if isinstance(data, dict):
                    self.names.update(data)
                self.walk(data, base)

    def walk(self, value, base, key=None, in_play=False):
        if isinstance(value, dict):
            for child_key, child in value.items():
                if child_key in IMPORT_PLAYBOOK and isinstance(child, str) and "{{" not in child:
                    self.playbook(os.path.join(base, child))
                elif child_key in INCLUDE_ROLE and isinstance(child, dict) and isinstance(child.get("name"), str):
                    self.role(child["name"])
                elif child_key in INCLUDE_VARS:
                    self.vars_files(child, base)
                elif child_key == "roles" and isinstance(child, list):
                    for entry in child:
                        role = (
                            entry if isinstance(entry, str) else (entry or {}).get("role") or (entry or {}).get("name")
                        )
                        if isinstance(role, str):
                            self.role(role)
                if child_key == "vars" and isinstance(child, dict):
                    self.names.update(child)
                self.walk(child, base, child_key, in_play)
        elif isinstance(value, list):
            for child in value:
                self.walk(child, base, key, in_play)
        elif isinstance(value, str):
            if key in CONDITIONAL_KEYS:
                self.template("{{ %s }}" % value, in_play)
            elif "{{" in value or "{%" in value:
                self.template(value, in_play)

    def template(self, text, in_play=False):
        try:
            tree = self.jinja.parse(text)
        except jinja2.TemplateSyntaxError:
            return
        names = set(node.name for node in tree.find_all(nodes.Name) if node.ctx == "load")
        self.names.update(names)
        if in_play:
            self.read_by_plays.update(names)


def closest(name, known, first=()):
    """The known name ``name`` most likely meant, or None (``num-ps`` means ``num_ps``): among
    ``first`` (the names the playbooks themselves read, which users give), else a closer one
    among all (role variables such as tf_cluster_run_root)."""
    name = name.replace("-", "_")
    if name in known:
        return name
    found = difflib.get_close_matches(name, sorted(first), n=1, cutoff=0.6)
    found = found or difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.75)
    return found[0] if found else None


def unknown(extra_vars, known):
    """The extra variables no playbook reads. Connection and interpreter settings
    (ansible_user, ansible_python_interpreter) are Ansible's own, read by no playbook."""
    return sorted(name for name in extra_vars if name not in known and not name.startswith("ansible_"))


def unknown_messages(names, known, playbooks):
    """One message per unknown name; ``known``: a KnownVariables."""
    messages = []
    for name in names:
        guess = closest(name, known.names, known.read_by_plays)
        messages.append(
            "-e %s: %s read%s no variable of that name%s"
            % (
                name,
                " and ".join(playbooks),
                "s" if len(playbooks) == 1 else "",
                " (did you mean %s?)" % guess if guess else "",
            )
        )
    return messages


class ActionModule(ActionBase):
    """Compare the command line's extra variables with the names the playbooks read."""

    TRANSFERS_FILES = False
    _requires_connection = False
    # Where the documentation check (tests/modules/test_doc_matches_spec.py) reads the options,
    # as it does for the ControllerAction plugins.
    argument_spec = ARGUMENT_SPEC

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        try:
            _, params = self.validate_argument_spec(argument_spec=self.argument_spec)
        except AnsibleActionFail as error:
            result.update(failed=True, changed=False, msg=str(error))
            return result
        # Extra variables are told from inventory, play and role variables by where they come
        # from: the command line. load_extra_vars is the function the VariableManager itself
        # builds them with (it parses -e k=v, JSON and @file alike, from context.CLIARGS) and it
        # keeps its result, so this is the very set the play runs with; task_vars has them
        # merged with every other source, and an action plugin is given no VariableManager.
        extra_vars = load_extra_vars(self._loader)
        playbooks = [os.path.abspath(path) for path in context.CLIARGS.get("args") or ()]
        known = KnownVariables(self._loader, list(C.DEFAULT_ROLES_PATH))
        for path in playbooks:
            known.playbook(path)
        # The names users give are read by the playbooks themselves: the roles (~0.2 s of Jinja
        # parsing, which every sweep paid before its first task on a node) are read only for a
        # name the playbooks do not read.
        names = unknown(extra_vars, known.names)
        if names:
            known.roles()
            names = unknown(extra_vars, known.names)
        messages = unknown_messages(names, known, [os.path.basename(path) for path in playbooks])
        result.update(changed=False, unknown=names)
        if messages and params["strict"]:
            result.update(
                failed=True,
                msg="%s (strict_variables=true refuses a variable that nothing reads: fix or remove it)"
                % "; ".join(messages),
            )
        elif messages:
            result["warnings"] = [
                "%s, so it is ignored (-e strict_variables=true refuses such a run)" % message for message in messages
            ]
        return result
