"""PS placement: round-robin vs greedy (the study's §2.1.1 example), without TensorFlow."""

from types import SimpleNamespace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dtfbench.workload.placement import (
    GreedyLoadBalancingStrategy,
    RoundRobinStrategy,
    bytes_per_ps,
    greedy_assign,
    op_bytes,
    ps_task_of,
    round_robin_assign,
)

# weights_1 [784,100], biases_1 [100], weights_2 [100,10], biases_2 [10], float32.
STUDY = {"weights_1": 784 * 100 * 4, "biases_1": 100 * 4, "weights_2": 100 * 10 * 4, "biases_2": 10 * 4}
SIZES = list(STUDY.values())


def test_round_robin_on_three_ps_matches_the_study():
    # "weights_1 ... first PS, biases_1 ... second, weights_2 ... third, biases_2 back on the first"
    assert round_robin_assign(SIZES, 3) == [0, 1, 2, 0]
    assert bytes_per_ps(SIZES, round_robin_assign(SIZES, 3), 3) == [313640, 400, 4000]


def test_round_robin_on_two_ps_puts_all_weights_on_the_first():
    assert round_robin_assign(SIZES, 2) == [0, 1, 0, 1]
    assert bytes_per_ps(SIZES, [0, 1, 0, 1], 2) == [317600, 440]


def test_greedy_on_three_ps():
    tasks = greedy_assign(SIZES, 3)
    assert tasks == [0, 1, 2, 1]  # biases_2 joins the lightest PS, not the one holding weights_1
    assert bytes_per_ps(SIZES, tasks, 3) == [313600, 440, 4000]


def test_greedy_on_two_ps_keeps_the_small_ones_off_the_big_one():
    tasks = greedy_assign(SIZES, 2)
    assert tasks == [0, 1, 1, 1]
    assert bytes_per_ps(SIZES, tasks, 2) == [313600, 4440]


def test_greedy_ties_go_to_the_lowest_index():
    assert greedy_assign([8, 8, 8, 8], 2) == [0, 1, 0, 1]


def test_num_ps_must_be_positive():
    with pytest.raises(ValueError):
        greedy_assign([1], 0)


@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=60), st.integers(min_value=1, max_value=8))
def test_greedy_is_within_the_list_scheduling_bound(sizes, num_ps):
    loads = bytes_per_ps(sizes, greedy_assign(sizes, num_ps), num_ps)
    assert sum(loads) == sum(sizes)
    if sizes:
        # Graham's bound for greedy list scheduling: max load <= mean load + largest item.
        assert max(loads) <= sum(sizes) / num_ps + max(sizes)


class FakeOp:
    """What replica_device_setter hands the strategy: an op with shape and dtype attrs."""

    def __init__(self, shape, dtype_size=4):
        self._attrs = {
            "shape": SimpleNamespace(dim=[SimpleNamespace(size=d) for d in shape]),
            "dtype": SimpleNamespace(size=dtype_size),
        }

    def get_attr(self, name):
        if name not in self._attrs:
            raise ValueError(name)
        return self._attrs[name]


class NoAttrs:
    def get_attr(self, name):
        raise ValueError(name)


def test_greedy_strategy_callable_places_ops_like_the_pure_function():
    strategy = GreedyLoadBalancingStrategy(3)
    ops = [FakeOp([784, 100]), FakeOp([100]), FakeOp([100, 10]), FakeOp([10])]
    assert [strategy(op) for op in ops] == [0, 1, 2, 1]
    assert strategy.loads == [313600, 440, 4000]


def test_round_robin_strategy_callable():
    strategy = RoundRobinStrategy(3)
    assert [strategy(FakeOp([1])) for _ in range(5)] == [0, 1, 2, 0, 1]


def test_op_bytes():
    assert op_bytes(FakeOp([784, 100])) == 313600
    assert op_bytes(FakeOp([], dtype_size=8)) == 8  # scalar int64 (global_step)
    assert op_bytes(FakeOp([-1, 3])) == 0  # unknown shape carries no weight
    assert op_bytes(NoAttrs()) == 0


def test_ps_task_of():
    assert ps_task_of("/job:ps/task:2/device:CPU:0") == 2
    assert ps_task_of("/job:ps/replica:0/task:1") == 1
    assert ps_task_of("/job:worker/task:0/device:CPU:0") is None
    assert ps_task_of("") is None
