"""``python -m dtfbench.narrowing_validation``: num_ps=auto against the study's published tables (the code: ``dtfbench.forecast.narrowing``)."""

import sys

from dtfbench.forecast.narrowing import main

if __name__ == "__main__":
    sys.exit(main())
