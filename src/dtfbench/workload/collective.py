"""collective_all_reduce: tf.distribute.MultiWorkerMirroredStrategy, no parameter servers.

Every worker holds all variables; gradients are summed with collective all-reduce. The network
is the PS modes' (cnn_models, tf_cnn_benchmarks' layers and variable names, under the scope
``v``), its variables made by the strategy (mirrored on every replica); the loss is theirs too:
cross-entropy plus the weight decay. Batch norm's moving averages are per replica
(synchronised on read), as tf_cnn_benchmarks' all-reduce modes keep them on each device:
only gradients cross the network. The optimizer is the PS modes' tf.compat.v1 one, whose
apply_gradients sums the replicas' gradients with the strategy's all-reduce. TF_CONFIG
is built from --worker_hosts/--task_index. Collectives get CommunicationOptions(timeout_seconds=
--step_timeout) so a dead peer ends the run with an error instead of a hang; strategy start-up
(which waits for every worker) is bounded by the watchdog with --startup_timeout.
"""

import json
import os
import time

from . import benchmark_output as out
from . import checkpoints, data, evaluation, learning_rate
from .cnn_models import build_network, weight_decay_loss
from .errors import RunFailure
from .flags import train_files
from .graph_worker import watchdog_bound
from .liveness import port_open
from .reporting import describe_tf_error
from .variable_update import make_optimizer

# The coordination service lives in worker 0 (MultiWorkerMirroredStrategy's default leader).
LEADER_TASK = 0
LEADER_GRACE_SECS = 10.0
VARIABLES_LOG_PREFIX = "model variables: "  # one log line: [[name, shape, trainable]] in creation order


def tf_config(cluster):
    return {
        "cluster": {"worker": [str(a) for a in cluster.worker_hosts]},
        "task": {"type": "worker", "index": cluster.task_index},
    }


def network_template(tf, config):
    """cnn_models' network as a callable ``(images, phase_train) -> Network``.

    Its variables are made on the first call (under the strategy's scope: mirrored) and
    reused on every later one, named as the PS modes name theirs (``v/cg/conv0/conv2d/kernel``).
    """

    def per_replica_moving_stats(getter, name, *args, **kwargs):
        if kwargs.get("trainable") is False:
            kwargs["synchronization"] = tf.VariableSynchronization.ON_READ
            kwargs["aggregation"] = tf.VariableAggregation.MEAN
        return getter(name, *args, **kwargs)

    def forward(images, phase_train):
        return build_network(tf, config.model, images, config.num_classes, config.data_format, phase_train)

    return tf.compat.v1.make_template("v", forward, custom_getter_=per_replica_moving_stats)


def build_variables(tf, config, network):
    """Make the network's variables once, outside any step: a forward pass of one image.

    Returns them in creation order (the template lists its own by name).
    """
    created = []

    def record(next_creator, **kwargs):
        created.append(next_creator(**kwargs))
        return created[-1]

    with tf.variable_creator_scope(record):
        network(tf.zeros([1, *_image_shape(config)], tf.float32), False)  # phase_train=False: no update
    return created


def variable_rows(variables):
    """[[name, shape, trainable]] as the worker logs them (the PS modes' names, ``v/cg/...``)."""
    return [[v.name.split(":")[0], v.shape.as_list(), bool(v.trainable)] for v in variables]


def _image_shape(config):
    size = config.image_size
    return [3, size, size] if config.data_format == "NCHW" else [size, size, 3]


def _inputs(tf, strategy, config, cluster):
    """A callable returning the next (images, labels) per-replica values."""
    if config.data_dir:
        files = train_files(config.data_dir, config.input_format)

        def dataset_fn(context):
            return data.real_dataset(
                tf,
                files,
                *data.batch_args(config),
                context.input_pipeline_id,
                context.num_input_pipelines,
                config.augmentation,
                config.input_format,
            )

        iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))
        return lambda: next(iterator)

    devices = strategy.extended.worker_devices
    first_replica = cluster.task_index * len(devices)

    def value_fn(context):
        # Made once, on the replica's own device: no input pipeline per step.
        with tf.device(devices[context.replica_id_in_sync_group - first_replica]):
            images, labels = data.synthetic_tensors(tf, *data.batch_args(config))
            return tf.identity(images), tf.identity(labels)

    batch = strategy.experimental_distribute_values_from_function(value_fn)
    return lambda: batch


