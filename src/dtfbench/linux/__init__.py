"""What dtfbench reads from and writes to a Linux host: the /proc process table, atomic files, a data
directory's raw read throughput (read_throughput: tf_host_run's check, the Slurm jobs' read step).

Standard library only, for old targets' Python (the task core uses it; the oldest: pyproject.toml's
[tool.dtfbench.oldest-python]).
"""
