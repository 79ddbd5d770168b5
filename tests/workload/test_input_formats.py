"""LMDB beside TFRecords (issue 55, item 7; dtfbench.workload.formats): `dtfbench tfrecords
--format lmdb` writes the same records, and real dtfbench train processes read them, count an
epoch from them and evaluate on their held-out split, in a folder that holds no TFRecords."""

import json
import subprocess
import sys

import pytest
from digits_dataset import make_digits
from workload_helpers import SRC, run_train, task_env

pytestmark = pytest.mark.tf

RUN_TIMEOUT = 150
# LeNet on the 32-pixel digits (test_accuracy.py's settings).
LEARN = [
    "--model", "lenet", "--image_size", "32", "--num_classes", "11", "--batch_size", "16",
    "--optimizer", "momentum", "--learning_rate", "0.01", "--weight_decay", "0",
    "--num_warmup_batches", "2", "--display_every", "20",
]  # fmt: skip
# The records of each split in each format, as TF's pipeline (dtfbench.workload.formats) reads them.
# Two writes of the digits are compared (each format in a folder of its own).
COMPARE = """
import json, sys
import tensorflow as tf
from dtfbench.workload import formats
out = {}
for split in ("train", "validation"):
    read = {}
    for fmt, folder in (("tfrecord", sys.argv[1]), ("lmdb", sys.argv[2])):
        files = formats.shard_files(folder, split, fmt)
        # Parsed: a map's serialized order differs from one writing process to the next.
        read[fmt] = [tf.train.Example.FromString(r.numpy()) for r in formats.records(tf, files, fmt)]
        out[f"{split}_{fmt}_files"] = len(files)
        out[f"{split}_{fmt}_count"] = int(formats.record_count(tf, files, fmt))
    out[f"{split}_same"] = read["tfrecord"] == read["lmdb"]
print("COMPARED " + json.dumps(out))
"""


def write(folder, *args):
    return make_digits(folder, *args, env=task_env("formats"))


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    """The digits as TFRecords in one folder and as LMDB files only in another."""
    return write(tmp_path_factory.mktemp("tfrecord")), write(tmp_path_factory.mktemp("lmdb"), "--format", "lmdb")


def test_lmdb_files_hold_the_same_records_in_the_same_order(digits):
    tfrecords, lmdbs = digits
    assert sorted(p.name for p in lmdbs.iterdir()) == sorted(
        [*(f"{p.name}.lmdb" for p in tfrecords.iterdir() if p.name != "SHA256SUMS"), "SHA256SUMS"]
    )
    done = subprocess.run(
        [sys.executable, "-c", COMPARE, str(tfrecords), str(lmdbs)],
        capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(SRC), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    compared = json.loads(done.stdout.split("COMPARED ", 1)[1])
    assert compared == {
        "train_tfrecord_files": 4, "train_lmdb_files": 4, "train_tfrecord_count": 1433, "train_lmdb_count": 1433,
        "train_same": True,
        "validation_tfrecord_files": 1, "validation_lmdb_files": 1, "validation_tfrecord_count": 364,
        "validation_lmdb_count": 364, "validation_same": True,
    }  # fmt: skip
    # The checksums staging checks (dtfbench.node.stage_data) cover the LMDB files too.
    listed = (lmdbs / "SHA256SUMS").read_text()
    assert listed.count(".lmdb\n") == 5


def test_one_process_counts_its_epoch_and_evaluates_from_lmdb(tasks, digits):
    _, lmdbs = digits
    solo = tasks.start(
        "solo",
        ["--variable_update", "independent", *LEARN, "--eval_during_training_every_n_steps", "20",
         "--num_epochs", "0.5", "--data_dir", str(lmdbs), "--input_format", "lmdb"],
    )  # fmt: skip
    assert solo.wait(RUN_TIMEOUT) == 0, solo.stderr[-3000:]
    result = solo.result()
    steps = -(-716 // 16) - 2  # half an epoch of the 1,433 training images, counted from the LMDB files
    assert result["measured_steps"] == steps == result["accuracy"]["curve"][-1]["step"]
    assert f"training 0.5 epochs of 1433 images: {steps} measured" in solo.stderr
    assert "on 364 held-out images" in solo.stderr
    assert result["config"]["input_format"] == "lmdb"


@pytest.mark.parametrize("mode, num_ps", [("parameter_server", 1), ("collective_all_reduce", 0)])
def test_two_workers_each_read_their_own_lmdb_shards(tasks, digits, mode, num_ps):
    _, lmdbs = digits
    ps, workers = tasks.cluster(
        mode, num_ps, 2,
        extra=[*LEARN, "--num_batches", "40", "--eval_during_training_every_n_steps", "40", "--data_dir", str(lmdbs),
               "--input_format", "lmdb"],
    )  # fmt: skip
    for task in workers + ps:
        assert task.wait(RUN_TIMEOUT) == 0, f"{task.name}: {task.stderr[-3000:]}"
    chief = workers[0].result()
    assert chief["accuracy"]["curve"][-1]["step"] == 40 and chief["accuracy"]["curve"][-1]["top1"] > 0.2
    assert workers[1].result()["status"] == "ok"


def test_lmdb_asked_of_a_folder_without_lmdb_files_is_refused_before_tensorflow_starts(digits):
    tfrecords, _ = digits
    done = run_train(
        ["--variable_update", "independent", *LEARN, "--data_dir", str(tfrecords), "--input_format", "lmdb"]
    )
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"--data_dir {tfrecords}: no LMDB files named train-*.lmdb for --input_format lmdb" in done.stderr
