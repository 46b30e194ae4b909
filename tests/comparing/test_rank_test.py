"""The rank test behind --reference's per-iteration judgement (distval/reports/rank_test.py) against the exact
distribution of U, and the multiplicity correction that makes a run of many figures one decision: a figure that the
rank test alone would call slower does not regress when the run compares many figures."""

from __future__ import annotations

import itertools
import math

import pytest

from distval.comparing.rank_test import FAMILY_ALPHA, MIN_SAMPLES, mann_whitney_greater, per_figure_alpha
from distval.comparing.reference import PairedTolerances, paired, reference_case, sampled_figures, schedule


def exact_p(x: list[float], y: list[float]) -> float:
    """P(U >= u) over every way of splitting the pooled ranks (no ties), by enumeration."""
    pooled = sorted(x + y)
    ranks = {v: i + 1 for i, v in enumerate(pooled)}
    observed = sum(ranks[v] for v in x)
    sums = [sum(c) for c in itertools.combinations(range(1, len(pooled) + 1), len(x))]
    return sum(1 for s in sums if s >= observed) / len(sums)


@pytest.mark.parametrize("shift", [0.5, 3.5, 5.5, 7.5])
def test_the_normal_approximation_is_close_to_the_exact_tail_and_errs_on_the_side_of_no_alarm(shift: float) -> None:
    y = [float(i) for i in range(10)]
    x = [i + shift + 0.01 * i for i in range(10)]
    approx, exact = mann_whitney_greater(x, y), exact_p(x, y)
    assert approx is not None
    # Never much below the exact tail (no more alarms than the exact test), at most about twice it in the far tail
    # of 10 + 10 samples (measured: 0.0014 against 0.00075 at p ~ 0.001).
    assert 0.9 * exact <= approx <= 2.5 * exact + 1e-3, (approx, exact)


def test_direction_ties_and_too_few_samples() -> None:
    slow, fast = [float(v) for v in range(20, 32)], [float(v) for v in range(12)]
    p_slow, p_fast = mann_whitney_greater(slow, fast), mann_whitney_greater(fast, slow)
    assert p_slow is not None and p_fast is not None and p_slow < 1e-4 < 0.999 < p_fast
    assert mann_whitney_greater([1.0] * 12, [1.0] * 12) == 1.0  # all tied: no evidence
    tied = mann_whitney_greater([1.0, 2.0] * 6, [1.0, 2.0] * 6)
    assert tied is not None and 0.4 < tied < 0.7
    assert mann_whitney_greater(slow[: MIN_SAMPLES - 1], fast) is None
    assert mann_whitney_greater(slow, fast[: MIN_SAMPLES - 1]) is None
    assert mann_whitney_greater(slow[:MIN_SAMPLES], fast[:MIN_SAMPLES]) is not None


def test_the_run_shares_its_false_alarm_rate_among_its_figures() -> None:
    assert per_figure_alpha(1) == FAMILY_ALPHA and per_figure_alpha(64) == FAMILY_ALPHA / 64
    assert per_figure_alpha(0) == FAMILY_ALPHA


REFERENCE_US = [100.0 + i for i in range(12)]
# Calls 6 us slower, every one: the rank test's p is about 0.001, significant alone, not among 64 figures.
SLOWER_US = [106.0 + i for i in range(12)]


def test_a_figure_the_rank_test_alone_would_call_slower_does_not_regress_among_many() -> None:
    p = mann_whitney_greater(SLOWER_US, REFERENCE_US)
    assert p is not None and FAMILY_ALPHA / 64 < p < FAMILY_ALPHA
    tolerances = PairedTolerances()
    medians = ([0.6, 0.61], [1.0, 1.0])  # the pairs' interval far past -20 %
    alone = paired("busbw", "x", *medians, tolerances, (SLOWER_US, REFERENCE_US), per_figure_alpha(1))
    assert alone.regressed and alone.p_value == p
    among = paired("busbw", "x", *medians, tolerances, (SLOWER_US, REFERENCE_US), per_figure_alpha(64))
    assert not among.regressed, "one of 64 figures at p ~ 0.001 is what a run of 64 unchanged figures shows"
    assert "rank test p=0.00099, needed < 0.00016" in among.describe(), among.describe()
    # Without samples the pairs' interval judges alone, as before.
    assert paired("busbw", "x", *medians, tolerances).regressed
    # The rank test never makes a figure inside the tolerance regress.
    near = paired("busbw", "x", [0.95, 0.96], [1.0, 1.0], tolerances, ([1000.0 + i for i in range(12)], REFERENCE_US), 0.5)
    assert not near.regressed


