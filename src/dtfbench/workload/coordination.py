"""Start, finish and shutdown agreements between the workers and the PSs (graph mode).

- ready counter (on PS 0): every worker adds 1 and waits until all have, so no worker's
  measured steps start while others are still building graphs. Without it async per-worker
  rates come out about 2x low (the first workers run alone, then share the PS).
- done counter (on PS 0): with SyncReplicasOptimizer a step needs gradients from every
  worker, so a worker that stops early leaves the others hanging. A finished worker adds 1
  and keeps running unmeasured steps until the counter says every worker is done.
- done queues (one per PS, shared_name): each worker enqueues its index when it leaves;
  a PS exits 0 once it has one token from every worker (the study's PSs ran forever).
- stop flag (on PS 0, time-to-accuracy runs only): the chief, which evaluates, sets it once the
  held-out accuracy reached the target; every worker reads it with each step and stops.
"""

import time

from .errors import RunFailure

QUEUE_CAPACITY = -1  # unbounded; must be identical wherever the shared queue is declared


def done_queue(tf, ps_index):
    """The PS's done queue; declared identically by the PS and by every worker."""
    return tf.queue.FIFOQueue(
        QUEUE_CAPACITY,
        [tf.int32],
        shapes=[[]],
        shared_name=f"dtfbench_done_ps{ps_index}",
        name=f"dtfbench_done_ps{ps_index}",
    )


def ps_cpu(index):
    return f"/job:ps/task:{index}/device:CPU:0"


class Coordination:
    """The counters and the done tokens, built in the worker's graph."""

    def __init__(self, tf, num_ps, num_workers, task_index, stop_flag=False):
        self.num_workers = num_workers
        with tf.device(ps_cpu(0)), tf.name_scope("dtfbench_coordination"):
            self.ready = tf.compat.v1.Variable(0, trainable=False, dtype=tf.int32, name="ready_workers")
            self.done = tf.compat.v1.Variable(0, trainable=False, dtype=tf.int32, name="done_workers")
            self.mark_ready = self.ready.assign_add(1)
            self.mark_done = self.done.assign_add(1)
            self.read_ready = self.ready.read_value()
            self.read_done = self.done.read_value()
            # Only where a run has a target: every other run's graph (and PS bytes) stays as it was.
            self.stop = None
            if stop_flag:
                self.stop = tf.compat.v1.Variable(0, trainable=False, dtype=tf.int32, name="stop_training")
                self.request_stop = self.stop.assign(1)
                self.read_stop = self.stop.read_value()
        tokens = []
        for ps in range(num_ps):
            with tf.device(ps_cpu(ps)):
                tokens.append(done_queue(tf, ps).enqueue(tf.constant(task_index, tf.int32)))
        self.leave = tf.group(*tokens, name="dtfbench_leave")

    @property
    def variables(self):
        return [self.ready, self.done] + ([self.stop] if self.stop is not None else [])


def wait_for_count(read_count, target, timeout, what, poll=0.05, clock=time.monotonic):
    """Poll ``read_count()`` until it reaches ``target``; RunFailure after ``timeout`` s."""
    deadline = clock() + timeout
    while True:
        count = read_count()
        if count >= target:
            return count
        if clock() >= deadline:
            raise RunFailure(
                f"{what}: only {count} of {target} workers after {timeout:g} s; a worker is missing or stuck"
            )
        time.sleep(poll)
