"""dtfbench: distributed TensorFlow training benchmarks with tf_cnn_benchmarks semantics.

The package holds the workload (``python -m dtfbench.train``), the one implementation of
the cluster layout (``dtfbench.layout``), the results store and the reports.
"""

__version__ = "0.1.0"
