"""``python -m dtfbench.adaptive_sweep``: run-benchmark's step of a num_ps=auto / stop_below_efficiency sweep (the code: ``dtfbench.forecast.adaptive``)."""

import sys

from dtfbench.forecast.adaptive import main

if __name__ == "__main__":
    sys.exit(main())
