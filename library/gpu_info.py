#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: gpu_info
short_description: Facts about a node's NVIDIA GPUs, from nvidia-smi and the PCI bus
description:
  - Asks C(nvidia-smi) about every GPU (index, name, memory, driver, UUID, PCI bus id,
    compute capability) and reads the PCI bus for NVIDIA GPUs, so that "no GPU", "GPUs but
    no driver", "driver not loaded" and "a GPU in error" are told apart.
  - Never fails because a node has no GPU, no driver or a broken one; the outcome is in
    RV(nvidia_smi.status) and RV(nvidia_smi.reason). It fails only on bad arguments.
  - With O(node_profile), also says whether the profile's CUDA drives the node's GPUs
    (CUDA 12 of the C(current) profile dropped Kepler, the K80 of p2 instances), from the
    GPUs nvidia-smi lists, else from the PCI device ids, else from O(instance_type).
  - Read-only; supports check mode.
version_added: "0.1.0"
author: dtfbench developers
options:
  nvidia_smi:
    description: The nvidia-smi executable, a name looked up on C(PATH) or a path.
    type: str
    default: nvidia-smi
  timeout:
    description: Seconds nvidia-smi may take before it counts as hung (status C(timeout)).
    type: float
    default: 30
  node_profile:
    description:
      - A node profile of C(dtfbench.plan.ec2_types.NODE_PROFILES); when given, RV(profile_supported)
        and RV(profile_problem) say whether it fits the GPUs.
    type: str
    choices: [cscs2017, current]
  instance_type:
    description:
      - The node's EC2 instance type, used for the profile check only when the node shows
        NVIDIA GPUs that neither nvidia-smi nor the PCI device id names.
    type: str
notes:
  - Supports check mode (it changes nothing in any mode).
  - The PCI bus is read from C(/sys/bus/pci/devices), or C(lspci -nn) where sysfs shows none.
seealso:
  - name: nvidia-smi query options
    description: C(nvidia-smi --help-query-gpu) lists the fields this module asks for.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Read the node's GPUs
  gpu_info:
    node_profile: current
  register: node_gpus

- name: Stop on a K80 with the current profile
  ansible.builtin.fail:
    msg: "{{ node_gpus.profile_problem }}"
  when: node_gpus.profile_supported is false

- name: Show what the node has
  ansible.builtin.debug:
    msg: "{{ node_gpus.gpu_count }} x {{ node_gpus.gpus | map(attribute='name') | unique | join(', ') }}"
  when: node_gpus.nvidia_smi.status == 'ok'
"""

RETURN = r"""
gpu_present:
  description: True when nvidia-smi lists a GPU or the PCI bus holds an NVIDIA GPU (driver or not).
  returned: always
  type: bool
  sample: true
gpu_count:
  description: GPUs nvidia-smi lists; without a working nvidia-smi, NVIDIA GPUs on the PCI bus.
  returned: always
  type: int
  sample: 8
gpus:
  description: The GPUs nvidia-smi lists (empty when it lists none).
  returned: always
  type: list
  elements: dict
  sample:
    - {index: 0, name: Tesla K80, memory_mib: 11441, compute_capability: "3.7",
       uuid: GPU-3a5c2e9b-8d1f-6c4e-2b7a-91f0d3e6c852, pci_bus_id: "00000000:00:17.0", errors: []}
driver_version:
  description: The NVIDIA driver's version, when nvidia-smi answered.
  returned: always
  type: str
  sample: 470.182.03
