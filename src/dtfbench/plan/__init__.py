"""The plan, before anything starts: the sweep, the cluster layout, the catalog, EC2 types.

Runs on the controller (and inside Ansible modules, shipped as
``ansible.module_utils.dtfbench.plan``). Standard library only; imports among dtfbench's
stdlib-only subpackages (plan, launch, node, linux, results) are relative.
"""
