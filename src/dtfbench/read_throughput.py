"""``python -m dtfbench.read_throughput``: raw read throughput of a data directory (the code: ``dtfbench.node.read_throughput``)."""

import sys

from dtfbench.node.read_throughput import main

if __name__ == "__main__":
    sys.exit(main())
