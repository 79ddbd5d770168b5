"""What dtfbench reads from and writes to a Linux host: the /proc process table, atomic files.

Standard library only, for old targets' Python (the task core uses it; the oldest: pyproject.toml's
[tool.dtfbench.oldest-python]).
"""
