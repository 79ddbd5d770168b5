"""Helpers of the node-role tests (recorded nvidia-smi outputs)."""

import os
from pathlib import Path

NODES = Path(__file__).resolve().parent
OUTPUTS = NODES / "nvidia_smi_outputs"
FAKE_DIR = NODES / "fake_nvidia_smi"


def recorded_nvidia_smi_env(case):
    """Environment that puts the replaying nvidia-smi of a recorded case first on PATH."""
    return {"PATH": f"{FAKE_DIR}{os.pathsep}{os.environ['PATH']}", "DTFBENCH_FAKE_NVIDIA_SMI": str(OUTPUTS / case)}
