"""The worker of the graph-mode modes (parameter_server, distributed_replicated, independent).

Between-graph replication as in tf_cnn_benchmarks on TF 1.x: every worker builds the same
tf.compat.v1 graph (so variable names and PS placement agree), task 0 (the chief)
initialises the shared variables, the others wait for them. Sessions come from
SessionManager with a short poll instead of MonitoredTrainingSession, whose non-chief
workers sleep a fixed 30 s before looking again.
"""

import os
import time
from dataclasses import dataclass, field

from . import benchmark_output as out
from . import checkpoints, data, evaluation, learning_rate, variable_update
from .cnn_models import build_network
from .coordination import Coordination, ps_cpu, wait_for_count
from .errors import RunFailure
from .flags import train_files
from .liveness import wait_for_ports
from .placement import GreedyLoadBalancingStrategy, RoundRobinStrategy, ps_task_of
from .reporting import describe_tf_error

SESSION_POLL_SECS = 0.2  # SessionManager.recovery_wait_secs: how often non-chiefs look again


def watchdog_bound(seconds):
    """The watchdog fires after TF's own timeout would have, to let TF report first."""
    return seconds + max(10.0, 0.25 * seconds)


@dataclass
class WorkerGraph:
    graph: object
    train: object
    devices: list
    shared_variables: list
    local_init_op: object
    init_op: object
    ready_op: object
    coordination: object = None
    ps_bytes: list = field(default_factory=list)
    evaluation: object = None  # EvalOps where this worker evaluates
    train_count: object = None  # an epoch's size (time to accuracy, warm-up): the training split's records
    schedule: object = None  # dtfbench.workload.learning_rate.Schedule
    # Its warm-up's length in updates: a variable, set (op, value placeholder) once the epoch's size is known.
    warmup_set: tuple = None
    rate: object = None  # the learning rate the next update applies (a tensor during a warm-up, else a number)
    saver: object = None  # where this worker saves or restores checkpoints (dtfbench.workload.checkpoints)


@dataclass
class EvalOps:
    initializer: object  # starts the held-out split
    counts: tuple  # (top-1 hits, top-k hits, examples) of the next batch
    count: object  # the records of a small split, run once; None: a large split, started again each time
    batches: object = None  # a small split: the batches an evaluation reads from it, once counted


def task_prefix(cluster):
    if cluster.is_distributed:
        return f"/job:worker/replica:0/task:{cluster.task_index}"
    return "/job:localhost/replica:0/task:0"


def tower_devices(config, cluster):
    kind = "GPU" if config.device == "gpu" else "CPU"
    return [f"{task_prefix(cluster)}/device:{kind}:{k}" for k in range(config.num_gpus)]


def local_parameter_device(config, cluster):
    kind = "GPU" if config.local_parameter_device == "gpu" and config.device == "gpu" else "CPU"
    return f"{task_prefix(cluster)}/device:{kind}:0"


def session_config(tf, config, cluster):
    proto = tf.compat.v1.ConfigProto(
        allow_soft_placement=True,
        intra_op_parallelism_threads=config.num_intra_threads,
        inter_op_parallelism_threads=config.num_inter_threads,
        # A dead peer turns into DeadlineExceeded/Unavailable instead of a hang.
        operation_timeout_in_ms=int(config.step_timeout * 1000),
    )
    if config.device == "cpu":
        proto.device_count["GPU"] = 0
        if config.num_gpus > 1:
            proto.device_count["CPU"] = config.num_gpus  # --device cpu: one CPU device per tower
    if cluster.is_distributed:
        # Workers talk to the PSs and themselves only; CreateSession must not wait for
        # (or break with) the other workers.
        proto.device_filters.extend(["/job:ps", f"/job:worker/task:{cluster.task_index}"])
    return proto


def _tower_inputs(tf, config, cluster, devices, cpu_device):
    inputs, initializers = [], []
    if config.data_dir:
        files = train_files(config.data_dir, config.input_format)
        with tf.device(cpu_device), tf.name_scope("input_pipeline"):
            dataset = data.real_dataset(
                tf,
                files,
                *data.batch_args(config),
                cluster.task_index,
                cluster.num_workers,
                config.augmentation,
                config.input_format,
            )
            iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
            initializers.append(iterator.initializer)
            for device in devices:
                images, labels = iterator.get_next()
                images.set_shape([config.batch_size, *images.shape[1:]])
                labels.set_shape([config.batch_size])
                inputs.append((device, images, labels))
        return inputs, initializers
    for k, device in enumerate(devices):
        with tf.device(device):
            images, labels, _ = data.synthetic_variables(tf, *data.batch_args(config), f"synthetic_{k}")
        inputs.append((device, images, labels))
    return inputs, initializers


