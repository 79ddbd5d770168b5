"""``python -m dtfbench.forecast``: predicted scaling, the best PS count and a sweep's cost."""

import sys

from .predict import main

sys.exit(main())
