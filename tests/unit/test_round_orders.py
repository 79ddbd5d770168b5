"""The order of the sides of a benchmark's rounds (benchmarks/bench_env.py): a Williams design,
P3's engines (benchmarks/staging.py) and P1's two launchers (benchmarks/orchestration_overhead.py)."""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from bench_env import cycle_length, orders  # noqa: E402


@pytest.mark.parametrize("count", [2, 3, 4, 7, 8])
def test_each_engine_runs_in_every_position_and_after_every_other_equally(count):
    names = [f"engine{i}" for i in range(count)]
    cycle = cycle_length(count)
    rows = [order for _, order in orders(names, cycle)]

    assert all(sorted(row) == names for row in rows)
    for position in range(count):
        assert sorted(row[position] for row in rows[:count]) == names
    after = collections.Counter((row[i - 1], row[i]) for row in rows for i in range(1, count))
    assert set(after) == {(a, b) for a in names for b in names if a != b}
    assert len(set(after.values())) == 1, after


def test_a_whole_cycle_is_as_many_rounds_as_engines_twice_that_for_an_odd_number():
    assert [cycle_length(n) for n in (2, 3, 6, 7)] == [2, 6, 6, 14]


def test_the_rounds_repeat_the_cycle():
    names = ["a", "b", "c"]
    rows = [order for _, order in orders(names, 8)]
    assert rows[6:] == rows[:2]


def test_two_sides_take_turns_going_first():
    assert [order for _, order in orders(["ours", "bare"], 3)] == [["ours", "bare"], ["bare", "ours"], ["ours", "bare"]]
