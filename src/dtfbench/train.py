"""``python -m dtfbench.train``: the benchmark workload (the code: ``dtfbench.workload.train``)."""

import sys

from dtfbench.workload.train import main

if __name__ == "__main__":
    sys.exit(main())
