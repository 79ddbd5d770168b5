"""The published numbers the report compares against (package data in ``dtfbench/report/published_data/``).

``published()`` returns the rows of ``published_results.csv`` (the CSCS report's Tables 1-3
and Google's 2017 benchmark page as quoted by the study's notebook) in the shape of the
store's summaries: system, gpus, data ('synthetic'|'real'), images_per_sec, num_ps,
variable_update, source, plus model, batch_size (per GPU), gpu, gpus_per_node, nodes,
tf_version, note and status 'ok'. ``published_best()`` keeps one row per (system, model,
batch_size, data, gpus), the CSCS tables before Google's page, with speedup and efficiency
computed as for our own numbers.

Our system names (the profiles in ``playbooks/vars/systems/``: 'local', 'testbed',
'aws-p2.xlarge', 'daint', ...) are not the reference's ('piz-daint', 'aws-p2.xlarge',
'aws-p2.8xlarge', 'nvidia-dgx-1'): ``DEFAULT_SYSTEM_MAP`` says which of ours stands for
which of theirs, and ``parse_system_map`` lets the command line change it
(``--system-map testbed=aws-p2.xlarge``, ``--system-map daint=`` to compare nothing).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from . import stats

PUBLISHED_FILE = "published_results.csv"
THEANO_MPI_FILE = "theano_mpi_times.csv"

# Which source wins where two publish the same (system, gpus, data): the study's own tables.
SOURCE_PRIORITY = ("cscs-2017-table1", "cscs-2017-table2", "cscs-2017-table3", "google-2017")

# Our system name -> the reference's. Names absent here (local, testbed) compare with nothing.
DEFAULT_SYSTEM_MAP: dict[str, str] = {
    "daint": "piz-daint",
    "piz-daint": "piz-daint",
    "aws-p2.xlarge": "aws-p2.xlarge",
    "p2.xlarge": "aws-p2.xlarge",
    "aws-p2.8xlarge": "aws-p2.8xlarge",
    "p2.8xlarge": "aws-p2.8xlarge",
    "dgx-1": "nvidia-dgx-1",
    "nvidia-dgx-1": "nvidia-dgx-1",
}
# Human names for plots and tables (the notebook's).
DISPLAY_NAMES = {
    "piz-daint": "Piz Daint",
    "aws-p2.xlarge": "p2.xlarge",
    "aws-p2.8xlarge": "p2.8xlarge",
    "nvidia-dgx-1": "NVIDIA DGX-1",
}


class ReferenceDataError(ValueError):
    """A system mapping that names no reference system, or malformed reference data."""


def _read(name: str) -> str:
    return (resources.files("dtfbench.report") / "published_data" / name).read_text(encoding="utf-8")


def _int_or_none(text: str) -> int | None:
    text = (text or "").strip()
    return int(text) if text else None


def _bool(text: str) -> bool:
    value = (text or "").strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise ReferenceDataError(f"real_data must be True or False, not {text!r}")


def published(sources: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Every published row (optionally only those of `sources`), in file order."""
    wanted = set(sources) if sources is not None else None
    rows = []
    for raw in csv.DictReader(io.StringIO(_read(PUBLISHED_FILE))):
        if wanted is not None and raw["source"] not in wanted:
            continue
        rows.append(
            {
                "source": raw["source"],
                "system": raw["system"],
                "gpu": raw["gpu"],
                "gpus_per_node": _int_or_none(raw["gpus_per_node"]),
                "nodes": _int_or_none(raw["nodes"]),
                "gpus": int(raw["gpus"]),
                "num_ps": _int_or_none(raw["num_ps"]),
                "variable_update": raw["variable_update"].strip() or None,
                "data": "real" if _bool(raw["real_data"]) else "synthetic",
                "model": raw["model"],
                "batch_size": int(raw["batch_size_per_gpu"]),
                "tf_version": raw["tf_version"],
                "images_per_sec": float(raw["images_per_sec"]),
                "note": raw["note"],
                "status": "ok",
            }
        )
    return rows


