"""num_ps=auto against the study's published tables: how often the narrowed PS set holds the
published best, and how many runs it saves.

For each of the CSCS tables (Piz Daint, p2.xlarge, p2.8xlarge; synthetic data, InceptionV3,
batch 64) and each GPU count N, the scaling model is fitted to the table's rows below N,
exactly as a ``num_ps=auto`` sweep fits the runs it measured at the smaller counts (but the
tables give only each count's best configuration, where a sweep would have measured every
configuration it kept), and ``adaptive_sweep.narrowed_ps_counts`` keeps, for each
variable_update, the best ``keep`` PS counts and their neighbours. The oracle: is the published
best configuration (its variable_update and num_ps) in the narrowed set?

Candidates at N are the study's PS counts, 1 to the number of workers (one worker per node:
the tables' layouts), for both variable updates; runs are counted at the study's 5
repetitions. Counts with one candidate, or before the model can be calibrated (the first two
counts), run the full set, as the sweep does. Deterministic: no timing, no randomness.

``python -m dtfbench narrowing_validation`` prints every count and the summary.
"""

from __future__ import annotations

import argparse
from typing import Any

from ..plan.sweep import default_num_ps
from ..report import reference
from . import adaptive as adaptive_sweep
from . import scaling_model
from . import validation as scaling_validation
from .scaling_model import Config

REPETITIONS = 5
UPDATES = adaptive_sweep.MODELLED_UPDATES


def _plan_ps(workers: int, update: str) -> list[int]:
    return default_num_ps(workers, update)


def oracle(
    keep: int = adaptive_sweep.DEFAULT_KEEP, systems=tuple(scaling_validation.TABLES), candidates: str = "study"
) -> list[dict[str, Any]]:
    """One row per (system, GPU count): the narrowed set, whether it holds the published best,
    and the runs of the full and narrowed sweeps at that count. `candidates`: 'study' (1 to
    the workers) or 'plan' (run-benchmark's default_num_ps, pruned above 8 workers)."""
    variables = scaling_model.Variables.of(scaling_validation.MODEL)
    result = []
    for system in systems:
        rows = scaling_validation.table(system)
        for target in rows:
            n, per_node, workers = target.config.gpus, target.config.gpus_per_node, target.config.nodes
            below = [o for o in rows if o.config.gpus < n]
            ps = {u: (list(range(1, workers + 1)) if candidates == "study" else _plan_ps(workers, u)) for u in UPDATES}
            full = {(u, p) for u in UPDATES for p in ps[u]}
            calibrated = any(o.config.gpus == 1 for o in below) and any(o.config.gpus > 1 for o in below)
            kept = set(full)
            if calibrated and workers > 1:
                fit = scaling_model.fit(below, scaling_validation.BATCH, variables)
                kept = set()
                for u in UPDATES:
                    configs = {p: Config(n, per_node, p, u) for p in ps[u]}
                    rates = {p: fit.images_per_sec(c) for p, c in configs.items()}
                    moved = {p: scaling_model.node_bytes(c, variables) for p, c in configs.items()}
                    kept |= {(u, p) for p in adaptive_sweep.narrowed_ps_counts(ps[u], rates, keep, moved)}
            best = (target.config.variable_update, target.config.num_ps)
            result.append(
                {
                    "system": system,
                    "gpus": n,
                    "published_best": best,
                    "narrowed": kept != full,
                    "kept_ps": {u: sorted(p for v, p in kept if v == u) for u in UPDATES},
                    "contains_best": best in kept,
                    "best_in_candidates": best in full,
                    "full_runs": len(full) * REPETITIONS,
                    "runs": len(kept) * REPETITIONS,
                }
            )
    return result


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    narrowed = [r for r in rows if r["narrowed"]]
    full = sum(r["full_runs"] for r in rows)
    done = sum(r["runs"] for r in rows)
    return {
        "counts": len(rows),
        "narrowed_counts": len(narrowed),
        "narrowed_hits": sum(1 for r in narrowed if r["contains_best"]),
        "hits": sum(1 for r in rows if r["contains_best"]),
        "full_runs": full,
        "runs": done,
        "saved_runs": full - done,
        "saved_share": (full - done) / full if full else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dtfbench narrowing_validation", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--keep",
        type=int,
        default=adaptive_sweep.DEFAULT_KEEP,
        help="best PS counts kept at each count, each with its neighbours",
    )
    args = parser.parse_args(argv)
    for candidates in ("study", "plan"):
        rows = oracle(args.keep, candidates=candidates)
        s = summary(rows)
        print(
            f"## Candidates: {'the study (1 to the workers)' if candidates == 'study' else 'default_num_ps'}, "
            f"keep={args.keep}\n"
        )
        print("| system | GPUs | published best | narrowed to (PS) | holds it | runs (full) |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            kept = (
                "; ".join(f"{u}: {','.join(map(str, ps))}" for u, ps in r["kept_ps"].items())
                if r["narrowed"]
                else "full set"
            )
            print(
                f"| {reference.display_name(r['system'])} | {r['gpus']} | {r['published_best'][0]}, "
                f"{r['published_best'][1]} PS | {kept} | {'yes' if r['contains_best'] else 'no'} | "
                f"{r['runs']} ({r['full_runs']}) |"
            )
        print(
            f"\nNarrowed {s['narrowed_counts']} of {s['counts']} counts; the narrowed set held the published "
            f"best in {s['narrowed_hits']} of {s['narrowed_counts']} ({s['hits']} of {s['counts']} counts in all); "
            f"runs {s['runs']} of {s['full_runs']} ({s['saved_share']:.0%} saved)\n"
        )
    return 0
