"""Every command the README shows is run by a test: here, or by the test that it names.

The commands are extracted from the README's ``sh`` blocks (continuation lines joined,
comments dropped) and from the Performance table's ``make bench BENCH=...``. Each must have
a binding below, and every binding must still match a command of the README:

- ``HERE``: cheap and side-effect free, so this file runs it as written and checks its exit
  status and what it prints;
- ``("tests/...::test_name", ...)``: the tests that run the same command on real parts (a
  sweep, a test bed, moto, Slurm). The check is that the tests exist and that their files name
  the command's entry point and every variable or option the README line passes, so a README
  line that gains an option no test passes fails here;
- ``.ci/run``: `make test`, which CI runs;
- ``BENCH``: ``make bench`` names, which scripts/bench.sh must know (the benchmarks are not
  part of the test suite: they take minutes to hours).
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent

HERE = "here"
BENCH = "bench"

# README command -> where it is run: HERE, BENCH, ".ci/run", or the tests that run it together
# (a command whose options are spread over several tests, e.g. provisioning then configuring).
BINDINGS: dict[str, str | tuple[str, ...]] = {
    "make run": ("tests/integration/test_local_benchmark.py::test_local_benchmark_measures_records_and_cleans_up",),
    "make test": ".ci/run",
    "ansible-playbook run-benchmark.yml -e gpus=1,2,4 "
    "-e variable_update=parameter_server,distributed_replicated -e repetitions=5": (
        "tests/integration/test_local_sweep_report.py::test_short_sweep_ends_in_store_report_and_plots",
    ),
    "ansible-playbook run-benchmark.yml -e gpus=4 -e num_ps=auto -e stop_below_efficiency=0.5": (
        "tests/integration/test_adaptive_sweep.py::test_num_ps_auto_narrows_then_stop_below_efficiency_stops_and_says_why",
    ),
    "ansible-playbook run-benchmark.yml -e gpus=1,2 -e eval_every_steps=20 -e target_accuracy=0.5 -e max_epochs=6 "
    "-e optimizer=momentum -e learning_rate=0.01 -e lr_scaling=linear -e warmup_epochs=1": (
        "tests/integration/test_local_benchmark.py::test_a_sweep_with_evaluation_records_held_out_accuracy",
    ),
    "ansible-playbook launch.yml -e script=examples/mnist_distributed.py -e gpus=2": (
        "tests/integration/test_launch.py::test_user_program_runs_on_the_layout_and_is_stopped",
    ),
    "ansible-doc -t inventory ip_pairs": HERE,
    "ansible-playbook run-benchmark.yml -i my-cluster.ip_pairs.yml -e system=testbed -e gpus=4": (
        "tests/integration/test_testbed_benchmark.py::test_benchmark_across_four_hosts_twice",
    ),
    "ansible-playbook provision-aws.yml -e cluster_name=study -e instance_type=p2.8xlarge -e gpus=16 "
    "-e ssh_cidr=203.0.113.7/32 -e node_profile=cscs2017 -e nvidia_cudnn_tarball=s3://my/cudnn-8.0-v5.1.tgz "
    "-e dataset_source=s3://my-bucket/imagenet": (
        "tests/aws/test_provision.py::test_provision_is_secure_idempotent_and_shrinks",
        "tests/aws/test_provision_testbed.py::test_nodes_that_cannot_be_configured_tear_the_cluster_down",
        "tests/nodes/test_nvidia_stack_validation.py",
        "tests/aws/test_dataset_testbed.py::test_dataset_role_syncs_to_every_host_and_a_run_reads_it",
    ),
    "ansible-playbook run-benchmark.yml -i inventories/aws/study/study.aws_ec2.yml -e system=aws "
    "-e gpus=1,2,4,8,16 -e data=real -e data_dir=/mnt/local_ssd/imagenet -e repetitions=5": (
        "tests/integration/test_testbed_benchmark.py::test_benchmark_across_four_hosts_twice",
        "tests/aws/test_dataset_testbed.py::test_dataset_role_syncs_to_every_host_and_a_run_reads_it",
    ),
    "ansible-playbook teardown-aws.yml -e cluster_name=study": (
        "tests/aws/test_teardown.py::test_teardown_leaves_nothing_and_twice_changes_nothing",
    ),
    "ansible-playbook run-benchmark.yml -i login-node.yml -e system=daint -e gpus=64": (
        "tests/integration/test_slurm_study.py::test_daint_defaults_run_the_studys_program_on_its_tf_1_1_module",
    ),
    "ansible-playbook run-benchmark.yml -i login-node.yml -e system=daint -e gpus=64 -e submit=false": (
        "tests/integration/test_slurm_study.py::test_daint_defaults_run_the_studys_program_on_its_tf_1_1_module",
    ),
    "dtfbench train --job_name ps --task_index 0 --ps_hosts localhost:2230 --worker_hosts localhost:2220": (
        "tests/workload/test_training_processes.py::test_parameter_server_sync",
    ),
    "dtfbench train --job_name worker --task_index 0 --ps_hosts localhost:2230 --worker_hosts localhost:2220 "
    "--model small_cnn --num_batches 20": ("tests/workload/test_training_processes.py::test_parameter_server_sync",),
    "dtfbench tfrecords --output_dir /tmp/imagenet-mini --shards 4 --images_per_shard 64": (
        "tests/workload/test_training_processes.py::test_real_data_from_generated_tfrecords",
    ),
    "dtfbench tfrecords --output_dir /tmp/digits --dataset digits": (
        "tests/workload/test_accuracy.py::test_the_digits_are_imagenet_shards_with_a_fixed_stratified_split",
    ),
    "ansible-playbook report.yml": (
        "tests/integration/test_report_playbook.py::test_report_playbook_builds_then_changes_nothing",
    ),
    "dtfbench report table": (
        "tests/integration/test_local_sweep_report.py::test_short_sweep_ends_in_store_report_and_plots",
    ),
    "dtfbench store export --format csv --output results/runs.csv": (
        "tests/unit/test_store_and_report.py::test_export_csv_and_json",
    ),
    "dtfbench forecast --system aws-p2.xlarge --gpus 1,2,4,8,16,32,64,128": HERE,
    "dtfbench scaling_validation": HERE,
    "dtfbench --help": HERE,
}


def _sh_blocks(text: str) -> list[str]:
    return re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)


def _commands_of(block: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", "", block)
    commands = []
    for line in joined.splitlines():
        line = re.split(r"\s+#\s", line, maxsplit=1)[0].strip()
        if not line or line.startswith("#") or line.startswith(". "):
            continue  # `. .venv/bin/activate` sets up the shell; it is no command to test
        commands.append(re.sub(r"\s*&$", "", re.sub(r"\s+", " ", line)))
    return commands


def readme_commands() -> list[str]:
    """The shell commands of the README's sh blocks, and `dtfbench --help` that its text names."""
    text = README.read_text()
    found = [c for block in _sh_blocks(text) for c in _commands_of(block)]
    if "`dtfbench --help`" in text:
        found.append("dtfbench --help")
    return list(dict.fromkeys(found))


