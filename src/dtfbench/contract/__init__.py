"""What two stages both read: words one writes and the other looks for. Standard library only.

Each stage imports this package instead of the other: the TF process (``workload``) writes a
lost peer's failure and ``results`` recognises it, without the workload loading the store.
"""