def run(tf, config, cluster, report, watchdog):
    started = time.monotonic()
    watchdog.arm(config.startup_timeout + 60, "starting the collective strategy (waiting for every worker)")
    strategy = _start_strategy(tf, config, cluster)
    report.keepalive.append(strategy)
    report.devices = list(strategy.extended.worker_devices)
    report.images_per_step = config.batch_size * len(report.devices)

    schedule = learning_rate.Schedule(config, cluster.num_workers)
    network, variables, rate, optimizer = _build_model(tf, config, strategy, schedule)
    params = [v for v in variables if v.trainable]
    # What the ring reduces a step (the planner's variable bytes; no PS reports them here).
    report.variable_bytes = sum(v.shape.num_elements() * v.dtype.size for v in params)
    report.log(VARIABLES_LOG_PREFIX + json.dumps(variable_rows(variables)))
    next_batch = _inputs(tf, strategy, config, cluster)
    train_step = _train_step(tf, config, strategy, network, params, optimizer)

    for line in out.header_lines(config.as_dict(), report.devices, report.tf_version, cluster.num_workers):
        report.emit(line)
    report.wall_time["session_ready"] = time.monotonic() - started

    step = _step_runner(tf, config, cluster, watchdog, train_step, next_batch, schedule, rate)
    evaluate = _evaluator(tf, config, cluster, report, watchdog, network)
    if report.evaluations is not None:
        report.evaluations.rate = (lambda: float(rate.numpy())) if rate is not None else (lambda: schedule.peak)
    evaluation.set_up_epochs(
        config,
        report,
        schedule,
        cluster.num_workers,
        lambda: evaluation.record_count(tf, train_files(config.data_dir, config.input_format), config.input_format),
    )
    stop = None
    if config.stop_at_top_1_accuracy:
        # Every worker evaluates the same variables at the same steps, so each stops at the same one.

        def stop():
            return report.evaluations.reached

    checkpoint = None
    if config.checkpoint_every_steps or config.restore_checkpoint:
        checkpoint = _checkpoints(tf, config, cluster, report, watchdog, variables, optimizer)
    run_started = time.monotonic()
    report.measure_steps(step, evaluate, stop, checkpoint)
    report.wall_time["run"] = time.monotonic() - run_started
    watchdog.arm(watchdog_bound(config.step_timeout), "waiting for the other workers to finish")
    _finish_together(tf, cluster, config)
    watchdog.disarm()
    return report.succeed()


def _start_strategy(tf, config, cluster):
    """Configure TF for this worker (TF_CONFIG, threads, visible devices) and start the strategy."""
    os.environ["TF_CONFIG"] = json.dumps(tf_config(cluster))
    if config.num_intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(config.num_intra_threads)
    if config.num_inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(config.num_inter_threads)
    if config.device == "gpu":
        gpus = tf.config.list_physical_devices("GPU")
        tf.config.set_visible_devices(gpus[: config.num_gpus], "GPU")
    else:
        tf.config.set_visible_devices([], "GPU")
    options = tf.distribute.experimental.CommunicationOptions(timeout_seconds=config.step_timeout)
    try:
        return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    except tf.errors.OpError as exc:
        raise RunFailure(describe_tf_error(exc, cluster, "starting the collective strategy")) from None


def _build_model(tf, config, strategy, schedule):
    """The network, its variables, the warm-up's rate variable (or None) and the optimizer, under the strategy."""
    tf.random.set_seed(config.tf_random_seed)  # the same initial variables on every worker, run after run
    with strategy.scope():
        network = network_template(tf, config)
        variables = build_variables(tf, config, network)
        # A warm-up's rate changes with the steps: a variable the loop sets before each one (the
        # same on every worker: the same steps).
        rate = tf.Variable(schedule.base, trainable=False, name="learning_rate") if schedule.warms_up else None
        optimizer = make_optimizer(tf, config, rate if rate is not None else schedule.peak)
    return network, variables, rate, optimizer


def _train_step(tf, config, strategy, network, params, optimizer):
    """The traced training step: every replica's forward, backward and update; returns the summed loss."""
    global_batch = config.batch_size * strategy.num_replicas_in_sync

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            logits = network(images, True).logits
            loss = replica_loss(tf, config, logits, labels, params, global_batch)
        grads = tape.gradient(loss, params)
        optimizer.apply_gradients(list(zip(grads, params)))
        return loss

    # No autograph: the step has no tensor-dependent Python control flow, and autograph writes
    # the source of every function it converts to a file in the temporary folder that nobody
    # removes (on every node, five a worker and run).
    @tf.function(autograph=False)
    def train_step(batch):
        images, labels = batch
        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    return train_step


def _step_runner(tf, config, cluster, watchdog, train_step, next_batch, schedule, rate):
    """The loop's `step(what)`: one training step on the next batch, within the watchdog; returns its loss."""
    updates = []  # the steps run so far (each one update)

    def step(what):
        watchdog.arm(watchdog_bound(config.step_timeout), what)
        try:
            if rate is not None:
                rate.assign(schedule.rate(len(updates)))
            updates.append(None)
            return float(train_step(next_batch()))  # float() waits for the step to finish
        except tf.errors.DataLossError as exc:  # a damaged shard: this worker's input, no peer's fault
            raise RunFailure(data.describe_data_loss(tf, exc, config.data_dir, what, config.input_format)) from None
        except (tf.errors.OpError, StopIteration) as exc:
            raise RunFailure(describe_tf_error(exc, cluster, what)) from None

    return step


