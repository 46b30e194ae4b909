"""distval/results/shape.py's rules at their edges: a fall just below half the peak, a straggler at exactly 1.2x, in
exactly three figures, in a world of two ranks, and in three of five figures (not most); the other ranks' median
leaves out the straggler alone; rows of another world are left out; the node from the ranks per node. The rules
themselves: tests/results/test_shape.py."""

from __future__ import annotations

from distval.results.bandwidth import Figure
from distval.results.shape import Straggler, falls, straggler
from tests.results.test_shape import figure


def test_a_size_just_below_half_the_peak_falls_and_the_peak_is_the_first_size_that_reached_it() -> None:
    assert len(falls([figure("x", 1, 1.0), figure("x", 2, 0.4999995)])) == 1
    (found,) = falls([figure("x", 1, 1.0), figure("x", 2, 1.0), figure("x", 4, 0.4)])
    assert found.peak_label == "1B"


def rows(*times: tuple[float, ...]) -> list[Figure]:
    return [figure("all_reduce", 2**k, 1.0, t) for k, t in enumerate(times)]


def test_a_straggler_at_exactly_its_ratio_is_one_and_just_below_it_is_not() -> None:
    at = straggler(rows(*[(100.0, 100.0, 100.0, 120.0)] * 4), 2)
    assert at is not None and at.ratio == 1.2
    assert straggler(rows(*[(100.0, 100.0, 100.0, 119.99995)] * 4), 2) is None


def test_three_figures_are_enough_and_three_of_five_are_not_most() -> None:
    slow = (100.0, 100.0, 100.0, 150.0)
    assert straggler(rows(slow, slow, slow), 2) is not None
    other = (150.0, 100.0, 100.0, 100.0)
    assert straggler(rows(slow, slow, slow, other, other), 2) is None


def test_a_world_of_two_ranks_can_have_a_straggler_and_one_rank_none() -> None:
    found = straggler(rows(*[(100.0, 150.0)] * 4), 1)
    assert found is not None and (found.rank, found.node) == (1, 1)
    assert straggler(rows(*[(100.0,)] * 4), 1) is None


def test_the_other_ranks_median_leaves_out_the_straggler_alone() -> None:
    found = straggler(rows(*[(200.0, 100.0, 140.0, 100.0)] * 4), 4)
    assert found is not None and (found.rank, found.node, found.ratio) == (0, 0, 2.0)


def test_rows_of_another_world_than_the_first_figures_are_left_out() -> None:
    four, three = (100.0, 100.0, 100.0, 150.0), (100.0, 100.0, 150.0)
    found = straggler(rows(four, three, four, four, four, three), 2)
    assert found is not None and (found.rank, found.figures) == (3, 4)


def test_the_node_is_the_rank_over_the_ranks_per_node() -> None:
    found = [straggler(rows(*[(100.0, 100.0, 100.0, 150.0)] * 4), n) for n in (1, 2, 4, 0)]
    assert [s.node if isinstance(s, Straggler) else None for s in found] == [3, 1, 0, 3]
