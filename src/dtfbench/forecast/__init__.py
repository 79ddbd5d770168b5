"""Plan before you pay (``python -m dtfbench forecast``): the scaling model, prices, the dollar guard.

Controller; numpy and scipy. Reads the store (``results``) and the published references
(``report.reference``).
"""
