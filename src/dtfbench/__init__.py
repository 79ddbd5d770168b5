"""dtfbench: distributed TensorFlow training benchmarks with tf_cnn_benchmarks semantics.

The subpackages follow a run's data, each with the runtime it needs (docs/design.md):

- ``plan``: the sweep, the cluster layout, the catalog, EC2 types (controller; stdlib only)
- ``launch``: the TF task core and the controller's interrupt watchdog (stdlib only)
- ``node``: node helpers: nvidia-smi, S3 sync (stdlib only)
- ``linux``: /proc, atomic files, a data directory's read throughput (stdlib only, old Pythons:
  pyproject.toml's [tool.dtfbench.oldest-python])
- ``workload``: the TensorFlow workload on the nodes
- ``results``: the results store and recording a run (controller; stdlib + sqlite3)
- ``report``: statistics, published references, tables and plots (matplotlib, scipy)
- ``forecast``: the scaling model, prices, the dollar guard (numpy, scipy)
- ``compat``: the standalone tf_cnn_benchmarks adapter (TF 1.x nodes)
- ``contract``: the words two stages share (a lost peer's failure) (stdlib only)
- ``adapters``: how Ansible calls the rest: the modules' main(), the controller actions' base class
- ``commands``: the front end beside ``__main__``: the commands that compose stages (the report with
  the forecast's section); it may import every stage, and no stage imports it

The commands are ``python -m dtfbench <command>`` (``__main__.py``, also the ``dtfbench``
console script): it imports only the chosen command's module. Nothing here is imported by
this ``__init__``, so Ansible can ship the stdlib-only subpackages (``module_utils/dtfbench/``)
without the rest.
"""

__version__ = "0.1.0"
