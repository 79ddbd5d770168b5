# -*- coding: utf-8 -*-
"""Raw read throughput of a data directory: ``dtfbench.linux.read_throughput`` under its former name.

The code is on the shared floor (linux/), so that tf_host_run's check (the launch stage)
imports it without reaching into node/; this module re-exports it for the callers that import
``dtfbench.node.read_throughput``. Standard library only, the nodes' oldest Python (it ships
with the host code while host_run imports it from here).
"""

from __future__ import absolute_import

from ..linux.read_throughput import (
    BLOCK,
    CACHE_SETTINGS,
    DATASET_PATTERNS,
    dataset_files,
    main,
    measure,
    measured,
    page_cache,
    shards,
)

__all__ = [
    "BLOCK",
    "CACHE_SETTINGS",
    "DATASET_PATTERNS",
    "dataset_files",
    "main",
    "measure",
    "measured",
    "page_cache",
    "shards",
]
