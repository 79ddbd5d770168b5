"""gpu_info through Ansible (``ansible localhost -m gpu_info``), on this GPU-less machine.

This machine has no NVIDIA GPU and no nvidia-smi, which is the "absent" case for real. The
other cases use the recorded-output approach (as PerfKitBenchmarker tests its GPU code): an
executable named nvidia-smi (tests/nodes/fake_nvidia_smi/nvidia-smi), first on the PATH the
module runs with, prints what nvidia-smi printed on a real node of that kind
(tests/nodes/nvidia_smi_outputs/, see its README for provenance) and exits with its code.
The module, its module_utils and the subprocess handling are the real ones.
"""

import os
from pathlib import Path

import pytest

from dtfbench.node import nvidia_smi

pytestmark = pytest.mark.ansible

NODES = Path(__file__).resolve().parents[1] / "nodes"
OUTPUTS = NODES / "nvidia_smi_outputs"
FAKE_DIR = NODES / "fake_nvidia_smi"
KEYS = {
    "gpu_present",
    "gpu_count",
    "gpus",
    "driver_version",
    "nvidia_smi",
    "pci_devices",
    "compute_capabilities",
    "profile_supported",
    "profile_problem",
}


@pytest.fixture
def with_recorded(monkeypatch):
    def use(case):
        monkeypatch.setenv("PATH", f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}")
        monkeypatch.setenv("DTFBENCH_FAKE_NVIDIA_SMI", str(OUTPUTS / case))

    return use


def test_this_machine_has_no_gpu(run_module):
    assert nvidia_smi.find_binary() is None, "this test expects a machine without nvidia-smi"
    for check in (False, True):
        rc, result = run_module("gpu_info", {"node_profile": "current"}, check=check)
        assert rc == 0, result
        assert KEYS <= set(result)
        assert result["changed"] is False
        assert result["gpu_present"] is (len(nvidia_smi.pci_nvidia_devices()) > 0)
        assert result["gpu_count"] == 0 and result["gpus"] == [] and result["driver_version"] is None
        assert result["nvidia_smi"]["status"] == "absent"
        assert "nvidia-smi was not found" in result["nvidia_smi"]["reason"]
        assert result["profile_supported"] is None and result["profile_problem"] == ""


def test_instance_type_alone_says_nothing_about_a_node_without_gpus(run_module):
    rc, result = run_module("gpu_info", {"node_profile": "current", "instance_type": "p2.xlarge"})
    assert rc == 0 and result["profile_supported"] is None and result["gpu_present"] is False


def test_k80_node_and_the_current_profile(run_module, with_recorded):
    with_recorded("k80_p2_8xlarge")
    rc, result = run_module("gpu_info", {"node_profile": "current"})
    assert rc == 0, result
    assert result["gpu_present"] is True and result["gpu_count"] == 8
    assert result["nvidia_smi"] == {"status": "ok", "reason": None}
    assert result["driver_version"] == "470.182.03"
    assert result["gpus"][0] == {
        "index": 0,
        "name": "Tesla K80",
        "memory_mib": 11441,
        "compute_capability": "3.7",
        "uuid": "GPU-3a5c2e9b-8d1f-6c4e-2b7a-91f0d3e6c852",
        "pci_bus_id": "00000000:00:17.0",
        "errors": [],
    }
    assert result["compute_capabilities"] == ["3.7"]
    assert result["profile_supported"] is False
    problem = result["profile_problem"]
    assert problem.startswith(
        "node_profile=current cannot drive the Tesla K80 GPUs of this node (compute capability 3.7)"
    )
    assert "use node_profile=cscs2017" in problem

    rc, result = run_module("gpu_info", {"node_profile": "cscs2017"})
    assert rc == 0 and result["profile_supported"] is True and result["profile_problem"] == ""


def test_a100_node(run_module, with_recorded):
    with_recorded("a100_p4d_24xlarge")
    rc, result = run_module("gpu_info", {"node_profile": "current"})
    assert rc == 0
    assert result["gpu_count"] == 8 and result["profile_supported"] is True
    assert {g["memory_mib"] for g in result["gpus"]} == {40960}
    rc, result = run_module("gpu_info", {"node_profile": "cscs2017"})
    assert result["profile_supported"] is False
    assert "drives compute capability 3.0 to 6.2" in result["profile_problem"]
    assert "use node_profile=current" in result["profile_problem"]


@pytest.mark.parametrize(
    "case,status",
    [
        ("no_driver", "no_driver"),
        ("driver_mismatch", "no_driver"),
        ("no_devices", "no_devices"),
        ("v100_unknown_error", "degraded"),
    ],
)
def test_failures_are_facts_not_failures(run_module, with_recorded, case, status):
    with_recorded(case)
    rc, result = run_module("gpu_info", {"timeout": 20})
    assert rc == 0, result
    assert result["nvidia_smi"]["status"] == status and result["nvidia_smi"]["reason"]
    assert result["profile_supported"] is None


def test_bad_arguments(run_module):
    rc, result = run_module("gpu_info", {"node_profile": "2017"})
    assert rc != 0 and "node_profile" in result["msg"] and "cscs2017" in result["msg"]
    rc, result = run_module("gpu_info", {"timeout": 0})
    assert rc != 0 and "timeout must be > 0" in result["msg"]
