"""The report of the results store (``python -m dtfbench report``). Controller; matplotlib, scipy.

stats (the study's statistics), reference (published numbers), analysis, tables, plotspec,
plots (matplotlib), build (the report folder), cli.
"""
