"""Will a model at a batch size fit a node's memory? The known models' memory, measured.

``MODEL_MEMORY`` holds, per model of dtfbench.workload.cnn_models at its default image size,
the peak resident memory of one training process on CPU as ``fixed_mib + per_image_mib *
images`` (the images of one step: batch_size per device times the devices of the worker).
Measured with benchmarks/model_memory.py: ``python -m dtfbench train --variable_update
independent --device cpu`` at two small batch sizes, the peak RSS (``ru_maxrss``) of each,
the difference over the batch sizes' difference (docs/reliability.md, "Out of memory").
Another image size scales the per-image part with the pixels.

``fit_warnings`` compares a sweep's runs with its nodes: on a node with GPUs, the images of one
GPU (its activations; TensorFlow and the variables' copy in host memory are not counted, so
this is a lower bound) with the smallest GPU's memory; on a CPU node, the worker processes a
node runs with its memory (the smaller of RAM and the memory cgroup's limit). One warning per
configuration that does not fit, with the largest batch size that would.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .catalog import MODEL_SPECS


@dataclass(frozen=True)
class ModelMemory:
    fixed_mib: float
    per_image_mib: float


# Measured on an x86-64 CPU node (2 cores, TF 2 on CPU, Python 3.12): benchmarks/model_memory.py.
MODEL_MEMORY = {
    "inception3": ModelMemory(fixed_mib=934, per_image_mib=96.85),
    "resnet50": ModelMemory(fixed_mib=903, per_image_mib=86.56),
    "resnet101": ModelMemory(fixed_mib=1138, per_image_mib=122.73),
    "vgg16": ModelMemory(fixed_mib=2204, per_image_mib=67.76),
    "alexnet": ModelMemory(fixed_mib=1255, per_image_mib=5.15),
    "lenet": ModelMemory(fixed_mib=636, per_image_mib=0.37),
    "trivial": ModelMemory(fixed_mib=648, per_image_mib=0.03),
    "small_cnn": ModelMemory(fixed_mib=616, per_image_mib=0.24),
}


@dataclass(frozen=True)
class NodeMemory:
    """What one node offers a worker: RAM (or its memory cgroup's limit, the smaller) and, on
    a GPU node, the smallest GPU's memory."""

    host: str
    ram_mib: int
    gpu_mib: int | None = None
    ram_source: str = "RAM"

    def ram_text(self) -> str:
        if self.ram_source == "RAM":
            return f"the {_gib(self.ram_mib)} of RAM of {self.host}"
        return f"the {_gib(self.ram_mib)} {self.ram_source} of {self.host}"


def per_image_mib(model: str, image_size: int | None) -> float:
    spec, memory = MODEL_SPECS[model], MODEL_MEMORY[model]
    scale = (image_size / spec.default_image_size) ** 2 if image_size else 1.0
    return memory.per_image_mib * scale


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def run_warning(run: Mapping[str, Any], node: NodeMemory) -> str | None:
    """One warning when `run` does not fit `node`, else None."""
    model = str(run.get("model"))
    if model not in MODEL_MEMORY:
        return None
    batch = int(run["batch_size"])
    devices = int(run.get("devices_per_worker") or 1)
    image = per_image_mib(model, run.get("image_size"))
    size = run.get("image_size") or MODEL_SPECS[model].default_image_size
    what = f"model={model} batch_size={batch} ({size} px)"
    if image <= 0:
        return None
    if node.gpu_mib:
        need = image * batch
        if need <= node.gpu_mib:
            return None
        fits = math.floor(node.gpu_mib / image)
        return (
            f"{what} needs at least {_gib(need)} per GPU ({image:.2f} MiB per image), more than "
            f"the {_gib(node.gpu_mib)} of a GPU of {node.host}; it will fail out of memory: "
            f"choose batch_size={fits} or less"
        )
    workers = math.ceil(int(run.get("num_workers") or 1) / max(int(run.get("worker_nodes") or 1), 1))
    fixed = MODEL_MEMORY[model].fixed_mib
    need = workers * (fixed + image * batch * devices)
    if need <= node.ram_mib:
        return None
    fits = math.floor((node.ram_mib / workers - fixed) / (image * devices))
    advice = f"choose batch_size={fits} or less" if fits >= 1 else "use nodes with more memory"
    return (
        f"{what} needs about {_gib(need)} on a node ({workers} worker process(es) of "
        f"{_gib(fixed)} + {image:.2f} MiB per image), more than {node.ram_text()}; it will "
        f"fail out of memory: {advice}"
    )


def fit_warnings(runs: Iterable[Mapping[str, Any]], nodes: Iterable[NodeMemory]) -> list[str]:
    """One warning per configuration of `runs` that does not fit the smallest of `nodes`."""
    nodes = list(nodes)
    gpu_nodes = [n for n in nodes if n.gpu_mib]
    smallest = min(gpu_nodes or nodes, key=lambda n: n.gpu_mib or n.ram_mib, default=None)
    if smallest is None:
        return []
    warnings: list[str] = []
    for run in runs:
        found = run_warning(run, smallest)
        if found and found not in warnings:
            warnings.append(found)
    return warnings


def node_memory(host: str, doc: Mapping[str, Any]) -> NodeMemory | None:
    """A node's memory from its environment document (dtfbench.compat.environment, with
    ``gpus`` as dtfbench.results.environment_view.interpret gives them); None when unknown."""
    ram = doc.get("memory_mib")
    if not isinstance(ram, int):
        return None
    limit = doc.get("memory_limit_mib")
    source = "RAM"
    if isinstance(limit, int) and limit < ram:
        ram, source = limit, "memory cgroup limit"
    gpus = doc.get("gpus") if isinstance(doc.get("gpus"), list) else []
    sizes = [g["memory_mib"] for g in gpus if isinstance(g, Mapping) and isinstance(g.get("memory_mib"), int)]
    return NodeMemory(host=host, ram_mib=ram, gpu_mib=min(sizes) if sizes else None, ram_source=source)
