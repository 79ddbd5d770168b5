"""Reading the project's task files: every task, blocks unfolded (tests/unit/test_per_host_scans.py,
tests/unit/test_skipped_once.py)."""


def leaf_tasks(tasks, inherited_run_once=False, inherited_vars=None, parts=("block", "rescue", "always")):
    """(task, run_once, the vars it sees from its blocks) for every task, blocks unfolded (the
    sections named in `parts`) and a playbook's plays too. A templated run_once counts as not
    once: where it renders false, the task runs on every host."""
    for task in tasks or []:
        if not isinstance(task, dict):
            continue
        if "hosts" in task:  # a play
            for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from leaf_tasks(task.get(section), inherited_run_once, inherited_vars, parts)
            continue
        run_once = task.get("run_once", inherited_run_once) is True
        block_vars = dict(inherited_vars or {}, **(task.get("vars") or {}))
        if "block" in task:
            for part in parts:
                yield from leaf_tasks(task.get(part), run_once, block_vars, parts)
        else:
            yield task, run_once, inherited_vars or {}