nvidia_smi:
  description:
    - C(status) is C(ok), C(degraded) (a GPU in error), C(absent) (no nvidia-smi), C(no_driver),
      C(no_devices), C(timeout) or C(error); C(reason) says why, in nvidia-smi's words where it
      gave some (null when ok).
  returned: always
  type: dict
  sample: {status: no_driver, reason: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. ..."}
pci_devices:
  description: NVIDIA GPUs on the PCI bus, with the board's name and compute capability where the device id is known.
  returned: always
  type: list
  elements: dict
  sample:
    - {slot: "0000:00:1e.0", device_id: "102d", pci_class: "0302", name: Tesla K80, compute_capability: "3.7"}
compute_capabilities:
  description: Distinct compute capabilities of the node's GPUs, as far as known.
  returned: always
  type: list
  elements: str
  sample: ["3.7"]
profile_supported:
  description: With O(node_profile), whether its CUDA drives these GPUs; null when no GPU or the capability is unknown.
  returned: always
  type: bool
  sample: false
profile_problem:
  description: With O(node_profile), why it does not fit and which profile does; empty otherwise.
  returned: always
  type: str
  sample: "node_profile=current cannot drive the Tesla K80 GPUs (compute capability 3.7) ..."
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.node.nvidia_smi import pci_nvidia_devices, query
from ansible.module_utils.dtfbench.plan.ec2_types import INSTANCE_TYPES, NODE_PROFILES


def _version(text):
    return tuple(int(part) for part in str(text).split("."))


def _fits(profile, capability):
    version = _version(capability)
    if version < tuple(profile.min_compute_capability):
        return False
    return profile.max_compute_capability is None or version <= tuple(profile.max_compute_capability)


def profile_check(profile_name, capabilities, boards):
    """(supported, problem) of a profile for GPUs of these compute capabilities."""
    profile = NODE_PROFILES[profile_name]
    if not capabilities:
        return None, ""
    bad = [c for c in capabilities if not _fits(profile, c)]
    if not bad:
        return True, ""
    working = sorted(p.name for p in NODE_PROFILES.values() if all(_fits(p, c) for c in capabilities))
    low = "%d.%d" % tuple(profile.min_compute_capability)
    span = (
        "needs compute capability >= %s" % low
        if profile.max_compute_capability is None
        else "drives compute capability %s to %d.%d" % (low, *profile.max_compute_capability)
    )
    fix = ("use node_profile=%s" % " or ".join(working)) if working else "no profile drives these GPUs"
    return False, (
        "node_profile=%s cannot drive the %s GPUs of this node (compute capability %s): its CUDA %s %s; %s"
        % (profile_name, " and ".join(boards) or "NVIDIA", ", ".join(bad), profile.cuda, span, fix)
    )


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="str", default="nvidia-smi"),
            timeout=dict(type="float", default=30.0),
            node_profile=dict(type="str", choices=sorted(NODE_PROFILES)),
            instance_type=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["timeout"] <= 0:
        module.fail_json(msg="timeout must be > 0 seconds, got %s" % params["timeout"])
    smi = query(params["nvidia_smi"], timeout=params["timeout"])
    pci = pci_nvidia_devices()
    gpus = [
        {key: gpu[key] for key in ("index", "name", "memory_mib", "compute_capability", "uuid", "pci_bus_id", "errors")}
        for gpu in smi["gpus"]
    ]
    gpu_count = len(gpus) if gpus else len(pci)

    sources = gpus or pci
    capabilities = sorted({g["compute_capability"] for g in sources if g.get("compute_capability")})
    boards = sorted({g["name"] for g in sources if g.get("name")})
    itype = INSTANCE_TYPES.get(params["instance_type"] or "")
    # The instance type only stands in for a board the node shows but we cannot name.
    if not capabilities and (gpus or pci) and itype is not None and itype.gpus:
        capabilities = ["%d.%d" % itype.compute_capability]
        boards = [itype.gpu_model]
    supported, problem = None, ""
    if params["node_profile"]:
        supported, problem = profile_check(params["node_profile"], capabilities, boards)

    module.exit_json(
        changed=False,
        gpu_present=bool(gpus or pci),
        gpu_count=gpu_count,
        gpus=gpus,
        driver_version=smi["driver_version"],
        nvidia_smi={"status": smi["status"], "reason": smi["reason"]},
        pci_devices=pci,
        compute_capabilities=capabilities,
        profile_supported=supported,
        profile_problem=problem,
    )


if __name__ == "__main__":
    main()
