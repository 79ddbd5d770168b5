"""The parameter-server process: serve variables, exit 0 once every worker is done.

The study's scripts called server.join() and left PSs running forever. Here the PS opens
a session to its own server (device_filters: itself only) and takes one token per worker
from its done queue. Meanwhile it watches the workers' ports: a worker whose port closes
before its token arrived died, and a worker that never comes up within --startup_timeout
never will; either ends the PS with exit 1, which in turn ends the surviving workers (their
next PS call fails) instead of leaving them hanging.
"""

import time

from .coordination import done_queue, ps_cpu
from .errors import RunFailure
from .liveness import CLOSED, OPEN, port_open, port_state

POLL_SECS = 0.25  # how often the done queue is looked at
PROBE_EVERY_SECS = 1.0  # how often each unfinished worker's port is probed
EXIT_GRACE_SECS = 10.0  # longest wait for finished workers to be gone before exiting
PROBE_TIMEOUT_SECS = 0.5
# A worker seen up whose probes get no answer this many times in a row (and none refused) is
# gone: one unanswered probe is no proof on a saturated link.
SILENT_PROBES = 3


def server_config(tf, config):
    proto = tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=config.num_intra_threads,
        inter_op_parallelism_threads=config.num_inter_threads,
    )
    proto.device_count["GPU"] = 0  # a PS never takes a GPU, whatever CUDA_VISIBLE_DEVICES says
    return proto


class DoneTokens:
    """The PS's view of its done queue.

    It polls the queue's size and dequeues only what is there: a blocking dequeue cut
    short by a timeout can leave a waiter behind that later swallows a token.
    """

    def __init__(self, tf, server, index, config):
        self._errors = tf.errors
        graph = tf.Graph()
        with graph.as_default(), tf.device(ps_cpu(index)):
            queue = done_queue(tf, index)
            self._size = queue.size()
            self._dequeue = queue.dequeue()
        graph.finalize()
        proto = server_config(tf, config)
        proto.device_filters.append(f"/job:ps/task:{index}")
        self._session = tf.compat.v1.Session(server.target, graph=graph, config=proto)

    def take_all(self):
        """Worker indices of the tokens now in the queue (possibly none)."""
        try:
            waiting = int(self._session.run(self._size))
            return [int(self._session.run(self._dequeue)) for _ in range(waiting)]
        except self._errors.OpError as exc:
            raise RunFailure(f"reading this PS's done queue failed: {type(exc).__name__}: {exc.message}") from None


def silent_after(state, silent):
    """A worker's unanswered probes in a row after one that found its port `state`, given
    `silent` before it: none once it answers; SILENT_PROBES at once when refused (nothing listens
    there any more); one more when no answer came (a saturated link, not yet a death). At
    SILENT_PROBES the PS takes the worker for not there."""
    if state == OPEN:
        return 0
    if state == CLOSED:
        return SILENT_PROBES
    return silent + 1


def went_away(workers, gone, unseen):
    """The PS's failure (message, peer) when the workers `gone` (seen up, their ports now
    closed) went away. Every worker gone since the last probe is named: a killed worker's peers
    end on their own soon after, and which went first cannot be told from closed ports. A worker
    that came up and was killed between two probes was never seen open (`unseen`, its port
    closed): with a seen one gone, it is named too."""
    named = sorted(set(gone) | set(unseen))
    text = " and ".join(
        f"worker {w} ({workers[w]}{', never seen open by this PS' if w in unseen else ''})" for w in named
    )
    return f"{text} went away before finishing; stopping this PS", " and ".join(f"worker {w}" for w in named)


def run(tf, config, cluster, report):
    index = cluster.task_index
    server = tf.distribute.Server(
        tf.train.ClusterSpec(cluster.as_dict()),
        job_name="ps",
        task_index=index,
        config=server_config(tf, config),
        start=True,
    )
    tokens = DoneTokens(tf, server, index, config)
    report.keepalive.extend([server, tokens])
    workers = dict(enumerate(cluster.worker_hosts))
    report.log(f"serving at {cluster.own_address}; waiting for {len(workers)} worker(s) to finish")
    started = last_token = time.monotonic()
    last_probe = 0.0
    first_seen = {}
    silent = {}  # worker: unanswered probes in a row
    finished = set()

    def drain():
        nonlocal last_token
        taken = tokens.take_all()
        if taken:
            finished.update(taken)
            last_token = time.monotonic()

    while len(finished) < len(workers):
        drain()
        if len(finished) == len(workers):
            break
        time.sleep(POLL_SECS)
        now = time.monotonic()
        if now - last_probe < PROBE_EVERY_SECS:
            continue
        last_probe = now
        gone, unseen = [], []
        for worker, address in workers.items():
            if worker in finished:
                continue
            state = port_state(address, timeout=PROBE_TIMEOUT_SECS)
            silent[worker] = silent_after(state, silent.get(worker, 0))
            if state == OPEN:
                first_seen.setdefault(worker, now)
                continue
            if worker in first_seen and silent[worker] < SILENT_PROBES:
                continue  # no answer yet, not refused: probed again in a second
            # A worker enqueues its token before it exits, so look at the queue again
            # before calling a closed port a death.
            drain()
            if worker in finished:
                continue
            if worker in first_seen:
                gone.append(worker)
                continue
            if now - started > config.startup_timeout:
                raise RunFailure(
                    f"worker {worker} ({address}) did not come up within {config.startup_timeout:g} s"
                    " (--startup_timeout); stopping this PS",
                    peer=f"worker {worker}",
                )
            unseen.append(worker)
        if gone:
            message, peer = went_away(workers, gone, unseen)
            raise RunFailure(message, peer=peer)
        if config.ps_idle_timeout and now - last_token > config.ps_idle_timeout:
            waiting = sorted(set(workers) - finished)
            raise RunFailure(
                f"no worker finished for {config.ps_idle_timeout:g} s (--ps_idle_timeout);"
                f" still waiting for worker(s) {waiting}; stopping this PS"
            )
    # The last token can reach the queue before the reply to the worker's enqueue has left
    # this process; exiting at once could fail that worker's last call. Let them go first.
    deadline = time.monotonic() + EXIT_GRACE_SECS
    still_up = list(workers.values())
    while still_up and time.monotonic() < deadline:
        still_up = [a for a in still_up if port_open(a, timeout=PROBE_TIMEOUT_SECS)]
        if still_up:
            time.sleep(POLL_SECS)
    report.log(f"all {len(workers)} worker(s) done; exiting")
    return 0
