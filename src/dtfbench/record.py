"""``python -m dtfbench.record``: record one finished run in the store (JSON on stdin) (the code: ``dtfbench.results.record``)."""

import sys

from dtfbench.results.record import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
