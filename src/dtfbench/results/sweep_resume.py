"""A sweep planned against the results store: the ``benchmark_plan`` action's call.

The plan (``dtfbench.plan.sweep``) validates and expands a sweep and never opens the store.
Here, with ``results_db``, the store is checked before the first run trains (a run whose
result cannot be written is lost: ``store.check_writable``), and what it holds of the sweep
is handed to the plan, which marks the runs recorded ok as done and refuses a resume that asks
for another configuration (unless ``sweep_extend``). Standard library only, like the plan: the
module form runs it as ``ansible.module_utils.dtfbench.results.sweep_resume``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..plan.sweep import PlanError, Recorded, build_plan, resume
from . import store


def recorded(db_path: str, sweep_id: str) -> Recorded:
    """What the store at `db_path` holds of `sweep_id`."""
    return Recorded(
        config=store.recorded_sweep_config(db_path, sweep_id),
        run_ids=frozenset(store.recorded_run_ids(db_path, sweep_id)),
        completed=frozenset(store.completed_run_ids(db_path, sweep_id)),
    )


def plan_sweep(request: Mapping[str, Any], hosts: list[Mapping[str, Any]]) -> dict[str, Any]:
    """``build_plan`` of `request` on `hosts`; with ``results_db`` in `request`, resumed from the
    store. PlanError (the request, or a store that cannot take the runs) before anything starts."""
    plan = build_plan(request, hosts)
    db = request.get("results_db")
    if not db:
        return plan
    try:
        store.check_writable(db, create=not request.get("check_only"))
    except store.StoreError as err:
        raise PlanError(str(err)) from None
    return resume(plan, recorded(db, plan["sweep_id"]), extend=bool(request.get("sweep_extend")))


def plan_from_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """``plan_sweep`` for the benchmark_plan options: ``hosts`` and the sweep request."""
    return plan_sweep({k: v for k, v in params.items() if k != "hosts"}, params["hosts"])
