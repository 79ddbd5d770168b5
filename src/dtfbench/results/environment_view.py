"""Reading environment documents on the controller: GPUs parsed, fields compared, runs keyed.

A node's document (``dtfbench.compat.environment``) carries nvidia-smi's raw answers; ``interpret``
parses them with ``dtfbench.node.nvidia_smi`` (the one parser) into ``gpus``. Then:

- ``fields(doc)``: the comparable fields of one host, flat (``gpu_model``, ``tf_build``,
  ``env.OMP_NUM_THREADS`` ...), each a string, ``unknown`` where the node could not say;
- ``MATTERS``: the fields that make two runs different measurements (GPU model, driver, TF
  version and build, instance type). ``run_key`` joins them over a run's hosts; runs whose
  keys differ are never one configuration, and ``split_fields`` says which fields split them;
- ``host_differences``: the fields (every one but the host's own name and memory) in which
  a sweep's hosts differ, for the warning before the first run.

Standard library only (and ..node.nvidia_smi).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..node import nvidia_smi

UNKNOWN = "unknown"
MATTERS = ("instance_type", "gpu_model", "gpu_driver", "tf_version", "tf_build")
# Compared between a sweep's hosts besides MATTERS (memory differs by a few MB on equal nodes);
# the report's environments table shows them too.
DETAILS = (
    "gpu_count",
    "gpu_clocks",
    "gpu_power_limit",
    "cuda",
    "cudnn",
    "cpu_model",
    "logical_cores",
    "os",
    "kernel",
    "python",
)
HOST_FIELDS = MATTERS + DETAILS
# Set per task by the launcher (a worker's own GPUs): never a difference between hosts.
PER_TASK_ENV = ("CUDA_VISIBLE_DEVICES",)


def _rows(stdout: str, fields: list[str]) -> dict[int, dict[str, str]]:
    rows = {}
    for line in (stdout or "").splitlines():
        values = [v.strip() for v in line.split(", ")]
        if len(values) == len(fields) and values[0].isdigit():
            rows[int(values[0])] = {
                f: (None if v in nvidia_smi.UNREADABLE + nvidia_smi.GPU_ERRORS else v) for f, v in zip(fields, values)
            }
    return rows


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def interpret(doc: Mapping[str, Any] | None) -> dict[str, Any]:
    """The document with ``gpus`` (nvidia_smi's GPU dicts plus max SM/memory clocks in MHz and
    the power limit in W), ``gpu_status`` and ``gpu_reason``; idempotent; {} for None."""
    if not isinstance(doc, Mapping):
        return {}
    # A copy through JSON: the document is JSON, and deepcopy of Ansible's lazy containers (a
    # filter's input) would copy their templar too.
    doc = json.loads(json.dumps(doc))
    if "gpus" in doc:
        return doc
    doc.setdefault("unknown", {})
    query = doc.get("gpu_query")
    main = query.get("gpus") if isinstance(query, Mapping) else None
    if not isinstance(main, Mapping):
        doc.update(
            gpus=UNKNOWN,
            gpu_status=UNKNOWN,
            gpu_reason=doc["unknown"].get("gpu_query.gpus") or "the node did not ask nvidia-smi",
        )
    elif "status" in main:
        doc.update(gpus=UNKNOWN, gpu_status=main["status"], gpu_reason=main.get("reason"))
    else:
        outcome = nvidia_smi.classify(main["rc"], main["stdout"], main["stderr"], main["fields"])
        gpus = outcome["gpus"] or UNKNOWN
        doc.update(gpus=gpus, gpu_status=outcome["status"], gpu_reason=outcome["reason"])
        clocks = query.get("clocks") if isinstance(query, Mapping) else None
        rows = (
            _rows(clocks.get("stdout"), clocks.get("fields", []))
            if isinstance(clocks, Mapping) and clocks.get("rc") == 0
            else {}
        )
        if isinstance(gpus, list):
            for gpu in gpus:
                row = rows.get(gpu["index"], {})
                gpu["clocks_max_sm_mhz"] = _number(row.get("clocks.max.sm"))
                gpu["clocks_max_mem_mhz"] = _number(row.get("clocks.max.mem"))
                gpu["power_limit_w"] = _number(row.get("power.limit"))
        if not rows and isinstance(gpus, list):
            doc["unknown"]["gpu_clocks"] = _query_problem(clocks)
    if doc["gpus"] == UNKNOWN:
        doc["unknown"]["gpus"] = f"{doc['gpu_status']}: {doc['gpu_reason']}"
    doc.pop("gpu_query", None)
    return doc


def _query_problem(answer: Any) -> str:
    if not isinstance(answer, Mapping):
        return "not asked"
    if "status" in answer:
        return f"{answer['status']}: {answer.get('reason')}"
    text = (answer.get("stderr") or answer.get("stdout") or "").strip().splitlines()
    return f"nvidia-smi exited {answer.get('rc')}: {text[-1] if text else 'no output'}"


def _known(value: Any) -> bool:
    return value not in (None, "", UNKNOWN)


def _join(values: Iterable[Any]) -> str:
    known = sorted({str(v) for v in values if _known(v)})
    return ", ".join(known) if known else UNKNOWN


def _tf_build(tf: Mapping[str, Any]) -> str:
    build = tf.get("build") if isinstance(tf.get("build"), Mapping) else {}
    parts = [str(tf.get("git_version") or UNKNOWN)]
    cuda = tf.get("cuda_build")
    if cuda is True or build.get("is_cuda_build"):
        parts.append(f"cuda {build.get('cuda_version') or '?'} cudnn {build.get('cudnn_version') or '?'}")
    elif cuda is False:
        parts.append("no cuda")
    if build.get("is_rocm_build"):
        parts.append("rocm")
    if tf.get("onednn") in (True, False):
        parts.append("onednn" if tf["onednn"] else "no onednn")
    return "; ".join(parts) if _known(parts[0]) else UNKNOWN


def fields(doc: Mapping[str, Any] | None) -> dict[str, str]:
    """One host's comparable fields as strings (``unknown`` where it could not say)."""
    doc = interpret(doc)
    if not doc:
        return {name: UNKNOWN for name in HOST_FIELDS}
    tf = doc.get("tensorflow") if isinstance(doc.get("tensorflow"), Mapping) else {}
    gpus = doc.get("gpus") if isinstance(doc.get("gpus"), list) else []
    os_info = doc.get("os") if isinstance(doc.get("os"), Mapping) else {}
    cpu = doc.get("cpu") if isinstance(doc.get("cpu"), Mapping) else {}
    cuda = doc.get("cuda") if isinstance(doc.get("cuda"), Mapping) else {}
    cudnn = doc.get("cudnn") if isinstance(doc.get("cudnn"), Mapping) else {}
    out = {
        "instance_type": doc.get("instance_type") if _known(doc.get("instance_type")) else UNKNOWN,
        "gpu_model": _join(g.get("name") for g in gpus),
        "gpu_driver": _join(g.get("driver_version") for g in gpus),
        "tf_version": str(tf["version"]) if _known(tf.get("version")) else UNKNOWN,
        "tf_build": _tf_build(tf) if tf else UNKNOWN,
        "gpu_count": str(len(gpus)) if gpus else UNKNOWN,
        "gpu_clocks": _join(
            f"{g['clocks_max_sm_mhz']:g}/{g['clocks_max_mem_mhz']:g} MHz"
            for g in gpus
            if g.get("clocks_max_sm_mhz") is not None and g.get("clocks_max_mem_mhz") is not None
        ),
        "gpu_power_limit": _join(f"{g['power_limit_w']:g} W" for g in gpus if g.get("power_limit_w") is not None),
        "cuda": str(cuda.get("version")) if _known(cuda.get("version")) else UNKNOWN,
        "cudnn": str(cudnn.get("version")) if _known(cudnn.get("version")) else UNKNOWN,
        "cpu_model": str(cpu.get("model")) if _known(cpu.get("model")) else UNKNOWN,
        "logical_cores": str(cpu.get("logical_cores")) if _known(cpu.get("logical_cores")) else UNKNOWN,
        "os": str(os_info.get("name")) if _known(os_info.get("name")) else UNKNOWN,
        "kernel": str(os_info.get("kernel")) if _known(os_info.get("kernel")) else UNKNOWN,
        "python": str((doc.get("python") or {}).get("version") or UNKNOWN),
    }
    env = doc.get("env") if isinstance(doc.get("env"), Mapping) else {}
    out.update({f"env.{k}": str(v) for k, v in sorted(env.items()) if k not in PER_TASK_ENV})
    return out