def _checkpoints(tf, config, cluster, report, watchdog, variables, optimizer):
    """Every worker saves at the same steps (the strategy's variables need them all): worker 0
    into --checkpoint_dir, the others into a scratch folder of their own there, removed after
    each save (TF's advice for MultiWorkerMirroredStrategy). Every worker restores, from
    --checkpoint_dir (a folder every worker reaches), before the first step. The save callable,
    or None where only a restore was asked for."""
    state = tf.train.Checkpoint(variables=list(variables), optimizer=optimizer)
    writes = cluster.task_index == 0
    folder = config.checkpoint_dir if writes else checkpoints.scratch_folder(config.checkpoint_dir, cluster.task_index)
    manager = tf.train.CheckpointManager(state, folder, max_to_keep=2, checkpoint_name=checkpoints.PREFIX)

    def save(step):
        watchdog.arm(watchdog_bound(config.step_timeout), f"saving a checkpoint after step {step}")
        try:
            return manager.save(checkpoint_number=step)
        except (tf.errors.OpError, ValueError) as exc:
            raise checkpoints.save_failed(config.checkpoint_dir, exc) from None
        finally:
            if not writes:
                checkpoints.remove_scratch(folder)

    def restore():
        latest = checkpoints.latest(tf, config.checkpoint_dir)
        watchdog.arm(watchdog_bound(config.startup_timeout), "restoring the checkpoint")
        try:
            state.restore(latest).expect_partial()
        except (tf.errors.OpError, ValueError, AssertionError) as exc:
            raise checkpoints.restore_failed(latest, exc) from None
        return latest

    report.checkpoints = checkpoints.Checkpoints(config, save, restore, writes=writes)
    if config.restore_checkpoint:
        restored = report.checkpoints.restore()
        report.log(f"restored {restored['path']} in {restored['seconds']:.2f} s ({restored['bytes'] / 1e9:.3g} GB)")
    return report.checkpoints.save if report.checkpoints.enabled else None


def _evaluator(tf, config, cluster, report, watchdog, network):
    """Every worker evaluates, at the same steps (dtfbench.workload.evaluation says why): the
    network in inference mode on its replica's variables, over the whole held-out split."""
    if not config.eval_during_training_every_n_steps:
        return None
    report.evaluations = evaluation.Evaluations(config, report.images_per_step, cluster.num_workers)
    files = evaluation.eval_files(config.data_dir, config.input_format)
    signature = [tf.TensorSpec([None, *_image_shape(config)], tf.float32), tf.TensorSpec([None], tf.int32)]

    @tf.function(autograph=False, input_signature=signature)
    def counts(images, labels):
        return evaluation.correct_counts(tf, network(images, False).logits, labels, config.num_classes)

    dataset, count = evaluation.eval_input(
        tf,
        files,
        *data.batch_args(config),
        config.num_eval_batches,
        config.input_format,
    )
    per_evaluation = (
        None if count is None else evaluation.batches_per_pass(count, config.batch_size, config.num_eval_batches)
    )
    # A small split stays open (and decoded in memory) from one evaluation to the next.
    opened = iter(dataset) if per_evaluation is not None else None

    def evaluate(what):
        batches = opened if opened is not None else iter(dataset)

        def next_counts():
            watchdog.arm(watchdog_bound(config.step_timeout), what)
            images, labels = next(batches)
            return [int(c) for c in counts(images, labels)]

        try:
            limit = per_evaluation if per_evaluation is not None else config.num_eval_batches
            return evaluation.run_batches(next_counts, limit, StopIteration)
        except tf.errors.OpError as exc:
            raise RunFailure(describe_tf_error(exc, cluster, what)) from None

    return evaluate


def replica_loss(tf, config, logits, labels, params, global_batch):
    """One replica's share of the step's loss; the replicas' shares sum to the PS modes' loss.

    The cross-entropy's mean over the global batch, and the weight decay over the replicas:
    the optimizer sums the replicas' gradients, so each variable decays by --weight_decay
    once per step and the summed loss is tf_cnn_benchmarks' total loss.
    """
    per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
    decay = weight_decay_loss(tf, params, config.weight_decay)
    if decay is not None:
        loss += tf.nn.scale_regularization_loss(decay)
    return loss


def _finish_together(tf, cluster, config):
    """Leave only when no peer can still need us.

    Ring all-reduce is pull-based: when our last step returns, a peer may still be fetching
    our buffers, and exiting then fails its last step ("Socket closed"). So every worker
    waits at a coordination-service barrier after its last step; then the others leave and
    worker 0, which hosts the coordination service, goes last (once their ports closed, or
    after a short grace) so that their barrier replies are delivered.
    """
    from tensorflow.python.eager import context  # the barrier MultiWorkerMirroredStrategy itself uses

    try:
        context.context().wait_at_barrier("dtfbench_all_steps_done", int(config.step_timeout * 1000))
    except tf.errors.OpError as exc:
        raise RunFailure(describe_tf_error(exc, cluster, "waiting for the other workers to finish")) from None
    if cluster.task_index != LEADER_TASK:
        return
    deadline = time.monotonic() + LEADER_GRACE_SECS
    others = [a for i, a in enumerate(cluster.worker_hosts) if i != cluster.task_index]
    while others and time.monotonic() < deadline:
        others = [a for a in others if port_open(a, timeout=0.5)]
        if others:
            time.sleep(0.1)
