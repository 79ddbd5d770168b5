"""A run on more test-bed hosts than Ansible's forks: every host's tasks start, none waits forever.

A state=finished call of tf_host_run holds one of Ansible's forks until its host's workers
end, and TF's workers wait at a start barrier for every worker. With 3 hosts and forks=2,
the third host's tasks used to start only after the first two hosts' calls returned, which
they did only when their workers gave up at the barrier: the run failed (measured at 64
hosts with the project's forks=32, benchmarks/controller_scaling.py). The tf_cluster role
now starts the tasks of the hosts past the first `forks` first when the layout has more
hosts than forks.

The tasks are tests/testbed/barrier_task.py: listeners whose workers wait, like TF's, until
every worker's port accepts; they give up (exit 1) after 20 s.
"""

from pathlib import Path

import pytest
from playbook_harness import ansible_env, run_playbook
from testbed_fixtures import testbed_factory  # noqa: F401

pytestmark = [pytest.mark.ansible]

TASK = Path(__file__).resolve().parents[1] / "testbed" / "barrier_task.py"
PLAYBOOK = """
- name: One run of the tf_cluster role on every test-bed host
  hosts: tf_nodes
  gather_facts: false
  tasks:
    - name: Run the cluster
      ansible.builtin.include_role:
        name: tf_cluster
      vars:
        tf_cluster_program: ["{{{{ dtfbench_python }}}}", "{task}"]
        tf_cluster_program_args: [--barrier_timeout, "20", --run_seconds, "0.5"]
        tf_cluster_run_id: more-hosts-than-forks
        tf_cluster_gpus: 3
        tf_cluster_num_ps: 1
        tf_cluster_ps_exit_timeout: 0
        tf_cluster_grace_period: 2
        tf_cluster_ready_timeout: 60
        tf_cluster_timeout: 60

    - name: Show each host's workers
      ansible.builtin.debug:
        msg: "WORKERS {{{{ tf_cluster_worker_runs.results | map(attribute='rc') | list }}}}"
"""


def test_a_run_on_three_hosts_with_two_forks_starts_every_host(testbed_factory, tmp_path):
    bed = testbed_factory(hosts=3)
    book = tmp_path / "run.yml"
    book.write_text(PLAYBOOK.format(task=TASK))
    done = run_playbook(book, "-i", bed.inventory, env=ansible_env(ANSIBLE_FORKS="2"), timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "start barrier" not in out
    # 3 hosts > 2 forks: the host past the first two forks started first; the first two, which
    # hold a fork each, started their own tasks in the wait (no extra call). Then each waited.
    started_first = out.split("TASK [tf_cluster : Start this host's tasks first", 1)[1].split("TASK [", 1)[0]
    assert "changed: [node03]" in started_first, started_first
    assert "node01" not in started_first and "node02" not in started_first, started_first
    assert out.count("WORKERS [0]") == 3, out[-3000:]
    bed.down()
    assert bed.leftovers() == []
