"""What a node's NVIDIA GPUs look like, from ``nvidia-smi`` and the PCI bus (no TensorFlow).

Every outcome of asking a node about its GPUs gets a name, so that a role or a worker can
say what is wrong instead of showing a traceback:

==============  ==========================================================================
status          meaning
==============  ==========================================================================
``ok``          nvidia-smi listed N >= 1 GPUs, every field readable
``degraded``    GPUs listed, but one is in error (``[Unknown Error]``, ``GPU is lost``,
                ``[GPU requires reset]``): it is in ``gpus`` with ``errors``
``absent``      no ``nvidia-smi`` executable (no driver installed)
``no_driver``   nvidia-smi cannot talk to the driver (module not loaded, or the kernel
                module and the user-space library differ after an upgrade)
``no_devices``  the driver runs but sees no GPU ("No devices were found")
``timeout``     nvidia-smi did not answer in time (a hung GPU or driver)
``error``       anything else nvidia-smi said; ``reason`` quotes it
==============  ==========================================================================

``pci_nvidia_devices`` reads the PCI bus (sysfs, or ``lspci -nn``) so that "no driver" can be
told apart from "no GPU": a p2.xlarge before the driver is installed has one NVIDIA 3D
controller on its bus and no ``nvidia-smi``.

``GpuSampler`` samples ``utilization.gpu`` every interval in a background thread while a
worker runs its measured steps, and gives the mean and maximum per GPU.

The ``--query-gpu`` fields and the CSV format are nvidia-smi's documented interface
(``nvidia-smi --help-query-gpu``); the parser is tested against recorded outputs of real
GPUs (tests/unit/fixtures/nvidia_smi/).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Callable

QUERY_FIELDS = (
    "index",
    "name",
    "memory.total",
    "driver_version",
    "uuid",
    "pci.bus_id",
    "compute_cap",
    "utilization.gpu",
    "memory.used",
)
# Drivers before R510 (e.g. 470, the last one for the K80) do not know this field.
OPTIONAL_FIELDS = ("compute_cap",)
UTILIZATION_FIELDS = ("index", "utilization.gpu")
FORMAT = "--format=csv,noheader,nounits"
NVIDIA_VENDOR_ID = "10de"
# PCI classes of a GPU: 0300 VGA controller, 0302 3D controller (Tesla/datacentre boards).
GPU_PCI_CLASSES = ("0300", "0302")
DEFAULT_TIMEOUT = 30.0

# What nvidia-smi writes in a field it cannot read. "[N/A]" and "[Not Supported]" are
# normal for some fields on some boards (utilisation of a GPU in a VM, ...); the others
# mean the GPU itself is in trouble.
UNREADABLE = ("[N/A]", "N/A", "[Not Supported]")
GPU_ERRORS = ("[Unknown Error]", "[GPU requires reset]", "[GPU is lost]", "[Insufficient Permissions]")

NO_DRIVER_MARKERS = (
    "couldn't communicate with the NVIDIA driver",
    "Failed to initialize NVML",
    "NVML Shared Library Not Found",
    "Driver Not Loaded",
)
NO_DEVICES_MARKER = "No devices were found"
INVALID_FIELD_RE = re.compile(r'Field "([^"]+)" is not a valid field to query')
LOST_GPU_RE = re.compile(r"Unable to determine the device handle for (?:GPU)?\s*([0-9A-Fa-f:.]+): (.+)")

# Compute capability by board name, for drivers too old to report compute_cap
# (CUDA's table: https://developer.nvidia.com/cuda-gpus). Longest names first.
COMPUTE_CAPABILITY_BY_NAME = (
    ("K80", "3.7"),
    ("K520", "3.0"),
    ("M60", "5.2"),
    ("P100", "6.0"),
    ("V100", "7.0"),
    ("T4", "7.5"),
    ("A100", "8.0"),
    ("A10G", "8.6"),
    ("L40S", "8.9"),
    ("L4", "8.9"),
    ("H100", "9.0"),
    ("H200", "9.0"),
)


# PCI device ids of the boards on EC2 GPU types (and a few others), so that a node without a
# driver can still be told what it holds (a K80 is refused by the current profile before
# any driver is installed). https://pci-ids.ucw.cz/read/PC/10de
PCI_DEVICE_NAMES = {
    "102d": "Tesla K80",
    "13f2": "Tesla M60",
    "15f8": "Tesla P100-PCIE-16GB",
    "1db1": "Tesla V100-SXM2-16GB",
    "1db5": "Tesla V100-SXM2-32GB",
    "1eb8": "Tesla T4",
    "2237": "NVIDIA A10G",
    "20b0": "NVIDIA A100-SXM4-40GB",
    "20b2": "NVIDIA A100-SXM4-80GB",
    "2330": "NVIDIA H100 80GB HBM3",
    "27b8": "NVIDIA L4",
}


def compute_capability_of(name: str | None) -> str | None:
    """The compute capability of a board by its name ('Tesla K80' -> '3.7'), else None."""
    words = re.split(r"[\s\-]+", name or "")
    for key, capability in COMPUTE_CAPABILITY_BY_NAME:
        if key in words:
            return capability
    return None


def query_argv(
    binary: str = "nvidia-smi", fields: Sequence[str] = QUERY_FIELDS, ids: Sequence[str] | None = None
) -> list[str]:
    argv = [binary, "--query-gpu=" + ",".join(fields), FORMAT]
    if ids:
        argv.append("--id=" + ",".join(ids))
    return argv


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def parse_gpu_lines(stdout: str, fields: Sequence[str] = QUERY_FIELDS) -> tuple[list[dict], list[str]]:
    """GPUs from nvidia-smi's CSV rows, and the lines that were no GPU row (lost GPUs etc.).

    A GPU is ``{index, name, memory_mib, driver_version, uuid, pci_bus_id,
    compute_capability, utilization_gpu, memory_used_mib, errors}``; an unreadable field is
    None and, when it is a GPU error rather than a field the board lacks, named in ``errors``.
    """
    gpus, other = [], []
    for raw in stdout.splitlines():
        line = raw.strip()
        if not line:
            continue
        values = [v.strip() for v in line.split(", ")]
        if len(values) != len(fields) or not values[0].isdigit():
            other.append(line)
            continue
        row, errors = {}, []
        for field, value in zip(fields, values):
            if value in GPU_ERRORS:
                errors.append(f"{field}: {value}")
                value = None
            elif value in UNREADABLE:
                value = None
            row[field] = value
        name = row.get("name")
        capability = row.get("compute_cap") if "compute_cap" in fields else None
        gpus.append(
            {
                "index": int(row["index"]),
                "name": name,
                "memory_mib": _int(row.get("memory.total")),
                "driver_version": row.get("driver_version"),
                "uuid": row.get("uuid"),
                "pci_bus_id": row.get("pci.bus_id"),
                "compute_capability": capability or compute_capability_of(name),
                "utilization_gpu": _number(row.get("utilization.gpu")),
                "memory_used_mib": _int(row.get("memory.used")),
                "errors": errors,
            }
        )
    return gpus, other


def _int(text: str | None) -> int | None:
    number = _number(text)
    return int(number) if number is not None else None


def classify(rc: int, stdout: str, stderr: str, fields: Sequence[str] = QUERY_FIELDS) -> dict:
    """The outcome of one nvidia-smi run: ``{status, reason, gpus, driver_version}``."""
    text = f"{stdout}\n{stderr}"
    gpus, other = parse_gpu_lines(stdout, fields)
    lost = [LOST_GPU_RE.search(line) for line in other + (stderr or "").splitlines()]
    lost = [m for m in lost if m]
    if any(marker in text for marker in NO_DRIVER_MARKERS):
        return _outcome(
            "no_driver",
            _first_line(next((line for line in text.splitlines() if any(m in line for m in NO_DRIVER_MARKERS)), text)),
        )
    if NO_DEVICES_MARKER in text and not gpus:
        return _outcome("no_devices", NO_DEVICES_MARKER)
    if gpus:
        broken = [g for g in gpus if g["errors"]]
        driver = next((g["driver_version"] for g in gpus if g["driver_version"]), None)
        if broken or lost:
            parts = [f"GPU {g['index']} ({g['pci_bus_id'] or '?'}): {'; '.join(g['errors'])}" for g in broken]
            parts += [f"GPU {m.group(1)}: {m.group(2).strip()}" for m in lost]
            return _outcome("degraded", "; ".join(parts), gpus, driver)
        if rc != 0:
            return _outcome(
                "error", f"nvidia-smi exited {rc}: {_first_line(stderr) or _first_line(stdout)}", gpus, driver
            )
        return _outcome("ok", None, gpus, driver)
    if lost:
        return _outcome("degraded", "; ".join(f"GPU {m.group(1)}: {m.group(2).strip()}" for m in lost))
    if rc == 0:
        return _outcome("no_devices", "nvidia-smi listed no GPU")
    return _outcome("error", f"nvidia-smi exited {rc}: {_first_line(stderr) or _first_line(stdout) or 'no output'}")


def _outcome(status, reason, gpus=(), driver=None):
    return {"status": status, "reason": reason, "gpus": list(gpus), "driver_version": driver}


Runner = Callable[[Sequence[str], float], "tuple[int, str, str]"]


def run_command(argv: Sequence[str], timeout: float) -> tuple[int, str, str]:
    """Run argv; (rc, stdout, stderr). Raises FileNotFoundError / subprocess.TimeoutExpired."""
    proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=dict(os.environ, LC_ALL="C"))
    return proc.returncode, proc.stdout, proc.stderr


def find_binary(binary: str = "nvidia-smi") -> str | None:
    if os.sep in binary:
        return binary if os.access(binary, os.X_OK) else None
    return shutil.which(binary)


def query(binary: str = "nvidia-smi", timeout: float = DEFAULT_TIMEOUT, runner: Runner = run_command) -> dict:
    """Ask nvidia-smi about every GPU; never raises. See the module doc for the statuses."""
    path = find_binary(binary)
    if path is None:
        return _outcome("absent", f"{binary} was not found on PATH: no NVIDIA driver is installed")
    fields = QUERY_FIELDS
    for _ in range(2):
        try:
            rc, stdout, stderr = runner(query_argv(path, fields), timeout)
        except subprocess.TimeoutExpired:
            return _outcome("timeout", f"{binary} did not answer within {timeout:g} s (a hung GPU or driver)")
        except OSError as err:
            return _outcome("error", f"cannot run {binary}: {err}")
        invalid = INVALID_FIELD_RE.search(f"{stdout}\n{stderr}")
        # An old driver refuses a field it does not know: ask again without it.
        if rc != 0 and invalid and invalid.group(1) in OPTIONAL_FIELDS and invalid.group(1) in fields:
            fields = tuple(f for f in fields if f != invalid.group(1))
            continue
        return classify(rc, stdout, stderr, fields)
    return classify(rc, stdout, stderr, fields)


# --- the PCI bus ---------------------------------------------------------------------------


def pci_nvidia_devices(
    sysfs: str = "/sys/bus/pci/devices", lspci: str = "lspci", runner: Runner = run_command
) -> list[dict]:
    """NVIDIA GPUs on the PCI bus, driver or not: ``[{slot, device_id, pci_class}]``.

    Reads sysfs (always there on Linux, needs no package); falls back to ``lspci -nn`` when
    sysfs shows no PCI bus at all (some containers).
    """
    entries = sorted(glob.glob(os.path.join(sysfs, "*")))
    if entries:
        found = []
        for entry in entries:
            vendor = _read(os.path.join(entry, "vendor"))
            pci_class = _read(os.path.join(entry, "class"))
            if (
                vendor
                and vendor.lower().removeprefix("0x") == NVIDIA_VENDOR_ID
                and pci_class
                and pci_class.lower().removeprefix("0x")[:4] in GPU_PCI_CLASSES
            ):
                found.append(
                    _pci_device(
                        os.path.basename(entry),
                        (_read(os.path.join(entry, "device")) or "").lower().removeprefix("0x"),
                        pci_class.lower().removeprefix("0x")[:4],
                    )
                )
        return found
    path = find_binary(lspci)
    if path is None:
        return []
    try:
        rc, stdout, _ = runner([path, "-nn", "-d", NVIDIA_VENDOR_ID + ":"], 10.0)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_lspci(stdout) if rc == 0 else []


_LSPCI_RE = re.compile(r"^(\S+)\s.*\[(03\d\d)\]:.*\[" + NVIDIA_VENDOR_ID + r":([0-9a-fA-F]{4})\]")


def parse_lspci(stdout: str) -> list[dict]:
    """NVIDIA GPUs from ``lspci -nn`` lines such as
    ``00:1e.0 3D controller [0302]: NVIDIA Corporation GK210GL [Tesla K80] [10de:102d] (rev a1)``."""
    found = []
    for line in stdout.splitlines():
        match = _LSPCI_RE.match(line.strip())
        if match and match.group(2) in GPU_PCI_CLASSES:
            found.append(_pci_device(match.group(1), match.group(3).lower(), match.group(2)))
    return found


def _pci_device(slot: str, device_id: str, pci_class: str) -> dict:
    name = PCI_DEVICE_NAMES.get(device_id)
    return {
        "slot": slot,
        "device_id": device_id,
        "pci_class": pci_class,
        "name": name,
        "compute_capability": compute_capability_of(name),
    }


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


# --- utilisation during the measured steps -----------------------------------------------------


def visible_gpu_ids(environ: dict | None = None) -> list[str] | None:
    """The GPUs this process may use, as nvidia-smi ``--id`` values; None: all; []: none.

    CUDA_VISIBLE_DEVICES holds indices or GPU UUIDs; nvidia-smi accepts both. (Indices match
    nvidia-smi's when CUDA_DEVICE_ORDER=PCI_BUS_ID, and on nodes of identical GPUs.)
    """
    environ = os.environ if environ is None else environ
    value = environ.get("CUDA_VISIBLE_DEVICES")
    if value is None:
        return None
    ids = [part.strip() for part in value.split(",") if part.strip()]
    # CUDA stops at the first invalid entry (e.g. -1 hides every GPU).
    valid = []
    for part in ids:
        if not (part.isdigit() or part.startswith(("GPU-", "MIG-"))):
            break
        valid.append(part)
    return valid


def summarise(samples: dict[int, list[float]], interval: float, status: str = "ok", reason: str | None = None) -> dict:
    """Mean and max utilisation (percent) per GPU and over them all."""
    per_gpu = {
        str(index): {"mean": sum(values) / len(values), "max": max(values), "samples": len(values)}
        for index, values in sorted(samples.items())
        if values
    }
    means = [v["mean"] for v in per_gpu.values()]
    return {
        "status": status if per_gpu or status != "ok" else "no_samples",
        "reason": reason,
        "interval": interval,
        "per_gpu": per_gpu,
        "mean": sum(means) / len(means) if means else None,
        "max": max((v["max"] for v in per_gpu.values()), default=None),
        "samples": sum(v["samples"] for v in per_gpu.values()),
        "unit": "%",
    }


class GpuSampler:
    """Sample ``utilization.gpu`` of this process's GPUs every ``interval`` seconds.

    ``start()`` takes a first sample at once, then one per interval in a daemon thread;
    ``stop()`` returns ``summarise(...)``. Sampling is best effort: a failed nvidia-smi call
    is counted, never raised into the measured loop.
    """

    def __init__(
        self,
        ids: Iterable[str] | None = None,
        interval: float = 1.0,
        binary: str = "nvidia-smi",
        timeout: float = 10.0,
        runner: Runner = run_command,
    ):
        self.ids = list(ids) if ids is not None else None
        self.interval = interval
        self.binary = binary
        self.timeout = timeout
        self.runner = runner
        self.samples: dict[int, list[float]] = {}
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> None:
        try:
            rc, stdout, stderr = self.runner(query_argv(self.binary, UTILIZATION_FIELDS, self.ids), self.timeout)
        except (OSError, subprocess.TimeoutExpired) as err:
            self.failures.append(str(err))
            return
        gpus, _ = parse_gpu_lines(stdout, UTILIZATION_FIELDS)
        if rc != 0 and not gpus:
            self.failures.append(_first_line(stderr) or _first_line(stdout) or f"exit {rc}")
            return
        for gpu in gpus:
            if gpu["utilization_gpu"] is not None:
                self.samples.setdefault(gpu["index"], []).append(gpu["utilization_gpu"])

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.sample_once()
            next_at += self.interval
            self._stop.wait(max(0.0, next_at - time.monotonic()))

    def start(self) -> GpuSampler:
        self._thread = threading.Thread(target=self._loop, name="gpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout + self.interval + 1)
        if not self.samples:
            reason = self.failures[0] if self.failures else "nvidia-smi gave no utilization values"
            return summarise({}, self.interval, "failed", reason)
        return summarise(self.samples, self.interval)


def start_sampler(
    interval: float, device: str, environ: dict | None = None, binary: str = "nvidia-smi"
) -> GpuSampler | None:
    """A running sampler for a worker that uses GPUs, else None (CPU-only node, CPU towers,
    CUDA_VISIBLE_DEVICES empty, no nvidia-smi, interval 0)."""
    if interval <= 0 or device == "cpu":
        return None
    ids = visible_gpu_ids(environ)
    if ids == [] or find_binary(binary) is None:
        return None
    return GpuSampler(ids, interval, binary).start()
