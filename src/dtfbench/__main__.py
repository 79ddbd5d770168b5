"""``python -m dtfbench <command> [args]`` (or the ``dtfbench`` console script): every command.

The roles and playbooks call ``{{ ansible_playbook_python }} -m dtfbench <command>`` (or the
nodes' virtualenv Python), so the interpreter that runs a command is always the one named.

Each command is the ``main(argv)`` of one module, imported only once it is chosen: the
workload (``train``) runs on nodes without the report's matplotlib/scipy or Ansible, and
``store add`` runs on the controller without TensorFlow. A module here is a stage's own command,
or one of ``dtfbench.commands``, the front end that composes stages (``report``: the report with
the forecast's section). ``dtfbench <command> --help`` is the command's own help.

``dtfbench --help`` lists the commands a user runs; those in INTERNAL (run by the roles, the
plugins and the Slurm jobs, not by hand) are only named on its last line, and dispatch the same.
"""

import importlib
import sys

# name: (module whose main(argv) runs it, one line for `dtfbench --help`)
COMMANDS = {
    "train": ("dtfbench.workload.train", "the benchmark workload: one TF task (tf_cnn_benchmarks semantics on TF 2.x)"),
    "layout": ("dtfbench.plan.layout", "the cluster layout (who runs where on which port) as JSON"),
    "record": (
        "dtfbench.results.record",
        "record one finished run in the results store: store add of its JSON on stdin",
    ),
    "store": (
        "dtfbench.results.store",
        "add a run (a finished run's or a kept record) to the results store, or export it",
    ),
    "netprobe": ("dtfbench.results.netprobe", "store and show what a sweep's link probe measured"),
    "report": ("dtfbench.commands.report", "the table of a sweep, or the full report (tables, plots, index)"),
    "forecast": ("dtfbench.forecast.predict", "predicted scaling, the best PS count and a sweep's cost"),
    "adaptive_sweep": ("dtfbench.forecast.adaptive", "the next step of a num_ps=auto / stop_below_efficiency sweep"),
    "scaling_validation": ("dtfbench.forecast.validation", "the scaling model against the study's published tables"),
    "narrowing_validation": ("dtfbench.forecast.narrowing", "num_ps=auto against the study's published tables"),
    "interrupt": ("dtfbench.launch.interrupt", "the controller's watchdog for an ended ansible-playbook"),
    "s3sync": ("dtfbench.node.s3sync", "download an S3 prefix into a local directory (resumable, verified)"),
    "read_throughput": ("dtfbench.linux.read_throughput", "raw read throughput of a data directory"),
    "background_read": (
        "dtfbench.linux.background_read",
        "a bounded reader of a dataset, as another job's load on a shared file system (background_io)",
    ),
    "tfrecords": ("dtfbench.workload.tfrecords", "generate a small ImageNet-format TFRecord set"),
    "ec2_types": ("dtfbench.plan.ec2_types", "the EC2 GPU instance types as the markdown table of docs/aws.md"),
}
# Run by the roles, the plugins and the Slurm jobs, not by hand: `dtfbench --help` names them on
# one line, and they dispatch as the others. layout: roles/tf_virtualenv's check (the Slurm jobs
# run its file alone); interrupt: the dtfbench_interrupt callback's watchdog; adaptive_sweep:
# roles/benchmark/tasks/count.yml; record: `store add` of a finished run under its former name;
# background_read: roles/benchmark/tasks/run_ssh.yml (background_io).
INTERNAL = ("interrupt", "adaptive_sweep", "layout", "record", "background_read")
INTERNAL_LINE = "internal (run by the playbooks, not by hand): "

USAGE = "usage: python -m dtfbench <command> [args]   (or: dtfbench <command> [args])"


def user_commands():
    """The commands a user runs: every one but INTERNAL, in COMMANDS' order."""
    return [name for name in COMMANDS if name not in INTERNAL]


def overview():
    """The top-level help: the usage, every user command with its line, and the internal ones by name."""
    names = user_commands()
    width = max(len(name) for name in names)
    lines = [USAGE, "", "commands:"]
    lines += ["  %-*s  %s" % (width, name, COMMANDS[name][1]) for name in names]
    lines += ["", INTERNAL_LINE + ", ".join(INTERNAL)]
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
            "dtfbench: error: unknown command %r; the commands are: %s; internal: %s (`dtfbench --help` says "
            "what each does)" % (name, ", ".join(user_commands()), ", ".join(INTERNAL)),
            file=sys.stderr,
        )
        return 2
    return run_command(name, args)


def run_command(name, args):
    """Import command `name`'s module (TensorFlow too, for `train`) and run its main(args)."""
    return importlib.import_module(COMMANDS[name][0]).main(args)


if __name__ == "__main__":
    sys.exit(main())
