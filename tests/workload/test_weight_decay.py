"""The same loss in every mode: cross-entropy plus tf_cnn_benchmarks' L2 weight decay.

weight_decay_terms.py builds, in one TF process, the loss of the graph-mode modes (two towers)
and the loss collective_all_reduce sums over its replicas (two), each with and without
--weight_decay on the same variables and inputs. ResNet-50 (batch norm, no biases on its
convs) at 32 px: the decay must be exactly weight_decay x the L2 of every trainable variable
but batch norm's, counted once however many towers or replicas share the step.
"""

import pytest
from workload_helpers import helper_output

pytestmark = pytest.mark.tf

WEIGHT_DECAY = 0.01  # large enough that the term stands far above float32 rounding


@pytest.fixture(scope="module")
def terms():
    return helper_output("weight_decay_terms.py", "resnet50", "32", str(WEIGHT_DECAY), prefix="WEIGHT_DECAY_TERMS")


@pytest.mark.parametrize("mode", ["graph", "collective"])
def test_loss_adds_the_l2_of_all_but_batch_norm_variables_once(terms, mode):
    t = terms[mode]
    assert t["l2_all"] > t["l2"] > 0  # the network has batch-norm variables to leave out
    added = t["loss"] - t["loss_without_decay"]
    assert added == pytest.approx(WEIGHT_DECAY * t["l2"], rel=1e-4)
