"""``python -m dtfbench.tfrecords``: generate a small ImageNet-format TFRecord set (the code: ``dtfbench.workload.tfrecords``)."""

import sys

from dtfbench.workload.tfrecords import main

if __name__ == "__main__":
    sys.exit(main())
