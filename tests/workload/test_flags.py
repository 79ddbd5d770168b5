"""Bad input is one clear line and exit 2, before TensorFlow is imported (no TF here)."""

import json
import subprocess
import sys

import pytest
from workload_helpers import task_env

from dtfbench.workload import flags
from dtfbench.workload.errors import UsageError

PS = ["--ps_hosts", "127.0.0.1:2230", "--worker_hosts", "127.0.0.1:2220,127.0.0.1:2221"]


def parse(*args, environ=None):
    return flags.parse(list(args), environ=environ if environ is not None else {})


@pytest.mark.parametrize(
    "args, names",
    [
        (["--model", "nosuchnet", "--variable_update", "independent"], "--model"),
        (["--batch_size", "0", "--variable_update", "independent"], "--batch_size"),
        (["--batch_size", "-3", "--variable_update", "independent"], "--batch_size"),
        (["--job_name", "worker", "--ps_hosts", "node1", "--worker_hosts", "node2:2220"], "'node1' has no port"),
        (["--job_name", "worker", "--ps_hosts", "node1:70000", "--worker_hosts", "node2:2220"], "70000 out of range"),
        (["--job_name", "worker", "--ps_hosts", "node1:0", "--worker_hosts", "node2:2220"], "out of range"),
        (["--job_name", "worker", "--ps_hosts", "node1:http", "--worker_hosts", "node2:2220"], "not a number"),
        (["--job_name", "worker", "--ps_hosts", ":2230", "--worker_hosts", "node2:2220"], "no host"),
        (["--job_name", "worker", "--ps_hosts", "a:1,,b:2", "--worker_hosts", "node2:2220"], "empty entry"),
        (["--job_name", "worker", "--ps_hosts", "a:1", "--worker_hosts", "b:2,b:2"], "listed twice"),
        (["--job_name", "worker", "--ps_hosts", "a:1", "--worker_hosts", "a:1"], "in both lists"),
        (["--job_name", "worker", "--task_index", "2", *PS], "--task_index 2"),
        (["--job_name", "ps", "--task_index", "1", *PS], "--task_index 1"),
        ([*PS], "--job_name"),
        (["--job_name", "chief", *PS], "--job_name chief"),
        (["--job_name", "worker", "--variable_update", "parameter_server"], "--job_name worker"),
        (["--variable_update", "parameter_server"], "--variable_update parameter_server"),
        (
            ["--job_name", "worker", "--worker_hosts", "a:1", "--variable_update", "distributed_replicated"],
            "needs parameter servers",
        ),
        (["--job_name", "worker", "--variable_update", "collective_all_reduce", *PS], "--ps_hosts"),
        (["--variable_update", "independent", "--data_format", "NCHW", "--device", "cpu"], "NCHW"),
        (["--variable_update", "independent", "--model", "inception3", "--image_size", "74"], "at least 75"),
        (["--variable_update", "independent", "--model", "lenet", "--image_size", "8"], "lenet"),
        (["--variable_update", "independent", "--data_dir", "/nonexistent/dir"], "--data_dir"),
        (["--variable_update", "independent", "--job_name", "worker"], "independent"),
        (["--variable_update", "independent", "--step_timeout", "0"], "--step_timeout"),
        (["--variable_update", "independent", "--cross_replica_sync", "maybe"], "--cross_replica_sync"),
        (["--variable_update", "independent", "--num_classes", "1"], "--num_classes"),
    ],
)
def test_bad_input_names_the_input(args, names):
    with pytest.raises(UsageError) as excinfo:
        parse(*args)
    message = str(excinfo.value)
    assert names in message
    assert "\n" not in message


def test_data_dir_without_tfrecords(tmp_path):
    (tmp_path / "notes.txt").write_text("no records here")
    with pytest.raises(UsageError, match="no TFRecord files named train-"):
        parse("--variable_update", "independent", "--data_dir", str(tmp_path))


def test_data_dir_with_tfrecords_is_accepted(tmp_path):
    (tmp_path / "train-00000-of-00001").write_bytes(b"")
    config, _ = parse("--variable_update", "independent", "--data_dir", str(tmp_path))
    assert config.data_dir == str(tmp_path)


def test_nchw_on_cpu_is_known_before_tf_when_gpus_are_hidden():
    with pytest.raises(UsageError, match="NCHW"):
        parse("--variable_update", "independent", "--data_format", "NCHW", environ={"CUDA_VISIBLE_DEVICES": ""})


def test_defaults_follow_tf_cnn_benchmarks():
    config, cluster = parse("--job_name", "worker", "--task_index", "1", *PS)
    assert (config.model, config.image_size, config.num_classes) == ("inception3", 299, 1001)
    assert (config.num_warmup_batches, config.num_batches, config.display_every) == (10, 100, 10)
    assert config.variable_update == "parameter_server" and config.cross_replica_sync is True
    assert config.optimizer == "sgd" and config.ps_placement == "round_robin"
    assert cluster.num_workers == 2 and cluster.num_ps == 1 and not cluster.is_chief


