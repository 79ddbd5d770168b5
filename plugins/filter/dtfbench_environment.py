# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)
"""Filters over the nodes' environment documents (dtfbench.compat.environment), on the controller.

environment_documents: {host: its registered run of environment.py} -> {host: document}.
environment_differences: {host: document} -> the fields in which the hosts differ.
memory_warnings: {host: document}, the plan's runs -> a warning per configuration that will not
fit the nodes' memory (dtfbench.plan.memory).

Documented in environment_documents.yml, environment_differences.yml and memory_warnings.yml beside this file
(ansible-doc reads one document per filter from there).
"""

from __future__ import annotations

import json

from dtfbench.plan import memory
from dtfbench.results import environment_view


def environment_documents(answers):
    """{host: document} from each host's registered run of environment.py (its JSON stdout); a
    host whose run failed gets a document that says why (every field unknown)."""
    docs = {}
    for host, answer in answers.items():
        answer = answer if isinstance(answer, dict) else {}
        try:
            docs[host] = json.loads((answer.get("stdout") or "").strip().splitlines()[-1])
        except (ValueError, IndexError):
            why = (answer.get("stderr") or answer.get("msg") or "no output").strip()[-300:]
            docs[host] = {"schema": 1, "unknown": {"environment": f"environment.py failed on {host}: {why}"}}
    return docs


def environment_differences(docs):
    found = environment_view.host_differences(docs)
    for item in found:
        item["text"] = environment_view.describe_differences([item])
    return found


def memory_warnings(docs, runs):
    """The warnings of dtfbench.plan.memory.fit_warnings for the runs on these nodes."""
    nodes = [memory.node_memory(host, environment_view.interpret(doc)) for host, doc in docs.items()]
    return memory.fit_warnings(runs, [node for node in nodes if node is not None])


class FilterModule:
    def filters(self):
        return {
            "environment_documents": environment_documents,
            "environment_differences": environment_differences,
            "memory_warnings": memory_warnings,
        }
