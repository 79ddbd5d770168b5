"""``python -m dtfbench <command> [args]`` (or the ``dtfbench`` console script): every command.

The roles and playbooks call ``{{ ansible_playbook_python }} -m dtfbench <command>`` (or the
nodes' virtualenv Python), so the interpreter that runs a command is always the one named.

Each command is the ``main(argv)`` of one module, imported only once it is chosen: the
workload (``train``) runs on nodes without the report's matplotlib/scipy or Ansible, and
``record`` runs on the controller without TensorFlow. ``dtfbench <command> --help`` is the
command's own help. Every command runs in a frame chunk of its own (call_with_frame_room).
"""

import importlib
import sys

# name: (module whose main(argv) runs it, one line for `dtfbench --help`)
COMMANDS = {
    "train": ("dtfbench.workload.train", "the benchmark workload: one TF task (tf_cnn_benchmarks semantics on TF 2.x)"),
    "layout": ("dtfbench.plan.layout", "the cluster layout (who runs where on which port) as JSON"),
    "record": ("dtfbench.results.record", "record one finished run in the results store (JSON on stdin)"),
    "store": ("dtfbench.results.store", "inspect, check, add to and export the results store"),
    "netprobe": ("dtfbench.results.netprobe", "store and show what a sweep's link probe measured"),
    "report": ("dtfbench.report.command", "the table of a sweep, or the full report (tables, plots, index)"),
    "forecast": ("dtfbench.forecast.predict", "predicted scaling, the best PS count and a sweep's cost"),
    "adaptive_sweep": ("dtfbench.forecast.adaptive", "the next step of a num_ps=auto / stop_below_efficiency sweep"),
    "scaling_validation": ("dtfbench.forecast.validation", "the scaling model against the study's published tables"),
    "narrowing_validation": ("dtfbench.forecast.narrowing", "num_ps=auto against the study's published tables"),
    "interrupt": ("dtfbench.launch.interrupt", "the controller's watchdog for an ended ansible-playbook"),
    "s3sync": ("dtfbench.node.s3sync", "download an S3 prefix into a local directory (resumable, verified)"),
    "read_throughput": ("dtfbench.node.read_throughput", "raw read throughput of a data directory"),
    "tfrecords": ("dtfbench.workload.tfrecords", "generate a small ImageNet-format TFRecord set"),
    "ec2_types": ("dtfbench.plan.ec2_types", "the EC2 GPU instance types as the markdown table of docs/aws.md"),
}

USAGE = "usage: python -m dtfbench <command> [args]   (or: dtfbench <command> [args])"


def overview():
    """The top-level help: the usage and every command with its line."""
    width = max(len(name) for name in COMMANDS)
    lines = [USAGE, "", "commands:"]
    lines += ["  %-*s  %s" % (width, name, line) for name, (_, line) in COMMANDS.items()]
    lines += ["", "`dtfbench <command> --help` shows the options of one command."]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv:
        print(overview(), file=sys.stderr)
        print("dtfbench: error: no command given", file=sys.stderr)
        return 2
    name, args = argv[0], argv[1:]
    if name in ("-h", "--help", "help"):
        print(overview())
        return 0
    if name not in COMMANDS:
        print(USAGE, file=sys.stderr)
        print(
            "dtfbench: error: unknown command %r; the commands are: %s (`dtfbench --help` says what each does)"
            % (name, ", ".join(COMMANDS)),
            file=sys.stderr,
        )
        return 2
    return call_with_frame_room(run_command, name, args)


def run_command(name, args):
    """Import command `name`'s module (TensorFlow too, for `train`) and run its main(args)."""
    return importlib.import_module(COMMANDS[name][0]).main(args)


def call_with_frame_room(function, *args, **kwargs):
    """``function(*args, **kwargs)``, called from a frame larger than a chunk of CPython's frame
    stack (_ROOMY_LOCALS): what it calls starts in a chunk of its own, with room to spare."""
    return function(*args, **kwargs)


# CPython 3.11 to 3.13 keeps a thread's frames in chunks of 16 KiB and frees a chunk as soon as
# the first frame in it returns (until gh-142183's fix of 2026, which keeps one spare): calls
# that reach past a chunk's end map and unmap 16 KiB each time. Where an end falls depends only
# on how deep the caller is, and the commands' hot paths sat at ends: `import tensorflow` in
# `train` mapped 17,806 chunks (its import 1.52 -> 1.37 s in the room), botocore's client and
# LIST parsing in `s3sync` 5,815 for a no-op re-sync of 303 keys (213 to 5,854 as the caller
# sat 0 to 30 small frames deeper). CPython sizes a new chunk to the frame plus 1,000 words,
# doubling from 16 KiB: a frame of 8,000 more locals (~8,020 words, 63 KiB; a 64-KiB chunk
# takes ~7,190) gets one of 128 KiB, and the ~65 KiB left there is far more than those calls
# reach (TensorFlow's nested imports go past 36 KiB: 708 chunks with that much room; 1
# with 65). On the Pythons with the fix this costs one 128-KiB chunk a process, so the check
# is for 3.11 and newer; elsewhere this is the plain call it reads as.
_ROOMY_LOCALS = 8000
if sys.implementation.name == "cpython" and sys.version_info >= (3, 11):
    _code = call_with_frame_room.__code__
    call_with_frame_room.__code__ = _code.replace(
        co_varnames=_code.co_varnames + tuple(f"_room{i}" for i in range(_ROOMY_LOCALS)),
        co_nlocals=_code.co_nlocals + _ROOMY_LOCALS,
    )
    del _code


if __name__ == "__main__":
    sys.exit(main())
