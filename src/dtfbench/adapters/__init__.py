"""How Ansible calls dtfbench: one shape for each kind of adapter.

- ``calls``: the answer of a computation to Ansible (its result, or a failure with the
  message), and the ``main()`` of the modules that only compute (standard library only;
  shipped to modules as ``ansible.module_utils.dtfbench.adapters.calls``);
- ``action``: the base class of the controller action plugins (plugins/action/), which
  compute in ansible-playbook's Python instead of a module process.

Each stage's code knows nothing of Ansible; the adapters hand it the validated options.
"""
