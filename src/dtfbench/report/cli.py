"""Reports from the results store: the table printed after a sweep, and the full report.

    python -m dtfbench report table --db results/results.sqlite [--sweep-id ID]
    python -m dtfbench report build --db results/results.sqlite --output results/report \\
        [--sweep-id ID] [--reference {none,published}] [--formats png,svg] \\
        [--system-map OURS=REFERENCE ...]

What ``build`` writes: ``dtfbench.report.build``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..results import store
from . import reference as reference_data
from .analysis import REFERENCE_CHOICES, ReportError, load_rows, summarise
from .build import DEFAULT_OUTPUT, Appendix, build
from .tables import failed_runs, format_table

# ---------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------


def _formats(text: str) -> list[str]:
    if text.strip().lower() in ("", "none"):
        return []
    return [f.strip().lower() for f in text.split(",") if f.strip()]


def table_text(rows: list[dict], db: str, appendix: Appendix | None = None) -> str:
    """The per-configuration table of `rows`, then what `appendix(rows, db)` adds after a blank line."""
    text = format_table(summarise(rows))
    extra = appendix(rows, db) if appendix else ""
    return text + ("\n\n" + extra.rstrip() if extra else "")


def main(argv: list[str] | None = None, appendix: Appendix | None = None) -> int:
    """The command; `appendix(rows, db)`: Markdown after the table and at the end of the report's
    index (`dtfbench report`, commands/report.py, passes the forecast's predicted section)."""
    try:
        code = _main(argv, appendix)
        sys.stdout.flush()  # here, not at exit, so that a closed pipe is caught below
    except BrokenPipeError:
        # `report table | head`: the reader has what it wanted. Quiet, as the Python docs
        # advise: stdout to /dev/null, so that the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return code


def _main(argv: list[str] | None, appendix: Appendix | None) -> int:
    parser = argparse.ArgumentParser(prog="dtfbench report", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    table = sub.add_parser("table", help="print the per-configuration table")
    table.add_argument("--db", default=store.DEFAULT_DB)
    table.add_argument("--sweep-id", help="only the runs of this sweep (default: every run)")
    make = sub.add_parser("build", help="write tables, plots and an index under --output")
    make.add_argument("--db", default=store.DEFAULT_DB)
    make.add_argument("--output", default=DEFAULT_OUTPUT, help=f"report folder (default {DEFAULT_OUTPUT})")
    make.add_argument("--sweep-id", help="only the runs of this sweep (default: every run)")
    make.add_argument(
        "--reference",
        choices=REFERENCE_CHOICES,
        default="published",
        help="put the published numbers beside ours (default) or not",
    )
    make.add_argument(
        "--formats",
        default="png,svg",
        type=_formats,
        help="plot formats, comma list of png, svg; 'none' for no plots (default png,svg)",
    )
    make.add_argument(
        "--system-map",
        action="append",
        default=[],
        metavar="OURS=REFERENCE",
        help="map one of our system names to a published one (repeatable, or a comma list; "
        "OURS= maps it to nothing). Default: "
        + ", ".join(f"{k}={v}" for k, v in reference_data.DEFAULT_SYSTEM_MAP.items()),
    )
    args = parser.parse_args(argv)
    try:
        rows = load_rows(args.db, args.sweep_id)
        if args.command == "table":
            print(table_text(rows, str(args.db), appendix))
            return 0
        try:
            system_map = reference_data.parse_system_map(args.system_map)
        except reference_data.ReferenceDataError as err:
            raise ReportError(str(err)) from None
        result = build(
            rows,
            args.output,
            reference=args.reference,
            formats=args.formats,
            system_map=system_map,
            db=str(args.db),
            sweep_id=args.sweep_id,
            appendix=appendix,
        )
    except ReportError as err:
        print(f"dtfbench report: error: {err}", file=sys.stderr)
        return 2
    best = result.analysis.best
    print(f"report: {result.index.resolve()}")
    print(
        f"  {len(result.analysis.rows)} runs, {len(result.analysis.summaries)} configurations, "
        f"{sum(1 for r in best if r['status'] == 'ok')} best of {len(best)} (system, data, GPUs) points, "
        f"{len(failed_runs(result.analysis.rows))} failed runs"
    )
    if result.changed or result.removed:
        for rel in result.changed:
            print(f"  wrote {rel}")
        for rel in result.removed:
            print(f"  removed {rel}")
        print(
            f"report updated: {len(result.changed)} of {len(result.files)} files written, {len(result.removed)} removed"
        )
    else:
        print(f"report unchanged: {len(result.files)} files")
    return 0
