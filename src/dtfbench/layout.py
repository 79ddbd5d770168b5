"""``python -m dtfbench.layout``: the cluster layout as JSON (the code: ``dtfbench.plan.layout``)."""

import sys

from dtfbench.plan.layout import main

if __name__ == "__main__":
    sys.exit(main())
