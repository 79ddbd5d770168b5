#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

# The documentation of the action plugin plugins/action/extra_vars_check.py, which does the
# work in ansible-playbook's own process (it reads the command line and the playbooks there).

from __future__ import annotations

DOCUMENTATION = r"""
---
module: extra_vars_check
short_description: Warn about (or refuse) extra variables that no part of the run reads
description:
  - Compares the extra variables of the command line (C(-e name=value), C(-e @file), C(-e JSON)) with
    the variables that the playbooks given to C(ansible-playbook) read - with the playbooks they import,
    the roles they reach (tasks, defaults, vars, templates, C(meta/argument_specs.yml)) and the variable
    files they include. The known names are read from those files, never kept in a list of their own.
  - Each unknown name gets a warning with the closest known name (C(gpu) - did you mean C(gpus)?;
    C(num-ps) - C(num_ps)). Names starting with C(ansible_) are Ansible's own and are not checked.
  - Runs on the controller as an action plugin; needs no connection. Changes nothing.
version_added: "0.2.0"
author: dtfbench developers
options:
  strict:
    description: Fail, naming every unknown variable and its closest known name, instead of warning.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Name the extra variables that nothing reads
  extra_vars_check:
    strict: "{{ strict_variables | default(false) }}"
"""

RETURN = r"""
unknown:
  description: The extra variables that no playbook, role or variable file of the run reads.
  returned: always
  type: list
  elements: str
  sample: [gpu]
"""
