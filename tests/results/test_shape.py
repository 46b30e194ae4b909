"""What a run's own figures say with no reference (distval/results/shape.py): busbw that falls past its plateau, and
a rank consistently slower than the others, named with its node."""

from __future__ import annotations

from distval.results.bandwidth import Figure
from distval.results.shape import FALL_FRACTION, falls, straggler


def figure(operation: str, size: int, busbw: float, ranks: tuple[float, ...] | None = None) -> Figure:
    return Figure(operation, size, f"{size}B", 1.0, busbw, busbw, 5, 4, rank_time_us=ranks)


def test_busbw_falling_past_its_plateau_is_named_and_a_rising_curve_is_not() -> None:
    rising = [figure("all_reduce", 2**k, 0.1 * k) for k in range(1, 8)]
    assert falls(rising) == []
    plateau = [*rising, figure("all_reduce", 2**8, 0.65), figure("all_reduce", 2**9, 0.7 * FALL_FRACTION * 1.01)]
    assert falls(plateau) == []  # a dip of less than half: noise, not a fall
    fell = [*rising, figure("all_reduce", 2**8, 0.2), figure("broadcast", 4, 1.0)]
    (found,) = falls(fell)
    assert found.describe() == "all_reduce busbw falls past its plateau: 0.2 GB/s at 256B, 0.29x the 0.7 GB/s reached at 128B"
    # Exactly half the peak is not below it; the peak is the best so far, not the last size.
    assert falls([figure("x", 1, 1.0), figure("x", 2, 0.5)]) == []
    assert len(falls([figure("x", 1, 1.0), figure("x", 2, 0.9), figure("x", 4, 0.45)])) == 1


def test_a_rank_consistently_slower_is_a_straggler_named_with_its_node() -> None:
    slow_rank_3 = [figure("all_reduce", 2**k, 1.0, (100.0, 101.0, 99.0, 150.0)) for k in range(4)]
    found = straggler(slow_rank_3, ranks_per_node=2)
    assert found is not None and (found.rank, found.node, found.slowest_in, found.figures) == (3, 1, 4, 4)
    assert found.describe().startswith("rank 3 on node 1 is a straggler: the slowest rank in 4 of 4 figures, its calls 1.50x")
    # Slowest in most figures but by little: no straggler.
    close = [figure("all_reduce", 2**k, 1.0, (100.0, 101.0, 99.0, 110.0)) for k in range(4)]
    assert straggler(close, 2) is None
    # A different rank slowest each time: none.
    rotating = [figure("all_reduce", 2**k, 1.0, tuple(150.0 if r == k else 100.0 for r in range(4))) for k in range(4)]
    assert straggler(rotating, 2) is None
    # Too few figures to say "consistently", or no per-rank times: none.
    assert straggler(slow_rank_3[:2], 2) is None
    assert straggler([figure("all_reduce", 2**k, 1.0) for k in range(4)], 2) is None
    # Slowest in 3 of 4 figures (75 %): still a straggler; in 2 of 4: not.
    three = [*slow_rank_3[:3], figure("all_reduce", 99, 1.0, (150.0, 100.0, 100.0, 100.0))]
    assert straggler(three, 2) is not None
    two = [*slow_rank_3[:2], *[figure("all_reduce", 99 + i, 1.0, (150.0, 100.0, 100.0, 100.0)) for i in range(2)]]
    assert straggler(two, 2) is None
