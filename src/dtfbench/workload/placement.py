"""How variables are spread over the parameter servers (``--ps_placement``).

``replica_device_setter(ps_strategy=...)`` calls a strategy with each variable op and
expects the PS task index back. TF 1.x shipped two strategies: the default round-robin
and ``tf.contrib.training.GreedyLoadBalancingStrategy`` (place each variable on the PS
holding the fewest bytes so far), which the study compares in its §2.1.1. contrib is gone
in TF 2, so both are here, built on pure functions of variable sizes that tests can check
without TensorFlow.
"""


def round_robin_assign(sizes, num_ps):
    """PS index for each variable in creation order: 0, 1, ..., num_ps-1, 0, ..."""
    _check_num_ps(num_ps)
    return [i % num_ps for i in range(len(sizes))]


def greedy_assign(sizes, num_ps):
    """PS index for each variable: the PS with the fewest bytes so far (ties: lowest index)."""
    _check_num_ps(num_ps)
    loads = [0] * num_ps
    tasks = []
    for size in sizes:
        task = loads.index(min(loads))
        loads[task] += size
        tasks.append(task)
    return tasks


def bytes_per_ps(sizes, tasks, num_ps):
    """Total bytes each PS holds, given each variable's size and PS index."""
    loads = [0] * num_ps
    for size, task in zip(sizes, tasks):
        loads[task] += size
    return loads


def _check_num_ps(num_ps):
    if num_ps < 1:
        raise ValueError(f"num_ps must be at least 1, got {num_ps}")


class RoundRobinStrategy:
    """Callable op -> PS index, as replica_device_setter's default (kept for symmetry/logging)."""

    def __init__(self, num_ps):
        _check_num_ps(num_ps)
        self.num_ps = num_ps
        self._next = 0

    def __call__(self, op):
        task = self._next
        self._next = (self._next + 1) % self.num_ps
        return task


class GreedyLoadBalancingStrategy:
    """Callable op -> PS index placing each variable on the least-loaded PS (by bytes).

    Same rule as tf.contrib.training.GreedyLoadBalancingStrategy with byte_size_load_fn.
    ``load_fn`` maps an op to its size in bytes; the default reads the op's shape and dtype.
    """

    def __init__(self, num_ps, load_fn=None):
        _check_num_ps(num_ps)
        self.num_ps = num_ps
        self.loads = [0] * num_ps
        self._load_fn = load_fn or op_bytes

    def __call__(self, op):
        task = self.loads.index(min(self.loads))
        self.loads[task] += self._load_fn(op)
        return task


def op_bytes(op):
    """Bytes of the variable an op creates, from its 'shape' and 'dtype' attrs; 0 when unknown.

    replica_device_setter also asks the strategy about ops that are not plain variables
    (e.g. gradient accumulators already pinned to a PS); they carry no weight here.
    """
    try:
        shape = op.get_attr("shape")
        dtype = op.get_attr("dtype")
    except (ValueError, AttributeError):
        return 0
    dims = getattr(shape, "dim", None)
    if dims is not None:  # TensorShapeProto
        sizes = [d.size for d in dims]
    else:
        sizes = list(shape)
    count = 1
    for size in sizes:
        if size is None or size < 0:
            return 0
        count *= size
    return count * getattr(dtype, "size", 4)


def ps_task_of(device):
    """'/job:ps/task:1/device:CPU:0' -> 1; None for devices outside the ps job."""
    if "/job:ps" not in (device or ""):
        return None
    for part in device.split("/"):
        if part.startswith("task:"):
            return int(part[len("task:") :])
    return 0