def _eval_ops(tf, config, cpu_device, device):
    """The held-out split through the network in inference mode, on the variables tower 0
    trains: the PSs' (scope ``v``) in parameter_server, its local copy (``v0``) otherwise. It
    makes no variable (every one is reused), so the chief's graph places the shared ones as
    the other workers' do."""
    with tf.device(cpu_device), tf.name_scope("eval_input"):
        dataset, count = evaluation.eval_input(
            tf,
            evaluation.eval_files(config.data_dir, config.input_format),
            *data.batch_args(config),
            config.num_eval_batches,
            config.input_format,
        )
        iterator = tf.compat.v1.data.make_initializable_iterator(dataset)
        images, labels = iterator.get_next()
    scope = "v" if config.variable_update == "parameter_server" else "v0"
    with tf.device(device), tf.compat.v1.variable_scope(scope, reuse=True, use_resource=False):
        network = build_network(tf, config.model, images, config.num_classes, config.data_format, phase_train=False)
        counts = evaluation.correct_counts(tf, network.logits, labels, config.num_classes)
    return EvalOps(iterator.initializer, counts, count)


def _variable_bytes(variable):
    return variable.shape.num_elements() * variable.dtype.size


def build_worker_graph(tf, config, cluster):
    graph = tf.Graph()
    with graph.as_default():
        # Every op's seed derives from it (the initial variables, the shuffles): a run repeats.
        # Op-level seeds also follow the order ops are made in, so the stages below keep theirs.
        tf.compat.v1.set_random_seed(config.tf_random_seed)
        devices = tower_devices(config, cluster)
        cpu_device = f"{task_prefix(cluster)}/device:CPU:0"
        towers_inputs, input_initializers = _tower_inputs(tf, config, cluster, devices, cpu_device)
        schedule = learning_rate.Schedule(config, cluster.num_workers)
        warmup_updates, warmup_set = _warmup_variable(tf, schedule, cpu_device)
        train, global_step, rate, coordination = _train_ops(
            tf, config, cluster, towers_inputs, cpu_device, schedule, warmup_updates
        )
        shared, local, ps_bytes = _shared_and_local_variables(tf, cluster.num_ps)
        local_init_op, init_op, ready_op = _init_ops(tf, cluster, train, shared, local, input_initializers)
        evaluates = config.eval_during_training_every_n_steps and (cluster.is_chief or not cluster.is_distributed)
        eval_ops = _eval_ops(tf, config, cpu_device, devices[0]) if evaluates else None
        train_count = None
        if (config.num_epochs or schedule.warms_up) and config.data_dir:
            with tf.device(cpu_device):
                train_count = evaluation.record_count(
                    tf, train_files(config.data_dir, config.input_format), config.input_format
                )
        saver = _saver(tf, config, cluster, global_step)
        graph.finalize()  # no op may be added by accident inside the step loop
    return WorkerGraph(
        graph,
        train,
        devices,
        shared,
        local_init_op,
        init_op,
        ready_op,
        coordination,
        ps_bytes,
        eval_ops,
        train_count,
        schedule,
        warmup_set,
        rate,
        saver,
    )


def _warmup_variable(tf, schedule, cpu_device):
    """The warm-up's length in updates (a local variable) and its (assign op, placeholder); Nones without one."""
    if not schedule.warms_up:
        return None, None
    with tf.device(cpu_device):
        warmup_updates = tf.compat.v1.Variable(
            1.0, trainable=False, name="warmup_updates", collections=[tf.compat.v1.GraphKeys.LOCAL_VARIABLES]
        )
        value = tf.compat.v1.placeholder(tf.float32, [], name="warmup_updates_value")
        return warmup_updates, (warmup_updates.assign(value), value)