def published_best(rows: Iterable[Mapping[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per (system, model, batch_size, data, gpus): the highest-priority source's.

    Ordered like ``stats.best_configurations``; speedup and efficiency are set against the
    1-GPU row of the same system, model, batch size and data.
    """
    rows = published() if rows is None else [dict(r) for r in rows]
    rank = {source: i for i, source in enumerate(SOURCE_PRIORITY)}
    chosen: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = tuple(r.get(k) for k in stats.BEST_KEYS)
        held = chosen.get(key)
        if held is None or rank.get(r["source"], len(rank)) < rank.get(held["source"], len(rank)):
            chosen[key] = dict(r)
    order = {system: i for i, system in enumerate(dict.fromkeys(r["system"] for r in rows))}
    best = sorted(
        chosen.values(),
        key=lambda r: (order[r["system"]], r["model"], r["batch_size"], r["data"] != "synthetic", r["gpus"]),
    )
    stats.add_speedup(best)
    return best


def theano_mpi() -> list[dict[str, Any]]:
    """The Theano-MPI notebook's times: source, model, batch_size, gpus, seconds, images_per_sec."""
    return [
        {
            "source": raw["source"],
            "model": raw["model"],
            "batch_size": int(raw["batch_size_per_gpu"]),
            "gpus": int(raw["gpus"]),
            "seconds_per_5120_images": float(raw["seconds_per_5120_images"]),
            "images_per_sec": float(raw["images_per_sec"]),
        }
        for raw in csv.DictReader(io.StringIO(_read(THEANO_MPI_FILE)))
    ]


def reference_systems(rows: Iterable[Mapping[str, Any]] | None = None) -> list[str]:
    """The system names the reference data knows, in file order."""
    return list(dict.fromkeys(r["system"] for r in (published() if rows is None else rows)))


def parse_system_map(
    specs: Iterable[str] = (), base: Mapping[str, str] | None = None, known: Iterable[str] | None = None
) -> dict[str, str]:
    """DEFAULT_SYSTEM_MAP (or `base`) changed by 'ours=theirs' items (comma lists allowed).

    'ours=' (or 'ours=none') removes a mapping. A target that is no reference system is a
    ReferenceDataError naming the known ones.
    """
    mapping = dict(DEFAULT_SYSTEM_MAP if base is None else base)
    known_systems = list(known) if known is not None else reference_systems()
    for spec in specs:
        for item in str(spec).split(","):
            item = item.strip()
            if not item:
                continue
            ours, sep, theirs = item.partition("=")
            ours, theirs = ours.strip(), theirs.strip()
            if not sep or not ours:
                raise ReferenceDataError(
                    f"system map item {item!r} is not OURS=REFERENCE "
                    f"(e.g. testbed=aws-p2.xlarge; daint= maps daint to nothing)"
                )
            if theirs.lower() in ("", "none", "-"):
                mapping.pop(ours, None)
                continue
            if theirs not in known_systems:
                raise ReferenceDataError(
                    f"system map {ours}={theirs}: {theirs!r} is not a reference system; "
                    f"known: {', '.join(known_systems)}"
                )
            mapping[ours] = theirs
    return mapping


def display_name(reference_system: str) -> str:
    return DISPLAY_NAMES.get(reference_system, reference_system)


class Matcher:
    """Finds the published best row for one of our rows: same mapped system, gpus and data."""

    def __init__(self, best_rows: Iterable[Mapping[str, Any]], system_map: Mapping[str, str]):
        self.system_map = dict(system_map)
        self._rows = {(r["system"], r["gpus"], r["data"]): r for r in best_rows}
        self.by_system: dict[str, list[Mapping[str, Any]]] = {}
        for r in self._rows.values():
            self.by_system.setdefault(r["system"], []).append(r)

    def system_for(self, ours: str) -> str | None:
        """The reference system `ours` maps to, when it has published rows."""
        theirs = self.system_map.get(ours)
        return theirs if theirs in self.by_system else None

    def find(self, system: str, gpus: Any, data: Any) -> Mapping[str, Any] | None:
        theirs = self.system_for(system)
        if theirs is None:
            return None
        return self._rows.get((theirs, gpus, data))

    def rows_for(self, system: str) -> list[Mapping[str, Any]]:
        theirs = self.system_for(system)
        return list(self.by_system.get(theirs, [])) if theirs else []
