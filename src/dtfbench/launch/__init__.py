"""Starting and stopping the TF tasks: the task core (targets) and the interrupt watchdog (controller).

Standard library only (the task core also runs on the targets' Python, shipped as
``ansible.module_utils.dtfbench.launch``); relative imports.
"""
