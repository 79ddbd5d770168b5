"""The benchmark workload (``python -m dtfbench train``): TensorFlow, on the nodes.

Flags and cluster checks are pure Python and run before TensorFlow is imported. Imports:
the standard library, numpy, TensorFlow/keras, this package, ``plan.catalog`` and
``node.nvidia_smi``.
"""