def test_a_p_value_at_the_significance_is_not_significant() -> None:
    # The rule is p < alpha / m: at a p exactly at the figure's share nothing is called, just below it is.
    p = mann_whitney_greater(SLOWER_US, REFERENCE_US)
    assert p is not None
    medians = ([0.6, 0.61], [1.0, 1.0])
    at = paired("busbw", "x", *medians, PairedTolerances(), (SLOWER_US, REFERENCE_US), p)
    above = paired("busbw", "x", *medians, PairedTolerances(), (SLOWER_US, REFERENCE_US), math.nextafter(p, 1.0))
    assert not at.regressed and above.regressed


def entry(busbw: float, samples: list[float] | None, figures: int = 1) -> dict[str, object]:
    bandwidth = []
    for index in range(figures):
        item: dict[str, object] = {
            "operation": "all_reduce", "size": 1024 << index, "label": f"{1 << index}KiB", "busbw_gbps": busbw,
        }  # fmt: skip
        if samples is not None:
            item["samples_us"] = samples
        bandwidth.append(item)
    cases = [{"name": "all_reduce", "status": "passed", "duration_s": 1.0, "message": "m"}]
    return {"name": "bw", "status": "passed", "duration_s": 10.0, "bandwidth": bandwidth, "cases": cases}


def test_the_family_is_every_sampled_figure_of_the_run() -> None:
    tolerances = PairedTolerances()
    # Each run six calls: pooled over the two pairs, SLOWER_US against REFERENCE_US (p ~ 0.001).
    candidates = [entry(0.6, SLOWER_US[:6], 4), entry(0.61, SLOWER_US[6:], 4)]
    references = [entry(1.0, REFERENCE_US[:6], 4), entry(1.0, REFERENCE_US[6:], 4)]
    assert sampled_figures(candidates, references) == 4
    # Four figures in this scenario alone: 0.01 / 4 is above p, so each regresses.
    own = reference_case(candidates, references, schedule(2), "good:1", tolerances)
    assert own.status == "failed" and "4 of 6 regressed" in own.message, own.message
    # The same scenario in a run of 64 sampled figures: none does.
    run = reference_case(candidates, references, schedule(2), "good:1", tolerances, family=64)
    assert run.status == "passed", run.message
    # A run missing samples in one candidate run is judged by the interval alone (never on part of the runs).
    partial = [entry(0.6, SLOWER_US[:6], 4), entry(0.61, None, 4)]
    assert sampled_figures(partial, references) == 0
    assert reference_case(partial, references, schedule(2), "good:1", tolerances, family=64).status == "failed"
    assert math.isclose(per_figure_alpha(sampled_figures(candidates, references)), FAMILY_ALPHA / 4)


def test_the_documented_constants_and_a_pinned_value_with_ties() -> None:
    # docs/reports.md states both: a whole run's false alarms at 1 %, the test from 10 samples a side.
    assert FAMILY_ALPHA == 0.01 and MIN_SAMPLES == 10
    ten = [float(v) for v in range(10)]
    assert mann_whitney_greater(ten, ten) is not None and mann_whitney_greater(ten[:9], ten) is None
    # U with mean ranks for the ties (2.0 three times, 7.0 four times, ...), the tie-corrected variance and the
    # continuity correction: the value as computed by hand from those formulas.
    x = [1.0, 2.0, 2.0, 5.0, 7.0, 7.0, 7.0, 9.0, 11.0, 12.0, 3.0]
    y = [0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 4.0, 6.0, 7.0, 8.0]
    pooled = sorted(x + y)
    mean_rank = {v: sum(i + 1 for i, w in enumerate(pooled) if w == v) / pooled.count(v) for v in set(pooled)}
    u = sum(mean_rank[v] for v in x) - 11 * 12 / 2
    ties = sum(pooled.count(v) ** 3 - pooled.count(v) for v in set(pooled))
    sd = math.sqrt(11 * 10 / 12 * ((21 + 1) - ties / (21 * 20)))
    expected = 0.5 * math.erfc((u - 55 - 0.5) / sd / math.sqrt(2))
    assert mann_whitney_greater(x, y) == pytest.approx(expected, rel=1e-12)
    assert mann_whitney_greater(x, y) == pytest.approx(0.10122961738357322, rel=1e-12)
