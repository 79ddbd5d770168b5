"""``python -m dtfbench train``: the benchmark workload (tf_cnn_benchmarks semantics on TF 2.x).

Order matters: flags are validated first (bad input -> one line, exit 2, TensorFlow never
imported), then TF is imported, the device checks run (still before any server), and only
then does the PS, the graph-mode worker or the collective worker start.

Exit codes: 0 done; 1 the run failed (dead peer, timeout; workers still write a JSON result
with status "failed"); 2 bad input.
"""

import os
import sys
import time
import traceback

from . import flags
from .errors import USAGE_EXIT_CODE, RunFailure, UsageError, error_line


def _end_process(code):
    # TF keeps gRPC servers and runner threads alive that a normal interpreter exit can wait
    # on forever; the result is already printed and written, so leave at once (also when the
    # log's disk is full and its last lines cannot be flushed).
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            pass
    os._exit(code)


def main(argv=None):
    process_start = time.monotonic()
    try:
        config, cluster = flags.parse(argv)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr, flush=True)
        return USAGE_EXIT_CODE
    if cluster.job_name == "ps":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a PS never takes a GPU (also device_count GPU=0)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
    # `import tensorflow` loads Keras 3 eagerly (keras.src.optimizers, for SavedModel's
    # registry), and Keras imports matplotlib.pyplot for its plotting helpers whenever
    # matplotlib is installed (it is beside the report code). A task builds its graph with
    # TF's own ops and never saves a model or draws: both imports only cost its start,
    # ~0.35 CPU-s and ~20 MB for Keras and ~0.6 CPU-s for matplotlib on the 2-core machine
    # (2026-11-28). TensorFlow takes the ImportError as "no Keras", Keras as "no matplotlib".
    for unused in ("keras", "matplotlib"):
        sys.modules.setdefault(unused, None)

    import tensorflow as tf

    from . import collective, graph_worker, ps_task
    from .liveness import HEARTBEAT_ENV, Watchdog
    from .reporting import RunReport

    report = RunReport(config, cluster)

    def on_expire(what, seconds):
        _end_process(report.fail(f"{what} did not finish within {seconds:g} s; a peer is dead, stuck or unreachable"))

    # From here on, the heartbeat tells the launcher that this process still runs (it beats
    # from the watchdog's thread; `import tensorflow` above may hold the interpreter for
    # seconds at a time on a busy host, so it starts after it).
    watchdog = Watchdog(on_expire, heartbeat=os.environ.get(HEARTBEAT_ENV))
    # Before check_devices resolves auto: a worker asked to run on GPUs that TF cannot see
    # still gets its GPUs sampled (idle GPUs explain a slow run).
    report.requested_device = config.device
    report.wall_time["import"] = time.monotonic() - process_start
    report.tf_version = tf.__version__
    if cluster.job_name != "ps":  # once, before the measured steps; never fails the run
        from ..compat import environment

        report.environment = environment.collect(tf=tf)
    try:
        gpus = 0 if cluster.job_name == "ps" else len(tf.config.list_physical_devices("GPU"))
        config = flags.check_devices(config, gpus)
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr, flush=True)
        _end_process(USAGE_EXIT_CODE)
    report.config = config
    try:
        if cluster.job_name == "ps":
            code = ps_task.run(tf, config, cluster, report)
        elif config.variable_update == "collective_all_reduce":
            code = collective.run(tf, config, cluster, report, watchdog)
        else:
            code = graph_worker.run(tf, config, cluster, report, watchdog)
    except RunFailure as exc:
        code = report.fail(exc.reason)
    except KeyboardInterrupt:
        code = 128 + 2  # Ctrl-C: leave at once, like SIGTERM does
    except Exception as exc:  # a bug or an unexpected TF error: still one clear line and a result
        try:
            traceback.print_exc()
        except OSError:
            pass  # the log's disk is full: the line below tries the result file still
        code = report.fail(f"unexpected {type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    _end_process(code)
