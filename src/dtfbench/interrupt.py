"""``python -m dtfbench.interrupt``: the controller's watchdog for an ended ansible-playbook (the code: ``dtfbench.launch.interrupt``)."""

import sys

from dtfbench.launch.interrupt import main

if __name__ == "__main__":
    sys.exit(main())
