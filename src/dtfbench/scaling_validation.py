"""``python -m dtfbench.scaling_validation``: the scaling model against the study's published tables (the code: ``dtfbench.forecast.validation``)."""

import sys

from dtfbench.forecast.validation import main

if __name__ == "__main__":
    sys.exit(main())
