"""Checkpoints during the measured steps (issue 55, item 6; dtfbench.workload.checkpoints): real
dtfbench train processes save, time and restore them, in one process, under a PS and with the
collective strategy; what each checkpoint holds is read back with TF's own reader."""

import json
import subprocess
import sys

import pytest
from workload_helpers import SMALL, SRC, run_train

pytestmark = pytest.mark.tf

RUN_TIMEOUT = 150
# A checksum of every convolution kernel, as TF's reader sees a checkpoint: by name in a Saver's
# checkpoint (the graph modes), by object path in a tf.train.Checkpoint's (collective: its
# `variables` list, the model's variables in order).
READER = """
import json, sys
import numpy as np
import tensorflow as tf
reader = tf.train.load_checkpoint(sys.argv[1])
shapes = reader.get_variable_to_shape_map()
names = sorted(
    n for n, shape in shapes.items()
    if ("conv" in n and n.endswith("kernel")) or (n.startswith("variables/") and n.endswith("VARIABLE_VALUE") and len(shape) == 4)
)
print("KERNELS " + json.dumps({n: float(np.abs(reader.get_tensor(n)).sum()) for n in names}))
"""


def kernels(checkpoint):
    done = subprocess.run(
        [sys.executable, "-c", READER, str(checkpoint)],
        capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(SRC), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.split("KERNELS ", 1)[1])


def solo(tasks, name, *args):
    done = tasks.start(name, ["--variable_update", "independent", *SMALL, *args])
    assert done.wait(RUN_TIMEOUT) == 0, done.stderr[-3000:]
    return done


def test_one_process_saves_times_and_restores_what_it_saved(tasks, tmp_path):
    trained, fresh, resumed = tmp_path / "trained", tmp_path / "fresh", tmp_path / "resumed"
    first = solo(tasks, "first", "--checkpoint_every_steps", "3", "--checkpoint_dir", str(trained)).result()
    figures = first["checkpoints"]
    assert figures["saves"] == 2 and [s["step"] for s in figures["each"]] == [3, 6]
    assert all(s["seconds"] > 0 and s["bytes"] > 0 for s in figures["each"])
    assert figures["gb"] == pytest.approx(figures["each"][-1]["bytes"] / 1e9)
    assert figures["gb_per_s"] == pytest.approx(
        sum(s["bytes"] for s in figures["each"]) / 1e9 / figures["total_seconds"]
    )
    assert figures["max_seconds"] >= figures["mean_seconds"] > 0 and figures["restore_seconds"] is None
    assert (trained / "model.ckpt-6.index").is_file() and (trained / "checkpoint").is_file()
    # A restored run trains on from the saved variables: with a learning rate of 1e-30 (an update below
    # float32's resolution) it saves them again unchanged; a run that starts afresh (the same seed)
    # saves its initial ones, which training changed.
    for folder in (fresh, resumed):
        folder.mkdir()
    for name in (n for n in (trained).iterdir() if n.name.startswith("model.ckpt-6") or n.name == "checkpoint"):
        (resumed / name.name).write_bytes(name.read_bytes())
    args = ("--learning_rate", "1e-30", "--weight_decay", "0", "--checkpoint_every_steps", "6")
    again = solo(tasks, "again", *args, "--checkpoint_dir", str(resumed), "--restore_checkpoint").result()
    solo(tasks, "afresh", *args, "--checkpoint_dir", str(fresh))
    assert again["checkpoints"]["restore_seconds"] > 0 and again["checkpoints"]["restore_gb"] > 0
    saved, restored, initial = (kernels(d / "model.ckpt-6") for d in (trained, resumed, fresh))
    assert saved and restored == saved and initial != saved


def test_under_a_parameter_server_worker_0_saves_and_restores(tasks, tmp_path):
    folder = tmp_path / "ckpt"
    ps, workers = tasks.cluster(
        "parameter_server", 1, 2, ["--checkpoint_every_steps", "3", "--checkpoint_dir", str(folder)]
    )
    for task in workers + ps:
        assert task.wait(RUN_TIMEOUT) == 0, f"{task.name}\n{task.stderr[-3000:]}"
    chief, other = (w.result() for w in workers)
    assert chief["checkpoints"]["saves"] == 2 and other["checkpoints"] is None
    assert "checkpoint after step 3: " in workers[0].stderr
    names = set(kernels(folder / "model.ckpt-6"))
    assert names and not any("coordination" in n for n in names)
    ps, workers = tasks.cluster("parameter_server", 1, 2, ["--restore_checkpoint", "--checkpoint_dir", str(folder)])
    for task in workers + ps:
        assert task.wait(RUN_TIMEOUT) == 0, f"{task.name}\n{task.stderr[-3000:]}"
    restored = workers[0].result()["checkpoints"]
    assert restored["saves"] == 0 and restored["restore_seconds"] > 0
    assert f"restored {folder / 'model.ckpt-6'} in " in workers[0].stderr


def test_collective_workers_save_together_and_only_worker_0_keeps_it(tasks, tmp_path):
    folder = tmp_path / "ckpt"
    _, workers = tasks.cluster(
        "collective_all_reduce", 0, 2, ["--checkpoint_every_steps", "6", "--checkpoint_dir", str(folder)]
    )
    for task in workers:
        assert task.wait(RUN_TIMEOUT) == 0, f"{task.name}\n{task.stderr[-3000:]}"
    first, second = (w.result()["checkpoints"] for w in workers)
    assert (first["saves"], second["saves"]) == (1, 1) and first["gb"] > 0 and second["gb"] is None
    assert sorted(p.name for p in folder.iterdir()) == [
        "checkpoint",
        "model.ckpt-6.data-00000-of-00001",
        "model.ckpt-6.index",
    ]
    assert kernels(folder / "model.ckpt-6")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--checkpoint_every_steps", "5"], "give --checkpoint_dir, the folder the checkpoints go to"),
        (["--checkpoint_dir", "/tmp/x"], "--checkpoint_dir /tmp/x: nothing saves or restores there"),
        (["--checkpoint_every_steps", "5", "--checkpoint_dir", "/proc/dtfbench"], "--checkpoint_dir /proc/dtfbench: cannot write there"),
        (["--variable_update", "collective_all_reduce", "--worker_hosts", "127.0.0.1:1", "--job_name", "worker",
          "--checkpoint_every_secs", "30", "--checkpoint_dir", "/tmp/x"], "collective_all_reduce saves on every worker"),
    ],
)  # fmt: skip
def test_a_checkpoint_setting_that_cannot_work_is_refused_before_tensorflow_starts(args, message):
    done = run_train(
        ["--variable_update", "independent", *SMALL, *args] if "--variable_update" not in args else [*SMALL, *args]
    )
    assert done.returncode != 0 and message in done.stderr, done.stderr[-2000:]


def test_a_restore_from_a_folder_without_a_checkpoint_names_the_folder_and_the_fix(tasks, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    task = tasks.start(
        "restore", ["--variable_update", "independent", *SMALL, "--restore_checkpoint", "--checkpoint_dir", str(empty)]
    )
    assert task.wait(RUN_TIMEOUT) != 0
    assert f"--restore_checkpoint: no checkpoint in --checkpoint_dir {empty}; save one first" in task.stderr
