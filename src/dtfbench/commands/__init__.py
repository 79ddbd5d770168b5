"""The front end beside the dispatcher (``__main__.py``): the commands that compose stages.

A stage imports its own stage, an earlier one or the shared packages, never a later one
(tests/unit/test_import_boundaries.py, docs/design.md). What puts two stages together - the
report with the forecast's section after it - is wired here instead, so that no stage reaches
forward: this package may import every stage, and no stage (nor shared package) imports it.

- ``report``: ``dtfbench report`` and the sweep_table action: report/ with forecast/'s section
"""
