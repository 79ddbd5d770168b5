"""How a run's failures are worded where another stage reads them."""

# How a worker's failure says that it lost a peer (dtfbench.workload.reporting writes it at the
# end of its error line; dtfbench.results.record reads it): by its own words a consequence of
# another failure, so the recorded cause is the other one.
PEER_LOST = "(a peer died, is unreachable, or exceeded --step_timeout)"


def busy_port(busy, host=None):
    """A port that something else holds, worded once for the host's check (``busy``: its entry,
    with job, task_index, address, port and pids) and for the run's recorded failure, which
    names the inventory ``host`` before the address."""
    where = "%s (%s)" % (host, busy["address"]) if host else busy["address"]
    if busy.get("claimed_by"):
        # Another run's tasks hold it from their start (dtfbench.launch.port_claim).
        waited = " after a wait of %d s" % busy["waited"] if busy.get("waited") else ""
        return (
            "port %d on %s, wanted by %s %d, is held by %s, of another sweep on this host%s: wait for "
            "that sweep to end (or stop it), or give this sweep other ports"
            % (busy["port"], where, busy["job"], busy["task_index"], busy["claimed_by"], waited)
        )
    pids = " (listening pids: %s)" % busy["pids"] if busy.get("pids") else ""
    return "port %d on %s, wanted by %s %d, is already in use%s" % (
        busy["port"],
        where,
        busy["job"],
        busy["task_index"],
        pids,
    )


# How a run whose loss stopped being a finite number is recorded (dtfbench.workload.reporting
# writes it first in the worker's reason; the report and the store's readers look for it).
DIVERGED = "diverged"


def diverged(loss, what):
    """The reason of a run whose loss became `loss` (nan or inf) at `what` ('step 3')."""
    return "%s: the loss became %s at %s; lower learning_rate, or warm it up (lr_scaling with warmup_epochs)" % (
        DIVERGED,
        loss,
        what,
    )