def readme_bench_names() -> list[str]:
    return sorted(set(re.findall(r"`make bench BENCH=([\w-]+)`", README.read_text())))


def test_every_readme_command_has_a_binding_and_every_binding_a_command():
    commands = readme_commands()
    assert len(commands) >= 15, commands  # the extraction itself still finds the README's blocks
    unbound = [c for c in commands if c not in BINDINGS]
    stale = [c for c in BINDINGS if c not in commands]
    assert not unbound, f"README commands no test runs (bind each in {__name__}.BINDINGS): {unbound}"
    assert not stale, f"bindings for commands the README no longer shows: {stale}"


def _tokens(command: str) -> list[str]:
    """What a test of `command` must name: the entry point and each variable or option passed."""
    words = shlex.split(command)
    tokens = []
    if words[0] == "ansible-playbook":
        tokens.append(words[1])
        tokens += [w.split("=", 1)[0] + "=" for prev, w in zip(words, words[1:]) if prev == "-e"]
        if "-i" in words:
            tokens.append("-i")
    elif words[0] == "dtfbench":
        tokens.append(words[1])
        tokens += [w for w in words[2:] if w.startswith("--")]
    return tokens


def _named(token: str, source: str) -> bool:
    """Whether a test's source passes `token`: a variable `name=` also as a dict key or a keyword
    argument (`{"name": ...}`, `extra_vars(name=...)`), as the tests build their -e arguments."""
    if token.endswith("=") and not token.startswith("-"):
        name = token[:-1]
        return bool(re.search(rf"(?<![\w-]){re.escape(name)}=|[\"']{re.escape(name)}[\"']", source))
    return token in source


def _test_functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}


HARNESS = ("tests/harness/playbook_harness.py", "tests/workload/workload_helpers.py")


@pytest.mark.parametrize("command", [c for c, where in BINDINGS.items() if isinstance(where, tuple)])
def test_the_bound_tests_run_the_command(command):
    source = ""
    for where in BINDINGS[command]:
        file, _, name = where.partition("::")
        path = ROOT / file
        assert path.is_file(), f"{where}: no such test file"
        assert not name or name in _test_functions(path), f"{where}: no such test"
        source += path.read_text()
    # The shared argument lists and process helpers a test may pass by name.
    source += "".join((ROOT / h).read_text() for h in HARNESS if (ROOT / h).is_file())
    if command == "make run":  # what `make run` runs: run-benchmark.yml with the README's ARGS
        assert "ansible-playbook run-benchmark.yml $(ARGS)" in (ROOT / "Makefile").read_text()
        assert "run-benchmark.yml" in source
        return
    missing = [t for t in _tokens(command) if not _named(t, source)]
    assert not missing, f"{BINDINGS[command]} do not pass {missing} of the README's `{command}`"


def test_ci_runs_the_readme_test_command():
    assert [c for c, where in BINDINGS.items() if where == ".ci/run"] == ["make test"]
    assert "make test" in (ROOT / ".ci/run").read_text(), "CI must run the README's test command"


def _run(command: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg")}
    return subprocess.run(shlex.split(command), cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


# What each command run here must print: its output, not only its exit status, is the check.
EXPECTED_OUTPUT = {
    "ansible-doc -t inventory ip_pairs": "public_ips_file",
    "dtfbench forecast --system aws-p2.xlarge --gpus 1,2,4,8,16,32,64,128": "Scaling: beyond",
    "dtfbench scaling_validation": "median",
    "dtfbench --help": "forecast",
}


@pytest.mark.parametrize("command", [c for c, where in BINDINGS.items() if where == HERE])
def test_the_cheap_commands_run_as_written(command, tmp_path):
    done = _run(command, tmp_path)
    assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert EXPECTED_OUTPUT[command] in done.stdout, done.stdout[-2000:]


def test_every_benchmark_the_readme_names_exists():
    names = readme_bench_names()
    assert len(names) >= 5, names
    script = (ROOT / "scripts/bench.sh").read_text()
    known = set(re.findall(r"^\s+([\w-]+)\) ", script, flags=re.M))
    assert set(names) <= known, f"README names benchmarks scripts/bench.sh does not run: {set(names) - known}"
