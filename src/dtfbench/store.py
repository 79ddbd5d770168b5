"""``python -m dtfbench.store``: inspect, check and export the results store (the code: ``dtfbench.results.store``)."""

import sys

from dtfbench.results.store import main

if __name__ == "__main__":
    sys.exit(main())