def _train_ops(tf, config, cluster, towers_inputs, cpu_device, schedule, warmup_updates):
    """The mode's training ops with their global step, learning rate and (PS modes) Coordination."""
    if config.variable_update == "independent":
        with tf.device(cpu_device):
            global_step = tf.compat.v1.train.get_or_create_global_step()
            rate = schedule.tensor(tf, global_step, warmup_updates)
        train = variable_update.build_independent(tf, config, towers_inputs, global_step, rate)
        return train, global_step, rate, None
    with tf.device(ps_cpu(0)):
        global_step = tf.compat.v1.train.get_or_create_global_step()
    with tf.device(cpu_device):
        rate = schedule.tensor(tf, global_step, warmup_updates)
    coordination = Coordination(
        tf,
        cluster.num_ps,
        cluster.num_workers,
        cluster.task_index,
        stop_flag=bool(config.stop_at_top_1_accuracy),
    )
    strategy_class = GreedyLoadBalancingStrategy if config.ps_placement == "greedy" else RoundRobinStrategy
    strategy = strategy_class(cluster.num_ps)  # one for all towers: variables are made once

    def setter(worker_device):
        return tf.compat.v1.train.replica_device_setter(
            ps_tasks=cluster.num_ps,
            worker_device=worker_device,
            cluster=tf.train.ClusterSpec(cluster.as_dict()),
            ps_strategy=strategy,
        )

    if config.variable_update == "parameter_server":
        train = variable_update.build_parameter_server(
            tf, config, setter, towers_inputs, global_step, cluster.num_workers, rate
        )
    else:
        train = variable_update.build_distributed_replicated(
            tf,
            config,
            setter,
            towers_inputs,
            global_step,
            cluster.num_workers,
            local_parameter_device(config, cluster),
            rate,
        )
    return train, global_step, rate, coordination


def _shared_and_local_variables(tf, num_ps):
    """The graph's variables on a PS (shared) and on this worker (local), and the bytes each PS holds."""
    everything = {id(v): v for v in tf.compat.v1.global_variables() + tf.compat.v1.local_variables()}
    shared = [v for v in everything.values() if ps_task_of(v.device) is not None]
    local = [v for v in everything.values() if ps_task_of(v.device) is None]
    ps_bytes = [0] * num_ps
    for variable in shared:
        ps_bytes[ps_task_of(variable.device)] += _variable_bytes(variable)
    return shared, local, ps_bytes


def _init_ops(tf, cluster, train, shared, local, input_initializers):
    """SessionManager's local_init_op, init_op (the shared variables) and ready_op (None: nothing shared)."""
    # Local state needs the shared variables (copies, sync local step): SessionManager
    # runs local_init_op only once ready_for_local_init_op (shared initialised) passes.
    init_local = tf.group(tf.compat.v1.variables_initializer(local), *input_initializers)
    after_local = list(train.local_init_ops)
    if train.sync_optimizer is not None:
        sync = train.sync_optimizer
        after_local.append(sync.chief_init_op if cluster.is_chief else sync.local_step_init_op)
    with tf.control_dependencies([init_local]):
        after = tf.group(*after_local)
    local_init_op = tf.group(init_local, after, name="dtfbench_local_init")
    init_op = tf.compat.v1.variables_initializer(shared, name="dtfbench_shared_init")
    ready_op = tf.compat.v1.report_uninitialized_variables(shared) if shared else None
    return local_init_op, init_op, ready_op


def _saver(tf, config, cluster, global_step):
    """The Saver of the worker that saves or restores checkpoints; None on the others, or without checkpoints."""
    checkpoints_on = config.checkpoint_every_steps or config.checkpoint_every_secs or config.restore_checkpoint
    if not (checkpoints_on and (cluster.is_chief or not cluster.is_distributed)):
        return None
    # The model's variables and the optimizer's slots, wherever they live; not the workers'
    # coordination counters, nor the step count (a restored one would make a synchronous
    # PS's queued gradients stale): a restored run counts its steps from 0 again.
    saved = [
        v
        for v in tf.compat.v1.global_variables()
        if not v.op.name.startswith("dtfbench_coordination/") and v.op.name != global_step.op.name
    ]
    return tf.compat.v1.train.Saver(saved, sharded=False, max_to_keep=2, save_relative_paths=True)


