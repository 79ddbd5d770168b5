"""Out of memory, named: run-benchmark.yml on the local system inside a memory cgroup of the
test's own, two configurations of the trivial model that cannot fit.

- a batch whose synthetic images are twice the machine's RAM: TensorFlow's allocation fails
  (ResourceExhaustedError, the kernel refuses the address space at once, nothing is touched);
- a batch of about 1.5 times the cgroup's limit: the allocation succeeds and the kernel's OOM
  killer ends the worker when its pages are touched.

The cgroup (tests/harness/memory_cgroup.py: LIMIT_MIB, no swap) holds every process of the
test's playbook from its start: the child process joins it before it executes
ansible-playbook, so Ansible, its module processes and every TF task they start are in it,
and nothing of the test can take more of the machine. The fixture kills what is left in it
and removes it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path

import pytest
from memory_cgroup import memory_cgroup
from playbook_harness import TAIL, extra_vars, own_ports, start_playbook

from dtfbench.results import store

pytestmark = [pytest.mark.tf, pytest.mark.ansible]

LIMIT_MIB = 1024
IMAGE_BYTES = 32 * 32 * 3 * 4  # one synthetic image of the trivial model at 32 px, float32


@pytest.fixture
def cgroup():
    with memory_cgroup(LIMIT_MIB) as made:
        yield made


def test_out_of_memory_is_named_and_the_plan_warns(tmp_path, cgroup, live_processes):
    if Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1":
        pytest.skip("vm.overcommit_memory=1: no allocation is refused, ResourceExhausted cannot happen")
    ram_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    refused = 2 * ram_bytes // IMAGE_BYTES  # images of twice the RAM: the allocation is refused
    killed = 3 * LIMIT_MIB * 1024 * 1024 // 2 // IMAGE_BYTES  # 1.5 x the limit: the OOM killer
    sweep_id = f"oom-{uuid.uuid4().hex[:8]}"
    db = tmp_path / "results.sqlite"
    args = [
        *extra_vars(sweep_id=sweep_id, results_db=db, dtfbench_run_root=tmp_path / "runs"),
        *own_ports(tmp_path),
        *extra_vars(gpus=1, model="trivial", image_size=32, batch_size=f"{refused},{killed}"),
        *extra_vars(warmup_steps=1, steps=2, repetitions=1, startup_timeout=120, run_timeout=300),
    ]

    playbook = start_playbook(
        "run-benchmark.yml",
        *args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=cgroup.join,  # before it executes ansible-playbook
    )
    try:
        output, _ = playbook.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(playbook.pid, signal.SIGKILL)
        output, _ = playbook.communicate()
        pytest.fail(f"the playbook ran past 600 s:\n{output[-TAIL:]}")
    assert playbook.returncode == 2, output[-TAIL:]  # the sweep ran, its runs failed

    # The plan compared each configuration with the node's memory (the cgroup's limit, here).
    flat = " ".join(output.split())
    assert f"WARNING: model=trivial batch_size={refused} (32 px) needs about" in flat, output[-TAIL:]
    assert f"WARNING: model=trivial batch_size={killed} (32 px) needs about" in flat, output[-TAIL:]
    assert "memory cgroup limit of localhost; it will fail out of memory: choose batch_size=" in flat

    reasons = {run["batch_size"]: run["reason"] for run in store.runs(store.connect(db))}
    assert set(reasons) == {refused, killed}, reasons
    # TF's allocation failure: the worker's own, first, not a lost peer.
    first = reasons[refused].splitlines()[0]
    assert "worker-0 exited with rc 1: out of memory: worker 0 could not allocate a tensor" in first, first
    assert "ResourceExhaustedError: OOM when allocating tensor" in first and "a peer died" not in first, first
    # The kernel's OOM kill, with the cgroup's count of it (the worker was in the test's cgroup).
    first = reasons[killed].splitlines()[0]
    assert "worker-0 was killed by the kernel's OOM killer (SIGKILL; memory." in first, first
    assert "oom_kill 0 -> " in first and f" in {cgroup.path}" in first, first
    assert live_processes(sweep_id) == []
