"""What dtfbench reads from and writes to a Linux host: the /proc process table, atomic files.

Standard library only and Python 2.7/3.5-compatible: the task core uses it on old targets.
"""
