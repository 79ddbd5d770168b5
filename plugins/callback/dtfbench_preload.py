# Copyright: dtfbench developers
# Apache License 2.0 (see pyproject.toml)

from __future__ import annotations

DOCUMENTATION = r"""
name: dtfbench_preload
type: notification
short_description: Set up Jinja's lexer and the filter and test plugins once, before the workers fork
description:
  - Each task of a playbook runs in a worker process, forked from ansible-playbook for every
    host. The first template a worker renders sets up Jinja's lexer, and its first filter or
    test loads every filter or test plugin file of the configured paths (Ansible's own and the
    project's, with their imports). A worker keeps nothing when it exits, so where
    ansible-playbook itself has rendered no such template before it forks, every worker pays
    this again, 10-30 ms of CPU each (docs/performance.md, P2).
  - At the playbook's start this plugin renders one expression with a filter and a test in
    ansible-playbook's own process, so that every worker forked after it inherits the lexer and
    both plugin lists. A plugin folder added later (a role's C(filter_plugins)) clears the lists
    as before, and the next template loads them again.
"""

from ansible.plugins.callback import CallbackBase
from ansible.template import Templar, trust_as_template


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "dtfbench_preload"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_start(self, playbook):
        Templar(loader=playbook.get_loader()).template(trust_as_template("{{ [1] | length is truthy }}"))
