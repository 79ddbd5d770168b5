"""Checkpoints during the measured steps, timed: what the Summitdev study names as the reason the
ResNets scale out worse ("Checkpointing with Tensorflow takes about 5 seconds in LeNet, but it
takes about 70 seconds in ResNet-101").

``--checkpoint_every_steps N`` saves after every N-th measured step, ``--checkpoint_every_secs S``
after the first step S seconds past the last save (or the first measured step), into
``--checkpoint_dir``. Who saves: worker 0, with TF's Saver over every variable, wherever it
lives (the PSs' in the PS modes, gathered to worker 0, written by it); in collective_all_reduce
every worker saves at the same steps (its strategy needs them all), worker 0 into
``--checkpoint_dir`` and the others into a folder of their own under it, removed after each save
(TF's advice for MultiWorkerMirroredStrategy). A save runs between two measured steps: the
measured window holds it, so images/sec says what training costs with checkpoints (docs/storage.md),
while each save's own seconds and bytes are recorded: per run the count, the mean and the
longest save, the checkpoint's size and the rate it was written at (bytes over seconds).

``--restore_checkpoint`` restores the latest checkpoint of ``--checkpoint_dir`` before the first
step and times it: what resuming a run costs.
"""

from __future__ import annotations

import os
import shutil
import time

from .errors import RunFailure

PREFIX = "model.ckpt"


def writable_problem(folder):
    """Why this process cannot write checkpoints into `folder` (made when missing); None if it can."""
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".dtfbench-write-test-{os.getpid()}")
        with open(probe, "wb") as handle:
            handle.write(b"x")
        os.unlink(probe)
    except OSError as err:
        return (
            f"cannot write there ({err.strerror or err}); give a folder this user can write, on a disk with room "
            "for the model's variables"
        )
    return None


def latest(tf, folder):
    """The newest checkpoint of `folder`, for --restore_checkpoint; RunFailure where there is none."""
    path = tf.train.latest_checkpoint(folder)
    if path is None:
        raise RunFailure(
            f"--restore_checkpoint: no checkpoint in --checkpoint_dir {folder}; save one first "
            "(--checkpoint_every_steps N)"
        )
    return path


# The failures in one set of words for every mode (a Saver in a session, or a tf.train.Checkpoint):
# the result's reason reads the same whichever mode failed.
def save_failed(folder, exc):
    """The RunFailure of a save into --checkpoint_dir `folder` that raised `exc`."""
    return RunFailure(f"saving a checkpoint into --checkpoint_dir {folder} failed: {exc}")


def restore_failed(path, exc):
    """The RunFailure of restoring the checkpoint `path` that raised `exc`."""
    return RunFailure(f"restoring {path} failed: {exc}")


def checkpoint_bytes(path):
    """Bytes of the checkpoint written as `path` (its .index and .data-* files)."""
    folder, name = os.path.split(path)
    return sum(
        os.path.getsize(os.path.join(folder, f))
        for f in os.listdir(folder or ".")
        if f == f"{name}.index" or f.startswith(f"{name}.data-")
    )


class Checkpoints:
    """When to save, and every save's and restore's figures; ``save(step)`` and ``restore()``
    are the mode's own (a Saver in a session, or a tf.train.Checkpoint), returning the path."""

    def __init__(self, config, save, restore=None, writes=True):
        self.every_steps = config.checkpoint_every_steps
        self.every_secs = config.checkpoint_every_secs
        self.folder = config.checkpoint_dir
        self._save, self._restore = save, restore
        self.writes = writes  # False: a collective worker other than 0 (its copy is thrown away)
        self.saves = []  # [{"step", "seconds", "bytes"}]
        self.restored = None
        self.last = None

    @property
    def enabled(self):
        return bool(self.every_steps or self.every_secs)

    def start(self, now=None):
        self.last = time.monotonic() if now is None else now

    def due(self, step, now=None):
        if self.every_steps and step % self.every_steps == 0:
            return True
        now = time.monotonic() if now is None else now
        return bool(self.every_secs) and self.last is not None and now - self.last >= self.every_secs

    def save(self, step):
        began = time.perf_counter()
        path = self._save(step)
        seconds = time.perf_counter() - began
        self.last = time.monotonic()
        self.saves.append({"step": step, "seconds": seconds, "bytes": checkpoint_bytes(path) if self.writes else None})
        return self.saves[-1]

    def restore(self):
        began = time.perf_counter()
        path = self._restore()
        self.restored = {"path": path, "seconds": time.perf_counter() - began, "bytes": checkpoint_bytes(path)}
        return self.restored

    def summary(self):
        """The run's checkpoint figures (seconds and GB, 10^9 bytes), None where nothing was saved or restored."""
        if not self.saves and self.restored is None:
            return None
        seconds = [s["seconds"] for s in self.saves]
        sizes = [s["bytes"] for s in self.saves if s["bytes"] is not None]
        written = sum(sizes)
        return {
            "dir": self.folder,
            "every_steps": self.every_steps or None,
            "every_secs": self.every_secs or None,
            "saves": len(self.saves),
            "mean_seconds": sum(seconds) / len(seconds) if seconds else None,
            "max_seconds": max(seconds) if seconds else None,
            "total_seconds": sum(seconds),
            "gb": sizes[-1] / 1e9 if sizes else None,
            "gb_per_s": written / 1e9 / sum(seconds) if sizes and sum(seconds) > 0 else None,
            "restore_seconds": self.restored["seconds"] if self.restored else None,
            "restore_gb": self.restored["bytes"] / 1e9 if self.restored else None,
            "each": self.saves,
        }

    def line(self, save):
        size = f", {save['bytes'] / 1e9:.3g} GB" if save["bytes"] is not None else ""
        return f"checkpoint after step {save['step']}: {save['seconds']:.2f} s{size}"


def scratch_folder(folder, task_index):
    """Where a collective worker other than 0 writes its copy (removed after each save)."""
    return os.path.join(folder, f".worker-{task_index}")


def remove_scratch(folder):
    shutil.rmtree(folder, ignore_errors=True)
