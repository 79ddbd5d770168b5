"""How fast is our workload against a plain Keras training loop on the same CPU?

    PYTHONPATH=src python benchmarks/workload_vs_keras.py [--model resnet50 --image_size 64 ...]

Runs, one after the other on this machine, with the same model, batch, image size,
optimizer (SGD), loss (cross-entropy plus the L2 weight decay, batch norm's variables
excepted) and synthetic data:

1. keras: a tf.function train step (GradientTape + keras SGD) on the same keras model,
2. ours, --variable_update independent (one process, no cluster),
3. ours, --variable_update parameter_server with 1 PS + 1 worker on 127.0.0.1,

and prints images/sec of each with the ratio ours/keras (goal: >= 0.95), and writes them
to --output as JSON. Every variant runs in a fresh process (same thread settings), so
none inherits another's TF state.

Wall-clock rates swing with whatever else runs on the machine, so each variant also gets
images per CPU-second of its (worker) process over the measured steps, which hardly
depends on other load; for parameter_server that leaves out the PS process's CPU.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

from bench_env import RESULTS, ROOT, free_ports, write_json

SRC = ROOT / "src"
RESULT_PREFIX = "DTFBENCH_RESULT "
KERAS_PREFIX = "KERAS_RESULT "
GOAL = 0.95


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # Defaults: the study's model at the smallest size it accepts, about 2-3 minutes on 2 cores.
    p.add_argument("--model", default="inception3")
    p.add_argument("--image_size", type=int, default=75)
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--num_warmup_batches", type=int, default=3)
    p.add_argument("--num_batches", type=int, default=12)
    p.add_argument("--learning_rate", type=float, default=0.005)
    p.add_argument("--weight_decay", type=float, default=4e-5, help="the workload's --weight_decay, in every variant")
    p.add_argument("--num_intra_threads", type=int, default=0, help="0: TF chooses (same for every variant)")
    p.add_argument("--num_inter_threads", type=int, default=0)
    p.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="rounds over all variants (interleaved, so load from other processes hits all alike);"
        " each variant's best rate counts",
    )
    p.add_argument("--output", default=str(RESULTS / "workload_vs_keras.json"))
    p.add_argument("--keras_child", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH", "")) if p)
    env["CUDA_VISIBLE_DEVICES"] = ""
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env.pop("TF_CONFIG", None)
    return env


# --- the Keras baseline (runs in a child process) -----------------------------------------


def keras_child(args):
    import tensorflow as tf

    if args.num_intra_threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.num_intra_threads)
    if args.num_inter_threads:
        tf.config.threading.set_inter_op_parallelism_threads(args.num_inter_threads)
    import keras

    from dtfbench.workload import data
    from dtfbench.workload.models import build_model

    model = build_model(args.model, args.image_size, 1001, "NHWC")
    optimizer = keras.optimizers.SGD(args.learning_rate)
    # The workload's weight decay: every trainable variable but batch norm's (Keras names them
    # by layer, so the layer type tells them apart).
    decayed = [
        w
        for layer in model.layers
        if not isinstance(layer, keras.layers.BatchNormalization)
        for w in layer.trainable_weights
    ]
    images, labels = data.synthetic_tensors(tf, args.batch_size, args.image_size, 1001, "NHWC")

    @tf.function
    def train_step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
            if args.weight_decay:
                loss += args.weight_decay * tf.math.add_n([tf.nn.l2_loss(w.value) for w in decayed])
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    for _ in range(args.num_warmup_batches):
        float(train_step(images, labels))
    started, cpu_started = time.perf_counter(), time.process_time()
    for _ in range(args.num_batches):
        float(train_step(images, labels))  # wait for each step, as our workload does
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    images = args.num_batches * args.batch_size
    print(
        KERAS_PREFIX
        + json.dumps(
            {
                "images_per_sec": images / elapsed,
                "images_per_cpu_second": images / cpu,
                "seconds": elapsed,
                "tf_version": tf.__version__,
            }
        ),
        flush=True,
    )


# --- the variants ----------------------------------------------------------------------------


# The settings every variant passes on as they are, Keras' included: --NAME VALUE each.
MODEL_FLAGS = (
    "model",
    "image_size",
    "batch_size",
    "num_warmup_batches",
    "num_batches",
    "learning_rate",
    "weight_decay",
)
THREAD_FLAGS = ("num_intra_threads", "num_inter_threads")


def flags_of(args, names):
    return [arg for name in names for arg in (f"--{name}", str(getattr(args, name)))]


def common_flags(args):
    return [
        *flags_of(args, MODEL_FLAGS),
        *("--optimizer", "sgd", "--device", "cpu"),
        *flags_of(args, THREAD_FLAGS),
        *("--display_every", str(max(1, args.num_batches)), "--step_timeout", "600"),
    ]


def result_from(stdout, prefix):
    lines = [line for line in stdout.splitlines() if line.startswith(prefix)]
    if not lines:
        raise RuntimeError(f"no {prefix.strip()} line in:\n{stdout[-2000:]}")
    return json.loads(lines[-1][len(prefix) :])


def run_keras(args):
    argv = [sys.executable, __file__, "--keras_child", *flags_of(args, MODEL_FLAGS + THREAD_FLAGS)]
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=1800)
    if done.returncode:
        raise RuntimeError(f"keras baseline failed:\n{done.stderr[-3000:]}")
    result = result_from(done.stdout, KERAS_PREFIX)
    return result["images_per_sec"], result["images_per_cpu_second"]


def rates_of(result):
    """(images/sec, images per CPU-second) from a DTFBENCH_RESULT."""
    images = result["measured_steps"] * result["images_per_step"]
    return result["images_per_sec"], images / result["cpu_time"]["measured"]


def run_independent(args):
    argv = [sys.executable, "-m", "dtfbench", "train", "--variable_update", "independent", *common_flags(args)]
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(), timeout=1800)
    if done.returncode:
        raise RuntimeError(f"independent run failed:\n{done.stderr[-3000:]}")
    return rates_of(result_from(done.stdout, RESULT_PREFIX))


def run_parameter_server(args):
    ps_port, worker_port = free_ports(2)
    cluster = [
        "--variable_update",
        "parameter_server",
        "--ps_hosts",
        f"127.0.0.1:{ps_port}",
        "--worker_hosts",
        f"127.0.0.1:{worker_port}",
        *common_flags(args),
    ]
    base = [sys.executable, "-m", "dtfbench", "train", *cluster]
    ps = subprocess.Popen(
        [*base, "--job_name", "ps", "--task_index", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        start_new_session=True,
    )
    try:
        done = subprocess.run(
            [*base, "--job_name", "worker", "--task_index", "0"],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=1800,
        )
        if done.returncode:
            raise RuntimeError(f"parameter_server worker failed:\n{done.stderr[-3000:]}")
        ps.wait(timeout=60)
        return rates_of(result_from(done.stdout, RESULT_PREFIX))
    finally:
        if ps.poll() is None:
            ps.kill()
            ps.wait()


def main(argv=None):
    args = parse_args(argv)
    if args.keras_child:
        keras_child(args)
        return 0
    started = time.monotonic()
    variants = (
        ("keras", run_keras),
        ("ours_independent", run_independent),
        ("ours_parameter_server", run_parameter_server),
    )
    samples = {name: [] for name, _ in variants}
    cpu_samples = {name: [] for name, _ in variants}
    for round_number in range(1, args.repeats + 1):
        for name, function in variants:
            rate, per_cpu = function(args)
            samples[name].append(rate)
            cpu_samples[name].append(per_cpu)
            print(
                f"round {round_number}: {name:24s} {rate:8.1f} images/sec {per_cpu:8.1f} images/CPU-second", flush=True
            )
    rates = {name: max(values) for name, values in samples.items()}
    per_cpu = {name: max(values) for name, values in cpu_samples.items()}
    for name in rates:
        print(
            f"{name:24s} {rates[name]:8.1f} images/sec {per_cpu[name]:8.1f} images/CPU-second (best of {args.repeats})"
        )
    ours = ("ours_independent", "ours_parameter_server")
    ratios = {name: rates[name] / rates["keras"] for name in ours}
    cpu_ratios = {name: per_cpu[name] / per_cpu["keras"] for name in ours}
    for name in ours:
        verdict = "meets" if ratios[name] >= GOAL else "below"
        print(
            f"ratio {name}/keras = {ratios[name]:.3f} ({verdict} the goal {GOAL});"
            f" per CPU-second {cpu_ratios[name]:.3f}"
        )
    report = {
        "config": {k: v for k, v in vars(args).items() if k not in ("keras_child", "output")},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "images_per_sec": rates,
        "images_per_sec_samples": samples,
        "unit": "images/sec",
        "images_per_cpu_second": per_cpu,
        "images_per_cpu_second_samples": cpu_samples,
        "ratio_to_keras": ratios,
        "cpu_ratio_to_keras": cpu_ratios,
        "goal": GOAL,
        "meets_goal": {name: ratio >= GOAL for name, ratio in ratios.items()},
        "seconds": time.monotonic() - started,
    }
    write_json(args.output, report, sort_keys=True, say="written to")
    return 0


if __name__ == "__main__":
    sys.exit(main())
