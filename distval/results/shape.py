"""What a run's own bandwidth figures say with no reference to compare them with: busbw that falls as the message
grows past its plateau, and one rank consistently slower than the others (a straggler, named with its node).

Both read only the figures of one run (distval/results/bandwidth.py), which the image wrote and the host validated.
A curve that falls past its plateau is what ROCm CVS flags: a transport that degrades on large messages (a ring that
stops pipelining, memory pressure) shows as a drop no noise of one run makes, since adjacent sizes run seconds apart.
A straggler is a rank whose median call time is the highest of the ranks in most figures and well above the others'
median: on one slow node (a noisy neighbour, a throttled CPU, a bad link) every collective waits for it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from distval.results.bandwidth import Figure

# A size whose busbw is below this fraction of the best busbw reached at a smaller size falls past the plateau. Half:
# a default past the ~0.6x that one figure's median moved between runs on a loaded 2-core VM (docs/measurements.md,
# "Noise"); how far adjacent sizes of one run swing has not been measured.
FALL_FRACTION = 0.5
# A straggler: slowest in at least this share of the figures (and at least STRAGGLER_FIGURES of them), with a
# median call time at least this many times the median of the other ranks'.
STRAGGLER_SHARE = 0.75
STRAGGLER_FIGURES = 3
STRAGGLER_RATIO = 1.2


@dataclass(frozen=True)
class Fall:
    operation: str
    peak_label: str
    peak_gbps: float
    label: str
    gbps: float

    def describe(self) -> str:
        return (
            f"{self.operation} busbw falls past its plateau: {self.gbps:.4g} GB/s at {self.label}, "
            f"{self.gbps / self.peak_gbps:.2f}x the {self.peak_gbps:.4g} GB/s reached at {self.peak_label}"
        )


@dataclass(frozen=True)
class Straggler:
    rank: int
    node: int
    slowest_in: int  # figures where it was the slowest rank
    figures: int  # figures with every rank's median
    ratio: float  # its median time over the other ranks' median, the median over the figures

    def describe(self) -> str:
        return (
            f"rank {self.rank} on node {self.node} is a straggler: the slowest rank in {self.slowest_in} of "
            f"{self.figures} figures, its calls {self.ratio:.2f}x the other ranks' (median over the figures)"
        )


def falls(figures: Sequence[Figure], fraction: float = FALL_FRACTION) -> list[Fall]:
    """Per operation, each size after the best busbw so far that is below ``fraction`` of it."""
    found: list[Fall] = []
    for operation in dict.fromkeys(f.operation for f in figures):
        peak: Figure | None = None
        for figure in sorted((f for f in figures if f.operation == operation), key=lambda f: f.size):
            if peak is not None and figure.busbw_gbps < fraction * peak.busbw_gbps:
                found.append(Fall(operation, peak.label, peak.busbw_gbps, figure.label, figure.busbw_gbps))
            if peak is None or figure.busbw_gbps > peak.busbw_gbps:
                peak = figure
    return found


def straggler(figures: Sequence[Figure], ranks_per_node: int) -> Straggler | None:
    """The rank that is consistently slower than the others (module docstring), or None."""
    rows = [f.rank_time_us for f in figures if f.rank_time_us is not None and len(f.rank_time_us) >= 2]
    if len(rows) < STRAGGLER_FIGURES:
        return None
    world = len(rows[0])
    rows = [row for row in rows if len(row) == world]
    slowest = [max(range(world), key=lambda rank: row[rank]) for row in rows]
    rank = statistics.mode(slowest)
    count = slowest.count(rank)
    if count < STRAGGLER_FIGURES or count < STRAGGLER_SHARE * len(rows):
        return None
    ratio = statistics.median(row[rank] / statistics.median(row[:rank] + row[rank + 1 :]) for row in rows)
    if ratio < STRAGGLER_RATIO:
        return None
    return Straggler(rank, rank // max(1, ranks_per_node), count, len(rows), ratio)
