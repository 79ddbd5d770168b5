"""The graph-mode ``--variable_update`` modes: where variables live and how gradients meet them.

tf_cnn_benchmarks' VariableMgr classes, rebuilt on tf.compat.v1 and the cnn_models networks:

- parameter_server: one copy of every variable, on the PSs (replica_device_setter with the
  --ps_placement strategy). Every tower reads them from the PS; the towers' gradients are
  summed next to each variable (so on the PS) and applied there.
- distributed_replicated: the global copy lives on the PSs; every tower of the worker has
  its own local copy. The towers' gradients are averaged on the worker's
  local_parameter_device, only that one aggregate goes to the PS, and after the update the
  worker reads the new values once and refreshes its towers' copies. Inter-node traffic is
  per worker, not per GPU (the study's p2.8xlarge results).
- independent: one process, every tower trains its own copy; no communication at all.

Sync (--cross_replica_sync) wraps the optimizer in SyncReplicasOptimizer, aggregating
one gradient per worker per step; async applies each worker's gradient as it comes.
"""

from dataclasses import dataclass, field

from .cnn_models import build_network, weight_decay_loss


@dataclass
class Tower:
    device: str
    loss: object
    grads: list
    params: list
    update_ops: list = field(default_factory=list)  # batch-norm moving statistics


@dataclass
class TrainGraph:
    train_op: object
    loss: object
    sync_optimizer: object = None  # SyncReplicasOptimizer when sync
    local_init_ops: list = field(default_factory=list)  # run after the shared variables exist
    release_tokens_op: object = None  # sync: unblocks workers waiting for a token at shutdown


def make_optimizer(tf, config, rate):
    """--optimizer at `rate` (a number, a tensor or a variable: dtfbench.workload.learning_rate)."""
    if config.optimizer == "momentum":
        return tf.compat.v1.train.MomentumOptimizer(rate, config.momentum)
    return tf.compat.v1.train.GradientDescentOptimizer(rate)


def _trainable_under(tf, scope):
    return tf.compat.v1.trainable_variables(scope=f"^{scope}/")


def tower_forward(tf, config, images, labels, device, index, num_towers, scope, reuse=False):
    """Loss and gradients of one tower, built on ``device`` (a device string or a device setter).

    The loss is tf_cnn_benchmarks' total loss: the cross-entropy, and on the last tower the
    weight decay times the towers (the towers' averaged gradients then decay each variable
    by --weight_decay once, as tf_cnn_benchmarks' do).

    The network's variables are made (or, with ``reuse``, found) under ``scope``. They are
    reference variables, as tf_cnn_benchmarks' (use_resource_vars=False): applying SGD to a
    resource variable whose value a step still reads copies it first (ResourceApplyGradientDescent
    took 11.6% of an AlexNet step, ApplyGradientDescent 3.7%: docs/workload_speed.md).
    """
    with tf.compat.v1.device(device), tf.compat.v1.variable_scope(scope, reuse=reuse, use_resource=False):
        network = build_network(tf, config.model, images, config.num_classes, config.data_format)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=network.logits))
        params = _trainable_under(tf, scope)
        decay = weight_decay_loss(tf, params, config.weight_decay) if index == num_towers - 1 else None
        if decay is not None:
            loss += num_towers * decay
        # Gated: an op's gradients are all computed before any leaves it. Ungated, a reference variable's
        # update (in place, nothing waiting for the rest of the step) could run before the backward pass
        # through its own layer had read it, and the layers below took gradients of a mix of old and new
        # weights: at momentum 0.01 LeNet died or diverged from 5 of 8 seeds (docs/accuracy.md).
        grads = tf.compat.v1.gradients(loss, params, colocate_gradients_with_ops=True, gate_gradients=True)
    return Tower(str(device), loss, grads, params, network.update_ops)


def _check_grads(grads, params):
    missing = [p.name for g, p in zip(grads, params) if g is None]
    if missing:
        raise ValueError(f"no gradient for {missing[:3]}: the model has unused trainable variables")


def _average(tf, grads):
    return grads[0] if len(grads) == 1 else tf.math.add_n(grads) / float(len(grads))


def _wrap_sync(tf, optimizer, config, num_workers):
    if not config.cross_replica_sync:
        return optimizer, None
    sync = tf.compat.v1.train.SyncReplicasOptimizer(
        optimizer, replicas_to_aggregate=num_workers, total_num_replicas=num_workers
    )
    return sync, sync


