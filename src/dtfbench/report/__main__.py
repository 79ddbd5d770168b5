"""``python -m dtfbench.report``: the report of the results store."""

import sys

from .cli import main

sys.exit(main())
