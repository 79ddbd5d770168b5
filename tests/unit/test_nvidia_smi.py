"""dtfbench.node.nvidia_smi against recorded nvidia-smi outputs (tests/nodes/nvidia_smi_outputs/).

Two levels: ``classify`` on the recorded texts, and ``query``/``GpuSampler`` running a real
executable (tests/nodes/fake_nvidia_smi/nvidia-smi, which replays a recorded case) so the
subprocess handling, the old-driver retry and the timeout are exercised for real.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dtfbench.node import nvidia_smi as smi

NODES = Path(__file__).resolve().parents[1] / "nodes"
OUTPUTS = NODES / "nvidia_smi_outputs"
FAKE = NODES / "fake_nvidia_smi" / "nvidia-smi"


def recorded(case):
    def text(ext, default=""):
        return (OUTPUTS / f"{case}{ext}").read_text() if (OUTPUTS / f"{case}{ext}").exists() else default  # noqa: E731

    fields = text(".fields").strip().split(",") if text(".fields") else smi.QUERY_FIELDS
    return int(text(".rc", "0").strip()), text(".out"), text(".err"), fields


@pytest.fixture
def fake(monkeypatch):
    """Put the replaying nvidia-smi first on PATH; fake(case) selects the recorded case."""
    monkeypatch.setenv("PATH", f"{FAKE.parent}{os.pathsep}{os.environ['PATH']}")

    def use(case):
        monkeypatch.setenv("DTFBENCH_FAKE_NVIDIA_SMI", str(OUTPUTS / case))

    return use


# --- classify on the recorded texts ---------------------------------------------------------


def test_k80_node_eight_gpus():
    rc, out, err, fields = recorded("k80_p2_8xlarge")
    result = smi.classify(rc, out, err, fields)
    assert result["status"] == "ok" and result["reason"] is None
    assert result["driver_version"] == "470.182.03"
    assert [g["index"] for g in result["gpus"]] == list(range(8))
    first = result["gpus"][0]
    assert first["name"] == "Tesla K80" and first["memory_mib"] == 11441
    assert first["pci_bus_id"] == "00000000:00:17.0"
    assert first["uuid"] == "GPU-3a5c2e9b-8d1f-6c4e-2b7a-91f0d3e6c852"
    # Driver 470 has no compute_cap field: the capability comes from the board's name.
    assert {g["compute_capability"] for g in result["gpus"]} == {"3.7"}
    assert first["utilization_gpu"] == 0.0 and first["errors"] == []


@pytest.mark.parametrize(
    "case,count,name,memory,capability,driver",
    [
        ("v100_p3_8xlarge", 4, "Tesla V100-SXM2-16GB", 16384, "7.0", "535.104.05"),
        ("a100_p4d_24xlarge", 8, "NVIDIA A100-SXM4-40GB", 40960, "8.0", "535.161.08"),
    ],
)
def test_current_boards(case, count, name, memory, capability, driver):
    result = smi.classify(*recorded(case))
    assert result["status"] == "ok"
    assert len(result["gpus"]) == count and result["driver_version"] == driver
    assert {(g["name"], g["memory_mib"], g["compute_capability"]) for g in result["gpus"]} == {
        (name, memory, capability)
    }
    assert len({g["uuid"] for g in result["gpus"]}) == count


@pytest.mark.parametrize("case", ["a100_mig_enabled", "geforce_old_driver"])
def test_unreadable_fields_are_none_not_errors(case):
    result = smi.classify(*recorded(case))
    assert result["status"] == "ok"
    gpu = result["gpus"][0]
    assert gpu["utilization_gpu"] is None and gpu["errors"] == []
    assert gpu["memory_used_mib"] in (35, 37)


def test_old_geforce_has_no_known_capability():
    assert smi.classify(*recorded("geforce_old_driver"))["gpus"][0]["compute_capability"] is None


def test_unknown_error_marks_the_gpu_and_degrades():
    result = smi.classify(*recorded("v100_unknown_error"))
    assert result["status"] == "degraded"
    assert "GPU 1 (00000000:00:1C.0): utilization.gpu: [Unknown Error]" in result["reason"]
    assert result["gpus"][0]["errors"] == [] and len(result["gpus"][1]["errors"]) == 2
    assert result["gpus"][1]["utilization_gpu"] is None


def test_lost_gpu_is_named():
    result = smi.classify(*recorded("v100_gpu_lost"))
    assert result["status"] == "degraded"
    assert result["reason"] == "GPU 0000:00:1E.0: Unknown Error"
    assert len(result["gpus"]) == 1


@pytest.mark.parametrize(
    "case,status,reason",
    [
        ("no_driver", "no_driver", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
        ("driver_mismatch", "no_driver", "Failed to initialize NVML: Driver/library version mismatch"),
        ("no_devices", "no_devices", "No devices were found"),
    ],
)
def test_failures(case, status, reason):
    result = smi.classify(*recorded(case))
    assert result["status"] == status and result["gpus"] == []
    assert result["reason"].startswith(reason)


def test_other_errors_quote_nvidia_smi():
    result = smi.classify(4, "", "Insufficient Permissions\n")
    assert result == {
        "status": "error",
        "reason": "nvidia-smi exited 4: Insufficient Permissions",
        "gpus": [],
        "driver_version": None,
    }
    assert smi.classify(0, "", "")["status"] == "no_devices"


def test_compute_capability_by_name():
    assert smi.compute_capability_of("Tesla K80") == "3.7"
    assert smi.compute_capability_of("NVIDIA L4") == "8.9"
    assert smi.compute_capability_of("NVIDIA L40S") == "8.9"
    assert smi.compute_capability_of("NVIDIA A10G") == "8.6"
    assert smi.compute_capability_of("NVIDIA H100 80GB HBM3") == "9.0"
    assert smi.compute_capability_of("Quadro RTX 8000") is None
    assert smi.compute_capability_of(None) is None


# --- query: a real executable -----------------------------------------------------------------


def test_query_absent(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = smi.query()
    assert result["status"] == "absent" and "nvidia-smi was not found on PATH" in result["reason"]


def test_query_old_driver_retries_without_compute_cap(fake, tmp_path):
    calls = []

    def runner(argv, timeout):
        calls.append(argv[1])
        return smi.run_command(argv, timeout)

    fake("k80_p2_8xlarge")
    result = smi.query(runner=runner)
    assert result["status"] == "ok" and len(result["gpus"]) == 8
    assert "compute_cap" in calls[0] and "compute_cap" not in calls[1] and len(calls) == 2
    assert result["gpus"][7]["pci_bus_id"] == "00000000:00:1E.0"


@pytest.mark.parametrize(
    "case,status",
    [
        ("v100_p3_8xlarge", "ok"),
        ("no_driver", "no_driver"),
        ("no_devices", "no_devices"),
        ("v100_gpu_lost", "degraded"),
    ],
)
def test_query_runs_the_executable(fake, case, status):
    fake(case)
    assert smi.query()["status"] == status


def test_query_timeout(fake, tmp_path):
    case = tmp_path / "hung"
    (tmp_path / "hung.out").write_text((OUTPUTS / "v100_p3_8xlarge.out").read_text())
    (tmp_path / "hung.sleep").write_text("30")
    fake(str(case))
    began = time.monotonic()
    result = smi.query(timeout=1)
    assert result["status"] == "timeout" and "did not answer within 1 s" in result["reason"]
    assert time.monotonic() - began < 10


# --- PCI ------------------------------------------------------------------------------------


def test_parse_lspci_k80():
    devices = smi.parse_lspci((OUTPUTS / "k80_p2_8xlarge.lspci").read_text())
    assert len(devices) == 8
    assert devices[0] == {
        "slot": "00:17.0",
        "device_id": "102d",
        "pci_class": "0302",
        "name": "Tesla K80",
        "compute_capability": "3.7",
    }


def test_parse_lspci_ignores_other_nvidia_functions():
    text = (
        "00:03.0 VGA compatible controller [0300]: Cirrus Logic GD 5446 [1013:00b8]\n"
        "01:00.1 Audio device [0403]: NVIDIA Corporation GK104 HDMI Audio Controller [10de:0e0a] (rev a1)\n"
        "01:00.0 VGA compatible controller [0300]: NVIDIA Corporation GK104 [GeForce GTX 680] [10de:1180] (rev a1)\n"
    )
    assert smi.parse_lspci(text) == [
        {"slot": "01:00.0", "device_id": "1180", "pci_class": "0300", "name": None, "compute_capability": None}
    ]


def test_pci_from_sysfs(tmp_path):
    def device(slot, vendor, klass, dev):
        folder = tmp_path / slot
        folder.mkdir()
        (folder / "vendor").write_text(vendor + "\n")
        (folder / "class").write_text(klass + "\n")
        (folder / "device").write_text(dev + "\n")

    device("0000:00:1e.0", "0x10de", "0x030200", "0x102d")
    device("0000:00:1f.0", "0x10de", "0x040300", "0x0e0a")  # its audio function
    device("0000:00:03.0", "0x1d0f", "0x030000", "0x1111")  # the EC2 VGA adapter
    assert smi.pci_nvidia_devices(sysfs=str(tmp_path)) == [
        {
            "slot": "0000:00:1e.0",
            "device_id": "102d",
            "pci_class": "0302",
            "name": "Tesla K80",
            "compute_capability": "3.7",
        }
    ]


def test_pci_on_this_machine_does_not_fail():
    assert isinstance(smi.pci_nvidia_devices(), list)


# --- sampling ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,expected",
    [
        (None, None),
        ("", []),
        ("0,1", ["0", "1"]),
        ("-1", []),
        ("2,-1,3", ["2"]),
        ("GPU-0e6f1c3a-9b2d-8e47-c5a0-3d7f91b2e6c8", ["GPU-0e6f1c3a-9b2d-8e47-c5a0-3d7f91b2e6c8"]),
    ],
)
def test_visible_gpu_ids(value, expected):
    environ = {} if value is None else {"CUDA_VISIBLE_DEVICES": value}
    assert smi.visible_gpu_ids(environ) == expected


def test_sampler_replays_recorded_utilisation(fake, tmp_path, monkeypatch):
    fake("v100_p3_8xlarge")
    monkeypatch.setenv("DTFBENCH_FAKE_NVIDIA_SMI_COUNTER", str(tmp_path / "counter"))
    sampler = smi.GpuSampler(ids=["1", "3"], interval=0.05)
    for _ in range(3):
        sampler.sample_once()
    result = sampler.stop()
    # Blocks 1..3 of v100_p3_8xlarge.util for GPUs 1 and 3.
    assert result["per_gpu"] == {
        "1": {"mean": (91 + 96 + 12) / 3, "max": 96.0, "samples": 3},
        "3": {"mean": (90 + 94 + 86) / 3, "max": 94.0, "samples": 3},
    }
    assert result["mean"] == pytest.approx(((91 + 96 + 12) / 3 + (90 + 94 + 86) / 3) / 2)
    assert result["max"] == 96.0 and result["samples"] == 6 and result["status"] == "ok"


def test_sampler_thread_samples_until_stopped(fake, tmp_path, monkeypatch):
    fake("v100_p3_8xlarge")
    monkeypatch.setenv("DTFBENCH_FAKE_NVIDIA_SMI_COUNTER", str(tmp_path / "counter"))
    sampler = smi.start_sampler(0.1, "auto", environ={"CUDA_VISIBLE_DEVICES": "0"})
    time.sleep(1.0)
    result = sampler.stop()
    count = int((tmp_path / "counter").read_text())
    assert result["samples"] == count >= 3
    assert list(result["per_gpu"]) == ["0"]
    expected = [[93.0, 97.0, 88.0][i % 3] for i in range(count)]
    assert result["per_gpu"]["0"]["mean"] == pytest.approx(sum(expected) / count)
    assert not sampler._thread.is_alive()
    time.sleep(0.3)
    assert int((tmp_path / "counter").read_text()) == count  # nothing sampled after stop


def test_sampler_reports_why_it_got_nothing(fake):
    fake("no_driver")
    sampler = smi.GpuSampler(interval=0.05)
    sampler.sample_once()
    result = sampler.stop()
    assert result["status"] == "failed" and result["mean"] is None and result["max"] is None
    assert "couldn't communicate with the NVIDIA driver" in result["reason"]


@pytest.mark.parametrize(
    "interval,device,environ",
    [
        (0, "auto", {}),
        (1, "cpu", {}),
        (1, "auto", {"CUDA_VISIBLE_DEVICES": ""}),
    ],
)
def test_no_sampler_without_gpus(fake, interval, device, environ):
    fake("v100_p3_8xlarge")
    assert smi.start_sampler(interval, device, environ=environ) is None


def test_no_sampler_without_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert smi.start_sampler(1, "auto", environ={}) is None


def test_module_utils_link():
    link = Path(__file__).resolve().parents[2] / "module_utils" / "dtfbench" / "node"
    assert link.is_symlink() and not os.path.isabs(os.readlink(link))
    assert (link / "nvidia_smi.py").resolve() == Path(smi.__file__).resolve()


def test_no_tensorflow_import():
    code = "import sys, dtfbench.node.nvidia_smi; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
