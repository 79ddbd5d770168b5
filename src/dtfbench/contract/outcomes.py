"""How a run's failures are worded where another stage reads them."""

# How a worker's failure says that it lost a peer (dtfbench.workload.reporting writes it at the
# end of its error line; dtfbench.results.record reads it): by its own words a consequence of
# another failure, so the recorded cause is the other one.
PEER_LOST = "(a peer died, is unreachable, or exceeded --step_timeout)"
