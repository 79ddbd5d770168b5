"""Our networks are tf_cnn_benchmarks' networks: the same variables, per layer, in every mode.

tf_cnn_benchmarks (tensorflow/benchmarks, pinned below) is cloned from the machine's git bundle
(the ``mirror_bundle`` fixture) at test time, never copied into the project. Both sides build
each model for training at its default image size (model_variables.py, one process per side;
ours twice: as the graph-mode modes build it and as collective_all_reduce does) and list every
variable below ``cg/`` (name, shape, trainable) in creation order; any difference names the
model and the first layer that differs.
"""

import subprocess

import pytest
from workload_helpers import model_variables

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


def first_difference(ours, theirs):
    for index, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return f"variable {index}: ours {a}, tf_cnn_benchmarks {b}"
    if len(ours) != len(theirs):
        longer, who = (ours, "ours") if len(ours) > len(theirs) else (theirs, "tf_cnn_benchmarks")
        return f"{len(ours)} vs {len(theirs)} variables; {who} has more, from {longer[min(len(ours), len(theirs))]}"
    return None


@pytest.fixture(scope="module")
def their_variables(tf_cnn_benchmarks_dir):
    return model_variables("theirs", str(tf_cnn_benchmarks_dir), *MODELS)


# ours: the graph-mode modes' networks; collective: collective_all_reduce's (eager, strategy-made).
@pytest.mark.parametrize("side", ["ours", "collective"])
def test_every_model_has_tf_cnn_benchmarks_variables_per_layer(their_variables, side):
    theirs = their_variables
    ours = model_variables(side, *MODELS)
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


# The Keras twins (dtfbench.workload.models) are the baseline of the speed and accuracy benchmarks
# against Keras (benchmarks/workload_vs_keras.py, accuracy_vs_keras.py): a twin with other shapes
# (LeNet's "valid" convolutions once gave 2.5x fewer weights) compares two different networks.
TWINS = ("alexnet", "lenet", "small_cnn", "trivial")


def test_the_keras_twins_are_our_networks_layer_by_layer_with_our_initial_weights():
    ours, keras = model_variables("ours_initial", *TWINS), model_variables("keras", *TWINS)
    for model in TWINS:
        our_shapes = [shape for _, shape, _, _ in ours[model][1]]
        twin_shapes = [shape for _, shape, _, _ in keras[model][1]]
        assert twin_shapes == our_shapes, f"{model}: the Keras twin's weights {twin_shapes}, ours {our_shapes}"
        # Drawn alike (Keras' Glorot uniform once made the twin learn the digits half as fast per epoch):
        # each layer's initial spread, pooled over draws (model_variables.py), within 10% of ours (biases: 0).
        for (name, shape, _, our_std), (_, _, _, twin_std) in zip(ours[model][1], keras[model][1]):
            assert twin_std == pytest.approx(our_std, rel=0.1, abs=1e-9), (
                f"{model} {name} {shape}: {twin_std} vs {our_std}"
            )
