"""Our graph-mode networks are tf_cnn_benchmarks' networks: the same variables, per layer.

tf_cnn_benchmarks (tensorflow/benchmarks, pinned below) is cloned from the machine's git bundle
(the ``mirror_bundle`` fixture) at test time, never copied into the project. Both sides build
each model for training at its default image size (model_variables.py, one process per side)
and list every variable below ``cg/`` (name, shape, trainable) in creation order; any
difference names the model and the first layer that differs.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# tensorflow/benchmarks master, 2024-01 (the head of tensorflow-benchmarks.bundle).
PINNED_COMMIT = "8fb79079265933ad39bea628b777af662f5bf15d"
BUNDLE = "tensorflow-benchmarks.bundle"
MODELS = ("resnet50", "resnet101", "inception3", "vgg16", "alexnet", "lenet")


@pytest.fixture(scope="module")
def tf_cnn_benchmarks_dir(tmp_path_factory, mirror_bundle):
    clone = tmp_path_factory.mktemp("tensorflow-benchmarks")
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(mirror_bundle(BUNDLE)), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", PINNED_COMMIT], check=True)
    return clone / "scripts" / "tf_cnn_benchmarks"


def model_variables(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run(
        [sys.executable, str(HERE / "model_variables.py"), *args], capture_output=True, text=True, env=env, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = [x for x in done.stdout.splitlines() if x.startswith("MODEL_VARIABLES ")][-1]
    return json.loads(line.split(" ", 1)[1])


def first_difference(ours, theirs):
    for index, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"variable {index}: ours {a}, tf_cnn_benchmarks {b}"
    if len(ours) != len(theirs):
        longer, who = (ours, "ours") if len(ours) > len(theirs) else (theirs, "tf_cnn_benchmarks")
        return f"{len(ours)} vs {len(theirs)} variables; {who} has more, from {longer[min(len(ours), len(theirs))]}"
    return None


def test_every_model_has_tf_cnn_benchmarks_variables_per_layer(tf_cnn_benchmarks_dir):
    theirs = model_variables("theirs", str(tf_cnn_benchmarks_dir), *MODELS)
    ours = model_variables("ours", *MODELS)
    differences = {}
    for model in MODELS:
        (our_size, our_vars), (their_size, their_vars) = ours[model], theirs[model]
        assert our_size == their_size, f"{model}: default image size {our_size}, tf_cnn_benchmarks' {their_size}"
        assert their_vars, f"{model}: no variables built from tf_cnn_benchmarks"
        difference = first_difference(our_vars, their_vars)
        if difference:
            differences[model] = difference
    assert not differences, "networks differ from tf_cnn_benchmarks':\n" + "\n".join(
        f"  {m}: {d}" for m, d in differences.items()
    )