def run_key(docs: Mapping[str, Any]) -> str:
    """The fields that matter over a run's hosts ({host: document}), one string:
    ``instance_type=p3.8xlarge; gpu_model=Tesla V100-SXM2-16GB; ...``; values that differ
    between its hosts are joined with '|'."""
    per_host = [fields(doc) for doc in docs.values()] or [fields(None)]
    parts = []
    for name in MATTERS:
        values = sorted({f[name] for f in per_host})
        parts.append(f"{name}={'|'.join(values)}")
    return "; ".join(parts)


def parse_key(key: str | None) -> dict[str, str]:
    """A run key back into {field: value}; every field unknown for None (a run stored before
    environments were, or one that left no worker result)."""
    if not key:
        return {name: UNKNOWN for name in MATTERS}
    out = {}
    for part in key.split("; "):
        name, _, value = part.partition("=")
        out[name] = value
    return out


def split_fields(keys: Iterable[str | None]) -> list[str]:
    """The fields in which these run keys differ, in MATTERS order."""
    parsed = [parse_key(k) for k in keys]
    return [name for name in MATTERS if len({p.get(name, UNKNOWN) for p in parsed}) > 1]


def host_differences(docs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Fields in which the hosts ({host: document}) differ: [{field, values: {value: [hosts]}}];
    an environment variable set on some hosts only differs too (``(unset)`` on the others)."""
    per_host = {host: fields(doc) for host, doc in docs.items()}
    names = list(HOST_FIELDS) + sorted({n for f in per_host.values() for n in f if n.startswith("env.")})
    found = []
    for name in names:
        values: dict[str, list[str]] = {}
        for host, f in per_host.items():
            values.setdefault(f.get(name, "(unset)"), []).append(host)
        if len(values) > 1:
            found.append({"field": name, "values": {v: sorted(h) for v, h in sorted(values.items())}})
    return found


def describe_differences(found: list[dict[str, Any]]) -> str:
    """One line per field: ``env.OMP_NUM_THREADS: 3 on node02; (unset) on node01``."""
    return "\n".join(
        f"{d['field']}: " + "; ".join(f"{v} on {', '.join(h)}" for v, h in d["values"].items()) for d in found
    )


def configuration_keys(rows: list[Mapping[str, Any]], same: Any) -> list[str | None]:
    """Each row's environment key for grouping. A run without one (failed before a worker
    reported) takes the key of its configuration's other runs of the same sweep when they all
    share one: its failure belongs to that environment. `same(row)`: the row's configuration
    without its environment."""
    known: dict[tuple, set[str]] = {}
    for row in rows:
        if row.get("environment_key"):
            known.setdefault((same(row), row.get("sweep_id")), set()).add(row["environment_key"])
    keys = []
    for row in rows:
        key = row.get("environment_key")
        if not key and row.get("status") != "ok":
            candidates = known.get((same(row), row.get("sweep_id")), set())
            key = next(iter(candidates)) if len(candidates) == 1 else None
        keys.append(key or None)
    return keys


def mark_splits(summaries: list[dict[str, Any]], same: Any) -> None:
    """Set ``environment_split`` on every summary, in place: the MATTERS fields in which its
    environment differs from those of the configurations that are the same but for it
    ([] when there are none)."""
    siblings: dict[Any, list[dict[str, Any]]] = {}
    for summary in summaries:
        siblings.setdefault(same(summary), []).append(summary)
    for group in siblings.values():
        split = split_fields(s.get("environment_key") for s in group) if len(group) > 1 else []
        for summary in group:
            summary["environment_split"] = split