class GraphWorker:
    def __init__(self, tf, config, cluster, report, watchdog):
        self.tf = tf
        self.config = config
        self.cluster = cluster
        self.report = report
        self.watchdog = watchdog
        self.step_options = tf.compat.v1.RunOptions(timeout_in_ms=int(config.step_timeout * 1000))

    # -- phases ---------------------------------------------------------------------------

    def run(self):
        tf, config, cluster, report = self.tf, self.config, self.cluster, self.report
        started = time.monotonic()
        self.watchdog.arm(config.startup_timeout + 60, "starting up (server, graph, session)")
        server = None
        if cluster.is_distributed:
            # Start our server first: the PSs watch the workers' ports.
            server = tf.distribute.Server(
                tf.train.ClusterSpec(cluster.as_dict()),
                job_name="worker",
                task_index=cluster.task_index,
                config=session_config(tf, config, cluster),
                start=True,
            )
            report.keepalive.append(server)
        built = build_worker_graph(tf, config, cluster)
        report.devices = built.devices
        report.ps_bytes = built.ps_bytes
        self._print_header(built)
        if cluster.is_distributed:
            wait_for_ports([(f"ps {i}", a) for i, a in enumerate(cluster.ps_hosts)], config.startup_timeout)
        sess = self._open_session(built, server)
        report.keepalive.append(sess)
        if built.saver is not None:
            self._checkpoints(sess, built)  # restores before any worker's first step (the start barrier)
        self._start_sync(sess, built)
        if built.coordination is not None:
            self._barrier(sess, built)
        report.wall_time["session_ready"] = time.monotonic() - started
        run_started = time.monotonic()
        self._steps(sess, built)
        report.wall_time["run"] = time.monotonic() - run_started
        if built.coordination is not None:
            self._leave(sess, built)
        self.watchdog.disarm()
        return report.succeed()

    def _print_header(self, built):
        report = self.report
        for line in out.header_lines(self.config.as_dict(), built.devices, report.tf_version, self.cluster.num_workers):
            report.emit(line)
        if self.cluster.num_ps:
            loads = ", ".join(f"ps{i}={b}" for i, b in enumerate(built.ps_bytes))
            report.log(f"variable bytes per PS ({self.config.ps_placement}): {loads}")

    def _open_session(self, built, server):
        tf, config, cluster = self.tf, self.config, self.cluster
        proto = session_config(tf, config, cluster)
        if not cluster.is_distributed:
            sess = tf.compat.v1.Session(graph=built.graph, config=proto)
            sess.run(built.init_op)
            sess.run(built.local_init_op)
            return sess
        manager = tf.compat.v1.train.SessionManager(
            local_init_op=built.local_init_op,
            ready_op=built.ready_op,
            ready_for_local_init_op=built.ready_op,
            graph=built.graph,
            recovery_wait_secs=SESSION_POLL_SECS,
        )
        try:
            if cluster.is_chief:
                return manager.prepare_session(
                    server.target, init_op=built.init_op, config=proto, max_wait_secs=config.startup_timeout
                )
            return manager.wait_for_session(server.target, config=proto, max_wait_secs=config.startup_timeout)
        except tf.errors.OpError as exc:
            raise RunFailure(describe_tf_error(exc, cluster, "creating the session")) from None

    def _checkpoints(self, sess, built):
        """This worker's saves (and the restore, timed, now) with the graph's Saver."""
        tf, config, report = self.tf, self.config, self.report
        prefix = os.path.join(config.checkpoint_dir, checkpoints.PREFIX)

        def save(step):
            self.watchdog.arm(watchdog_bound(self.config.step_timeout), f"saving a checkpoint after step {step}")
            try:
                # Under the graph: outside it TF 2 executes eagerly, and the Saver takes its eager path.
                with built.graph.as_default():
                    return built.saver.save(sess, prefix, global_step=step, write_meta_graph=False)
            except (tf.errors.OpError, ValueError) as exc:
                raise checkpoints.save_failed(config.checkpoint_dir, exc) from None

        def restore():
            latest = checkpoints.latest(tf, config.checkpoint_dir)
            self.watchdog.arm(watchdog_bound(self.config.startup_timeout), "restoring the checkpoint")
            try:
                with built.graph.as_default():
                    built.saver.restore(sess, latest)
            except (tf.errors.OpError, ValueError) as exc:
                raise checkpoints.restore_failed(latest, exc) from None
            return latest

        report.checkpoints = checkpoints.Checkpoints(config, save, restore)
        if config.restore_checkpoint:
            restored = report.checkpoints.restore()
            report.log(f"restored {restored['path']} in {restored['seconds']:.2f} s ({restored['bytes'] / 1e9:.3g} GB)")

    def _start_sync(self, sess, built):
        sync = built.train.sync_optimizer
        if sync is None or not self.cluster.is_chief:
            return
        # What MonitoredTrainingSession's SyncReplicasOptimizerHook does on the chief: seed
        # the token queue, then run the thread that applies each aggregated step.
        sess.run(built.train.release_tokens_op)
        # The coordinator is never told to stop: stopping closes the shared token queue,
        # which fails the other workers' last steps. The process ends with os._exit.
        self.coordinator = self.tf.train.Coordinator()
        sync.get_chief_queue_runner().create_threads(sess, coord=self.coordinator, daemon=True, start=True)

    def _run(self, sess, fetches, what):
        self.watchdog.arm(watchdog_bound(self.config.step_timeout), what)
        try:
            return sess.run(fetches, options=self.step_options)
        except self.tf.errors.DataLossError as exc:  # a damaged shard: this worker's input, no peer's fault
            raise RunFailure(
                data.describe_data_loss(self.tf, exc, self.config.data_dir, what, self.config.input_format)
            ) from None
        except self.tf.errors.OpError as exc:
            raise RunFailure(describe_tf_error(exc, self.cluster, what)) from None

    def _barrier(self, sess, built):
        coordination = built.coordination
        self._run(sess, coordination.mark_ready, "joining the start barrier")
        self.watchdog.arm(watchdog_bound(self.config.startup_timeout), "waiting at the start barrier")
        wait_for_count(
            lambda: self._run_quiet(sess, coordination.read_ready, "waiting at the start barrier"),
            self.cluster.num_workers,
            self.config.startup_timeout,
            "start barrier",
        )

    def _run_quiet(self, sess, fetch, what):
        # Polls keep the outer (longer) watchdog bound instead of re-arming it.
        try:
            return sess.run(fetch, options=self.step_options)
        except self.tf.errors.OpError as exc:
            raise RunFailure(describe_tf_error(exc, self.cluster, what)) from None

    def _steps(self, sess, built):
        report, coordination = self.report, built.coordination
        evaluate = stop = None
        if built.evaluation is not None:
            report.evaluations = evaluation.Evaluations(self.config, report.images_per_step, self.cluster.num_workers)
            if built.schedule.warms_up:
                report.evaluations.rate = lambda: float(self._run(sess, built.rate, "reading the learning rate"))
            else:
                report.evaluations.rate = lambda: built.schedule.peak

            def evaluate(what):
                return self._evaluate(sess, built.evaluation, what)

        fetches = [built.train.train_op, built.train.loss]

        def load_warmup():
            op, value = built.warmup_set
            sess.run(op, {value: built.schedule.warmup_updates}, options=self.step_options)

        evaluation.set_up_epochs(
            self.config,
            report,
            built.schedule,
            self.cluster.num_workers,
            lambda: self._run(sess, built.train_count, "counting the training images"),
            load_warmup,
        )
        if self.config.stop_at_top_1_accuracy:
            flag = []  # the stop flag as the last step read it (PS modes)
            if coordination is not None:
                fetches.append(coordination.read_stop)

            def stop():
                if report.evaluations is not None and report.evaluations.reached:
                    if coordination is not None:  # the chief tells the others
                        self._run(sess, coordination.request_stop, "telling the workers to stop")
                    return True
                return bool(flag and flag[-1])

        def step(what):
            values = self._run(sess, fetches, what)
            if len(values) > 2:
                flag[:] = [values[2]]
            return values[1]

        checkpoint = report.checkpoints.save if report.checkpoints is not None and report.checkpoints.enabled else None
        report.measure_steps(step, evaluate, stop, checkpoint)

    def _evaluate(self, sess, ops, what):
        """(top-1 hits, top-k hits, examples) over the held-out split, each batch within step_timeout."""
        tf = self.tf

        def next_counts():
            self.watchdog.arm(watchdog_bound(self.config.step_timeout), what)
            try:
                return sess.run(ops.counts, options=self.step_options)
            except tf.errors.OutOfRangeError:
                raise
            except tf.errors.OpError as exc:
                raise RunFailure(describe_tf_error(exc, self.cluster, what)) from None

        if ops.count is None:
            self._run(sess, ops.initializer, what)
        elif ops.batches is None:  # the first evaluation of a small split: count it, open it
            records = self._run(sess, ops.count, what)
            ops.batches = evaluation.batches_per_pass(records, self.config.batch_size, self.config.num_eval_batches)
            self._run(sess, ops.initializer, what)
        limit = ops.batches if ops.count is not None else self.config.num_eval_batches
        return evaluation.run_batches(next_counts, limit, tf.errors.OutOfRangeError)

    def _leave(self, sess, built):
        """Finish without stranding anyone, then tell every PS we are gone."""
        coordination, train = built.coordination, built.train
        self._run(sess, coordination.mark_done, "marking this worker done")
        if train.sync_optimizer is not None:
            # A sync step needs every worker's gradient: keep contributing (unmeasured)
            # until all are done, then leave tokens behind for anyone blocked on one.
            extra = 0
            while self._run(sess, coordination.read_done, "reading the done counter") < self.cluster.num_workers:
                self._run(sess, train.train_op, "an unmeasured step while others finish")
                extra += 1
            self._run(sess, train.release_tokens_op, "releasing the sync tokens")
            if extra:
                self.report.log(f"ran {extra} unmeasured step(s) while the other workers finished")
        self._run(sess, coordination.leave, "telling the PSs this worker is done")


def run(tf, config, cluster, report, watchdog):
    return GraphWorker(tf, config, cluster, report, watchdog).run()
