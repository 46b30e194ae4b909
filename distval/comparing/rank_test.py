"""The Mann-Whitney rank test and the Bonferroni bound that makes a run of many figures one decision: the statistics
behind ``--reference``'s per-iteration judgement (docs/reports.md, "How a figure is judged"), with the standard
library only.

A run compares m figures and a pipeline acts on the run as a whole, so what must stay rare is a false alarm on *any*
figure. If each figure alone raises one with probability at most alpha / m when nothing changed, the run raises one
with probability at most m x alpha / m = alpha (the union bound: no assumption about how the figures depend on each
other, which on one machine they do).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# The false-alarm rate of one whole comparison (every figure of every scenario of a run): 1 in 100.
FAMILY_ALPHA = 0.01
# Below this many samples on either side the normal approximation of U is not used (it is within a few percent of
# the exact tail from about 10 each): the figure is judged by its interval alone.
MIN_SAMPLES = 10
_NORMAL = statistics.NormalDist()


def mann_whitney_greater(x: Sequence[float], y: Sequence[float]) -> float | None:
    """The one-sided p-value that values of ``x`` tend to be larger than those of ``y`` (H0: one distribution):
    U of x from the ranks of both samples (ties get their mean rank), its normal approximation with the tie
    correction of the variance and a continuity correction of 1/2. None with fewer than MIN_SAMPLES on a side."""
    n1, n2 = len(x), len(y)
    if n1 < MIN_SAMPLES or n2 < MIN_SAMPLES:
        return None
    # (value, 1 for x, 0 for y): a tie's order within its group changes no mean rank, so the flag may sort too.
    pooled = sorted([(v, 1) for v in x] + [(v, 0) for v in y])
    total = n1 + n2
    rank_sum_x = 0.0
    ties = 0.0  # sum over groups of tied values of t^3 - t
    start = 0
    while start < total:
        value, from_x = pooled[start]
        end = start
        while end + 1 < total and pooled[end + 1][0] == value:
            end += 1
            from_x += pooled[end][1]
        group = end - start + 1
        mean_rank = (start + end) / 2 + 1  # ranks are 1-based
        rank_sum_x += mean_rank * from_x
        ties += group**3 - group
        start = end + 1
    u = rank_sum_x - n1 * (n1 + 1) / 2
    mean = n1 * n2 / 2
    variance = n1 * n2 / 12 * ((total + 1) - ties / (total * (total - 1)))
    if variance <= 0:
        return 1.0  # every value equal: no evidence of a shift
    z = (u - mean - 0.5) / math.sqrt(variance)
    return _NORMAL.cdf(-z)


def per_figure_alpha(family: int, alpha: float = FAMILY_ALPHA) -> float:
    """The significance each of ``family`` figures must reach so that the whole run raises a false alarm with
    probability at most ``alpha`` (Bonferroni)."""
    return alpha / max(1, family)
