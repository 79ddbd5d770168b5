# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)
"""Filters over the nodes' environment documents (dtfbench.compat.environment), on the controller.

environment_documents: {host: its registered run of environment.py} -> {host: document}.
environment_differences: {host: document} -> the fields in which the hosts differ.

Documented in environment_documents.yml and environment_differences.yml beside this file
(ansible-doc reads one document per filter from there).
"""

from __future__ import annotations

import json

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


class FilterModule:
    def filters(self):
        return {"environment_documents": environment_documents, "environment_differences": environment_differences}
