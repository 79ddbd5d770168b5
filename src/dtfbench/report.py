"""Reports from the results store: the per-configuration table printed after a sweep.

A configuration is everything that defines a run except its repetition; its figure is the
mean over the repetitions that succeeded. Speedup and efficiency are taken against the
1-GPU (one worker) configuration of the same system, model, batch size and data, as in the
study: speedup = images/sec(N) / images/sec(1), efficiency = speedup / N.

    python -m dtfbench.report table --db results/results.sqlite [--sweep-id ID]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any, Iterable

from dtfbench import store

CONFIG_KEYS = ("system", "model", "batch_size", "data", "gpus", "num_workers", "num_ps",
               "variable_update")
BASELINE_KEYS = ("system", "model", "batch_size", "data")


def summarise(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary per configuration, in the order configurations first appear."""
    groups: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row.get(k) for k in CONFIG_KEYS), []).append(row)
    summaries = []
    for key, members in groups.items():
        ok = [r for r in members if r["status"] == "ok" and r.get("images_per_sec") is not None]
        totals = [float(r["images_per_sec"]) for r in ok]
        per_worker = [float(v) for r in ok for v in (r.get("images_per_sec_per_worker") or [])]
        summary = dict(zip(CONFIG_KEYS, key))
        summary.update(
            runs=len(members),
            failed=len(members) - len(ok),
            reasons=sorted({r["reason"] for r in members if r["status"] == "failed" and r.get("reason")}),
            images_per_sec=statistics.fmean(totals) if totals else None,
            images_per_sec_min=min(totals) if totals else None,
            images_per_sec_max=max(totals) if totals else None,
            images_per_sec_per_worker=statistics.fmean(per_worker) if per_worker else None,
        )
        summaries.append(summary)
    _add_speedup(summaries)
    return summaries


def _add_speedup(summaries: list[dict[str, Any]]) -> None:
    baselines: dict[tuple, float] = {}
    for s in summaries:
        if s["gpus"] == 1 and s["images_per_sec"]:
            key = tuple(s[k] for k in BASELINE_KEYS)
            baselines[key] = max(baselines.get(key, 0.0), s["images_per_sec"])  # best 1-GPU config
    for s in summaries:
        base = baselines.get(tuple(s[k] for k in BASELINE_KEYS))
        if base and s["images_per_sec"]:
            s["speedup"] = s["images_per_sec"] / base
            s["efficiency"] = s["speedup"] / s["gpus"]
        else:
            s["speedup"] = s["efficiency"] = None


def _fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def format_table(summaries: list[dict[str, Any]]) -> str:
    header = ("system", "model", "data", "gpus", "workers", "ps", "variable_update", "runs",
              "img/s/worker", "img/s total", "min", "max", "speedup", "efficiency")
    lines = [header]
    for s in summaries:
        runs = f"{s['runs'] - s['failed']}/{s['runs']}"
        lines.append((
            str(s["system"]), str(s["model"]), str(s["data"]), str(s["gpus"]),
            _fmt(s["num_workers"], "d"), str(s["num_ps"]), str(s["variable_update"]), runs,
            _fmt(s["images_per_sec_per_worker"], ".2f"), _fmt(s["images_per_sec"], ".2f"),
            _fmt(s["images_per_sec_min"], ".2f"), _fmt(s["images_per_sec_max"], ".2f"),
            _fmt(s["speedup"], ".2f"), _fmt(s["efficiency"], ".4f"),
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(cell.rjust(w) if i >= 3 else cell.ljust(w) for i, (cell, w) in enumerate(zip(line, widths)))
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    failures = [f"  {s['gpus']} GPUs, {s['num_ps']} PS, {s['variable_update']}: {reason}"
                for s in summaries for reason in s["reasons"]]
    if failures:
        text += ["", "failed runs:"] + failures
    return "\n".join(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dtfbench.report", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="print the per-configuration table")
    table.add_argument("--db", default=store.DEFAULT_DB)
    table.add_argument("--sweep-id", help="only the runs of this sweep (default: every run)")
    args = parser.parse_args(argv)
    if not Path(args.db).exists():
        print(f"dtfbench.report: error: no results store at {args.db}; run the benchmark first "
              f"or pass --db", file=sys.stderr)
        return 2
    conn = store.connect(args.db)
    rows = store.runs(conn, "sweep_id = ?", (args.sweep_id,)) if args.sweep_id else store.runs(conn)
    if not rows:
        print(f"dtfbench.report: error: no runs in {args.db}"
              + (f" for sweep {args.sweep_id}" if args.sweep_id else ""), file=sys.stderr)
        return 2
    print(format_table(summarise(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