def test_model_default_image_sizes():
    for model, size in (("resnet50", 224), ("vgg16", 224), ("alexnet", 227), ("lenet", 28)):
        config, _ = parse("--variable_update", "independent", "--model", model)
        assert config.image_size == size


def test_cross_replica_sync_accepts_tf_cnn_benchmarks_spellings():
    for text, value in (("--cross_replica_sync=false", False), ("--cross_replica_sync=True", True)):
        config, _ = parse("--variable_update", "independent", text)
        assert config.cross_replica_sync is value


def test_tf_config_is_used_when_no_cluster_flags():
    tf_config = {
        "cluster": {"ps": ["10.0.0.1:2230"], "worker": ["10.0.0.1:2220", "10.0.0.2:2220"]},
        "task": {"type": "worker", "index": 1},
    }
    config, cluster = parse(environ={"TF_CONFIG": json.dumps(tf_config)})
    assert (cluster.job_name, cluster.task_index, cluster.num_ps, cluster.num_workers) == ("worker", 1, 1, 2)
    assert config.worker_hosts == "10.0.0.1:2220,10.0.0.2:2220"


def test_flags_win_over_tf_config():
    tf_config = {"cluster": {"worker": ["10.0.0.9:1"]}, "task": {"type": "worker", "index": 0}}
    _, cluster = parse("--job_name", "ps", *PS, environ={"TF_CONFIG": json.dumps(tf_config)})
    assert cluster.job_name == "ps" and cluster.num_workers == 2


def test_bad_tf_config():
    with pytest.raises(UsageError, match="TF_CONFIG"):
        parse(environ={"TF_CONFIG": "{not json"})
    with pytest.raises(UsageError, match="chief"):
        parse(
            environ={
                "TF_CONFIG": json.dumps(
                    {"cluster": {"chief": ["a:1"], "worker": ["b:2"]}, "task": {"type": "chief", "index": 0}}
                )
            }
        )


def test_check_devices_after_import():
    config, _ = parse("--variable_update", "independent", "--num_gpus", "2")
    with pytest.raises(UsageError, match="no GPU visible"):
        flags.check_devices(config, num_visible_gpus=0)
    config, _ = parse("--variable_update", "independent", "--num_gpus", "4", "--device", "gpu")
    with pytest.raises(UsageError, match="only 2 GPU"):
        flags.check_devices(config, num_visible_gpus=2)
    config, _ = parse("--variable_update", "independent", "--data_format", "NCHW")
    with pytest.raises(UsageError, match="NCHW"):
        flags.check_devices(config, num_visible_gpus=0)
    config, _ = parse("--variable_update", "independent")
    assert flags.check_devices(config, 1).data_format == "NCHW"
    assert flags.check_devices(config, 0).data_format == "NHWC"
    config, _ = parse("--variable_update", "independent", "--device", "cpu", "--num_gpus", "2")
    assert flags.check_devices(config, 0).num_gpus == 2  # CPU towers when asked for explicitly


def test_ps_accepts_the_workers_gpu_flags():
    # The launcher passes one command line to every task; a PS ignores the device flags.
    config, cluster = parse(
        "--job_name",
        "ps",
        "--data_format",
        "NCHW",
        "--num_gpus",
        "8",
        "--local_parameter_device",
        "gpu",
        "--variable_update",
        "distributed_replicated",
        *PS,
    )
    assert cluster.job_name == "ps" and config.device == "cpu"
    assert flags.check_devices(config, num_visible_gpus=0) == config


def _run_cli(args):
    code = (
        "import sys, dtfbench.workload.train as t; rc = t.main(sys.argv[1:]);"
        " print('tensorflow imported' if 'tensorflow' in sys.modules else 'tensorflow not imported'); sys.exit(rc)"
    )
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60, env=task_env("flags")
    )


@pytest.mark.parametrize(
    "args, names",
    [
        (["--model", "nosuchnet"], "--model"),
        (["--job_name", "worker", "--ps_hosts", "host", "--worker_hosts", "h:1"], "--ps_hosts"),
        (["--job_name", "worker", "--task_index", "5", *PS], "--task_index 5"),
    ],
)
def test_command_line_exit_code_and_one_line(args, names):
    done = _run_cli(args)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("dtfbench train: error: ") and names in lines[0]
    assert "tensorflow not imported" in done.stdout


def test_module_entry_point_rejects_bad_input():
    done = subprocess.run(
        [sys.executable, "-m", "dtfbench", "train", "--batch_size", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        env=task_env("flags"),
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["dtfbench train: error: --batch_size 0: must be at least 1"]
