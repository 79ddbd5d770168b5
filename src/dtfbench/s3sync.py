"""``python -m dtfbench.s3sync``: download an S3 prefix into a local directory (the code: ``dtfbench.node.s3sync``)."""

import sys

from dtfbench.node.s3sync import main

if __name__ == "__main__":
    sys.exit(main())
