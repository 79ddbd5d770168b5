"""nvidia_stack refuses bad input with one clear error before it installs anything.

Runs the real role on localhost (ansible-playbook, local connection). Where a case needs
to get past the OS check on this Debian machine, a tiny module of the test returns the OS
facts of an Ubuntu 16.04 node (as setup would there) before the role runs; the K80 case puts the recorded-output nvidia-smi of a p2.8xlarge
(tests/nodes/nvidia_smi_outputs/) first on PATH.
"""

import re

import pytest
from node_helpers import recorded_nvidia_smi_env
from playbook_harness import extra_vars

pytestmark = pytest.mark.ansible

PLAY = """
- name: Apply nvidia_stack
  hosts: localhost
  connection: local
  gather_facts: false
  roles:
    - role: nvidia_stack
"""
XENIAL_PLAY = """
- name: Apply nvidia_stack on what looks like Ubuntu 16.04
  hosts: localhost
  connection: local
  gather_facts: false
  pre_tasks:
    - name: Report the OS facts of an Ubuntu 16.04 node
      xenial_facts:
  roles:
    - role: nvidia_stack
"""
XENIAL_FACTS_MODULE = """#!/usr/bin/python
import json
print(json.dumps({"changed": False, "ansible_facts": {
    "ansible_distribution": "Ubuntu", "ansible_distribution_version": "16.04",
    "ansible_distribution_major_version": "16", "ansible_os_family": "Debian", "ansible_kernel": "4.4.0-1128-aws"}}))
"""


@pytest.fixture
def on_xenial(run_playbook, project_root, tmp_path):
    library = tmp_path / "library"
    library.mkdir()
    (library / "xenial_facts.py").write_text(XENIAL_FACTS_MODULE)

    def run(*args):
        return run_playbook(XENIAL_PLAY, *args, env={"ANSIBLE_LIBRARY": f"{library}:{project_root / 'library'}"})

    return run


def failed_message(proc):
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert not re.search(r"changed=[1-9]", proc.stdout), "something changed before the error"
    return " ".join(proc.stdout.split()) + " " + " ".join(proc.stderr.split())


def test_cscs2017_without_the_cudnn_tarball(on_xenial):
    text = failed_message(on_xenial("-e", "node_profile=cscs2017"))
    assert "node_profile=cscs2017 needs cuDNN 5.1 for CUDA 8.0: set nvidia_cudnn_tarball" in text
    assert "NVIDIA requires a login to download it" in text


def test_cscs2017_with_a_missing_local_tarball(on_xenial, tmp_path):
    missing = tmp_path / "cudnn-8.0-linux-x64-v5.1.tgz"
    text = failed_message(on_xenial("-e", "node_profile=cscs2017", "-e", f"nvidia_cudnn_tarball={missing}"))
    assert f"nvidia_cudnn_tarball={missing} is not a file on this machine" in text


def test_cscs2017_with_a_bad_s3_location(on_xenial):
    text = failed_message(on_xenial("-e", "node_profile=cscs2017", "-e", "nvidia_cudnn_tarball=s3://bucket/"))
    assert "nvidia_cudnn_tarball=s3://bucket/ is not s3://bucket/key of a file" in text


def test_cscs2017_on_another_os(run_playbook, tmp_path):
    tarball = tmp_path / "cudnn-8.0-linux-x64-v5.1.tgz"
    tarball.write_bytes(b"not used")
    text = failed_message(run_playbook(PLAY, "-e", "node_profile=cscs2017", "-e", f"nvidia_cudnn_tarball={tarball}"))
    assert "node_profile=cscs2017 needs Ubuntu 16.04" in text and "runs Debian 12" in text


def test_cscs2017_with_install_never_needs_neither_its_os_nor_cudnn(run_playbook):
    """A CPU-only node (or a stack installed by hand) of the study's profile: nothing of CUDA 8.0
    is installed, so Debian 12 and no cuDNN tarball pass; tf_virtualenv installs TF 1.1 there."""
    proc = run_playbook(PLAY, "-e", "node_profile=cscs2017", "-e", "nvidia_stack_install=never")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "no NVIDIA GPU on localhost" in " ".join(proc.stdout.split())


def test_k80_with_the_current_profile_names_cscs2017(run_playbook):
    proc = run_playbook(PLAY, "-e", "node_profile=current", env=recorded_nvidia_smi_env("k80_p2_8xlarge"))
    text = failed_message(proc)
    assert (
        "localhost: node_profile=current cannot drive the Tesla K80 GPUs of this node (compute capability 3.7): "
        "its CUDA 12 needs compute capability >= 5.0; use node_profile=cscs2017"
    ) in text


def test_unknown_profile(run_playbook):
    text = failed_message(run_playbook(PLAY, "-e", "node_profile=cscs2018"))
    assert "nvidia_stack_profile" in text and "cscs2017" in text and "cscs2018" in text


def test_v100_with_the_current_profile_installs_only_with_gpus(run_playbook):
    # A V100 node, driver already there (recorded output): the check passes; install=never
    # so nothing is installed on this machine, and the expected count is verified.
    proc = run_playbook(
        PLAY,
        *extra_vars(node_profile="current", nvidia_stack_install="never", nvidia_stack_expect_gpus=4),
        env=recorded_nvidia_smi_env("v100_p3_8xlarge"),
    )
    assert proc.returncode == 0, proc.stdout[-3000:]
    proc = run_playbook(
        PLAY,
        *extra_vars(node_profile="current", nvidia_stack_install="never", nvidia_stack_expect_gpus=8),
        env=recorded_nvidia_smi_env("v100_p3_8xlarge"),
    )
    assert "expected 8 GPU(s), nvidia-smi lists 4 (status ok)" in failed_message(proc)
