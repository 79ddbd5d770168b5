"""``dtfbench report``: the report of the results store, with the forecast beside it.

The command composes the two last stages: the report (``report.cli``) and the forecast's section
(predicted beside measured, what an adaptive sweep skipped), which builds on the report. report/
takes that section from its caller as an ``appendix``, so that neither package imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..forecast.report_section import markdown
from ..report.analysis import ReportError, load_rows
from ..report.cli import main as report_main
from ..report.cli import table_text

# The options of sweep_table (plugins/action/sweep_table.py, library/sweep_table.py).
ARGUMENT_SPEC = {
    "results_db": {"type": "str", "required": True},
    "sweep_id": {"type": "str", "required": True},
}
ERRORS = (ReportError,)


def sweep_table(params: Mapping[str, Any]) -> dict[str, str]:
    """``dtfbench report table --db D --sweep-id S`` as a task's answer: ``table``, the same text."""
    rows = load_rows(params["results_db"], params["sweep_id"])
    return {"table": table_text(rows, str(params["results_db"]), appendix=markdown)}


def main(argv: list[str] | None = None) -> int:
    return report_main(argv, appendix=markdown)
