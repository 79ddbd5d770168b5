"""``dtfbench report``: the report of the results store, with the forecast beside it.

The command composes the two last stages: the report (``cli``) and the forecast's section
(predicted beside measured, what an adaptive sweep skipped), which builds on the report. It is
the one place where report/ reaches forward into forecast/ (tests/unit/test_import_boundaries.py
names it), so that neither package imports the other.
"""

from __future__ import annotations

from ..forecast.report_section import markdown
from .cli import main as report_main


def main(argv: list[str] | None = None) -> int:
    return report_main(argv, appendix=markdown)
