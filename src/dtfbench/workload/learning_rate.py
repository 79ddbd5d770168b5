"""The learning rate each update applies: --learning_rate, scaled with the images the update
averages (--lr_scaling linear) and reached over --warmup_epochs (Goyal et al. 2017, "Accurate,
Large Minibatch SGD": linear scaling and gradual warm-up).

--learning_rate is the rate for one device's batch (--batch_size images). An update averages
the gradients of more images than that wherever towers or workers meet:

- parameter_server and distributed_replicated, synchronous: every tower of every worker,
  ``batch_size x GPUs`` images an update (SyncReplicasOptimizer averages the workers' gradients,
  each worker first averages its towers');
- the same, asynchronous: one worker's towers, ``batch_size x devices per worker``: each
  worker's update is applied on its own, however many workers there are;
- collective_all_reduce: every replica, ``batch_size x GPUs`` (the loss is the mean over the
  global batch);
- independent: one tower, ``batch_size`` (each tower trains its own copy).

``linear`` multiplies the rate by that ratio (images an update / batch_size): a synchronous run
on 8 GPUs trains at 8x the rate of one, as Goyal et al.'s k x eta. With --warmup_epochs W the rate
starts at --learning_rate and rises linearly with the updates applied to the scaled rate, which
it reaches after W epochs of images (their gradual warm-up), then stays. ``none`` keeps
--learning_rate for every update, as tf_cnn_benchmarks' default.
"""

LINEAR = "linear"
NONE = "none"
CHOICES = (NONE, LINEAR)


def images_per_update(config, num_workers):
    """The images one applied update averages (this module's docstring)."""
    if config.variable_update == "independent":
        return config.batch_size
    per_worker = config.batch_size * config.num_gpus
    synchronous = config.variable_update == "collective_all_reduce" or config.cross_replica_sync
    return per_worker * num_workers if synchronous else per_worker


class Schedule:
    """The rate of the n-th applied update (0-based): ``base x (1 + (factor - 1) x min(1, n / W))``
    with W the warm-up's updates (factor at once without a warm-up)."""

    def __init__(self, config, num_workers):
        self.base = config.learning_rate
        self.per_update = images_per_update(config, num_workers)
        self.factor = self.per_update / config.batch_size if config.lr_scaling == LINEAR else 1.0
        self.warmup_epochs = config.warmup_epochs
        self.warmup_updates = None  # known once the epoch's size is (set_epoch)

    @property
    def warms_up(self):
        """Whether the rate changes during the run (a warm-up towards a factor above 1)."""
        return bool(self.warmup_epochs) and self.factor != 1

    @property
    def peak(self):
        return self.base * self.factor

    def set_epoch(self, examples_per_epoch):
        self.warmup_updates = max(1.0, self.warmup_epochs * examples_per_epoch / self.per_update)

    def rate(self, update):
        """The rate of update `update` (a number)."""
        if not self.warms_up:
            return self.peak
        return self.base * (1 + (self.factor - 1) * min(1.0, update / self.warmup_updates))

    def tensor(self, tf, global_step, warmup_updates):
        """The same rate in a graph: of `global_step` (the updates applied so far) and the warm-up's
        updates as a tensor (a variable loaded once the epoch's size is known)."""
        if not self.warms_up:
            return self.peak
        done = tf.minimum(1.0, tf.cast(global_step, tf.float32) / warmup_updates)
        return self.base * (1 + (self.factor - 1) * done)

    def line(self):
        """What the run trains with, for the log; None: --learning_rate as it is."""
        if self.factor == 1:
            return None
        warmup = (
            f", reached over {self.warmup_epochs:g} epochs ({self.warmup_updates:.0f} updates) from {self.base:g}"
            if self.warms_up and self.warmup_updates
            else ""
        )
        return (
            f"learning rate {self.peak:g} = {self.base:g} x {self.factor:g} ({self.per_update} images an update, "
            f"--lr_scaling linear){warmup}"
        )
