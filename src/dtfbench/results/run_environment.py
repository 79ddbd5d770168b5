"""A run's environment for the store: its hosts' documents and the key of the fields that matter.

Recording a run (``dtfbench.results.record``) calls ``columns``: each host's environment is the
document of its first worker that sent one (a host's workers share it but for CUDA_VISIBLE_DEVICES), with
the inventory's instance type where the node could not know it, read on the controller
(``dtfbench.results.environment_view.interpret``: nvidia-smi's answers parsed). A run without any
(it failed before a worker reported, or was recorded by an older dtfbench) stores NULL,
which the report shows as ``unknown``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import environment_view


def host_documents(hosts: Mapping[str, Any], instance_types: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """{host: interpreted document} from the hosts' view of a run (the recorded run's ``hosts``)."""
    docs: dict[str, Any] = {}
    for host, outcome in sorted((hosts or {}).items()):
        for worker in (outcome or {}).get("workers") or []:
            result = worker.get("result") if isinstance(worker, Mapping) else None
            document = result.get("environment") if isinstance(result, Mapping) else None
            if isinstance(document, Mapping) and host not in docs:
                docs[host] = dict(document)
    for host, document in docs.items():
        known = (instance_types or {}).get(host)
        if known and document.get("instance_type") in (None, environment_view.UNKNOWN):
            document["instance_type"] = known
            document["unknown"] = {k: v for k, v in (document.get("unknown") or {}).items() if k != "instance_type"}
        docs[host] = environment_view.interpret(document)
    return docs


def columns(hosts: Mapping[str, Any], instance_types: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The store's ``environment`` ({host: document}) and ``environment_key`` columns."""
    docs = host_documents(hosts, instance_types)
    if not docs:
        return {"environment": None, "environment_key": None}
    return {"environment": docs, "environment_key": environment_view.run_key(docs)}