def _finish(tf, train_op, towers, sync, num_workers, extra_local_init=()):
    # tf_cnn_benchmarks runs the first tower's update ops only.
    train_op = tf.group(train_op, *towers[0].update_ops, name="train_op")
    loss = _average(tf, [t.loss for t in towers])
    release = sync.get_init_tokens_op(num_workers) if sync is not None else None
    return TrainGraph(train_op, loss, sync, list(extra_local_init), release)


def build_parameter_server(tf, config, device_setter, towers_inputs, global_step, num_workers, rate):
    """parameter_server: variables on the PSs, gradients summed next to the variables.

    ``device_setter(tower_device)`` places variables on the PSs and the other ops on the tower.
    """
    towers = [
        tower_forward(tf, config, images, labels, device_setter(device), k, len(towers_inputs), "v", reuse=k > 0)
        for k, (device, images, labels) in enumerate(towers_inputs)
    ]
    params = towers[0].params
    for tower in towers:
        _check_grads(tower.grads, params)
    aggregated = []
    for i, param in enumerate(params):
        with tf.device(param.device):  # the PS holding the variable
            aggregated.append(_average(tf, [t.grads[i] for t in towers]))
    optimizer, sync = _wrap_sync(tf, make_optimizer(tf, config, rate), config, num_workers)
    apply = optimizer.apply_gradients(list(zip(aggregated, params)), global_step=global_step)
    return _finish(tf, apply, towers, sync, num_workers)


def build_distributed_replicated(
    tf, config, device_setter, towers_inputs, global_step, num_workers, local_parameter_device, rate
):
    """distributed_replicated: local copies per tower, one aggregated update per worker."""
    towers = []
    for k, (device, images, labels) in enumerate(towers_inputs):
        towers.append(tower_forward(tf, config, images, labels, device, k, len(towers_inputs), f"v{k}"))
        _check_grads(towers[-1].grads, towers[-1].params)
    # The global copy: the same network's variables on the PSs (its forward ops never run).
    first_device, first_images, _ = towers_inputs[0]
    with tf.compat.v1.device(device_setter(first_device)), tf.compat.v1.variable_scope("global", use_resource=False):
        build_network(tf, config.model, first_images, config.num_classes, config.data_format)
    global_params = _trainable_under(tf, "global")
    aggregated = []
    with tf.device(local_parameter_device), tf.name_scope("aggregate_towers"):
        for i in range(len(global_params)):
            aggregated.append(_average(tf, [t.grads[i] for t in towers]))
    optimizer, sync = _wrap_sync(tf, make_optimizer(tf, config, rate), config, num_workers)
    apply = optimizer.apply_gradients(list(zip(aggregated, global_params)), global_step=global_step)
    refresh = _refresh_local_copies(tf, global_params, towers, local_parameter_device, after=[apply])
    # At start the towers copy the initial global values (once the chief initialised them).
    initial_copy = _refresh_local_copies(tf, global_params, towers, local_parameter_device, after=[])
    return _finish(tf, refresh, towers, sync, num_workers, extra_local_init=[initial_copy])


def _refresh_local_copies(tf, global_params, towers, local_parameter_device, after):
    """Read each global variable once onto the local parameter device, assign it to every tower."""
    assigns = []
    with tf.control_dependencies(after), tf.name_scope("refresh_local_copies"):
        for i, global_param in enumerate(global_params):
            with tf.device(local_parameter_device):
                value = tf.identity(global_param.read_value())
            for tower in towers:
                with tf.device(tower.device):
                    assigns.append(tower.params[i].assign(value, read_value=False))
    return tf.group(*assigns)


def build_independent(tf, config, towers_inputs, global_step, rate):
    """independent: each tower trains its own copy; nothing is shared (local baseline).

    The weight decay is on the last tower only, times the towers, as tf_cnn_benchmarks builds
    it in every mode (op for op the same work, though here no gradients are averaged).
    """
    towers = []
    applies = []
    for k, (device, images, labels) in enumerate(towers_inputs):
        tower = tower_forward(tf, config, images, labels, device, k, len(towers_inputs), f"v{k}")
        _check_grads(tower.grads, tower.params)
        towers.append(tower)
        with tf.device(device):
            step = global_step if k == 0 else None
            applies.append(
                make_optimizer(tf, config, rate).apply_gradients(list(zip(tower.grads, tower.params)), global_step=step)
            )
    return _finish(tf, tf.group(*applies), towers, None, 1)
