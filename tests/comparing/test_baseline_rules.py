"""What ``--baseline``'s testcase says, rule by rule (distval/comparing/baseline.py): the re-measures' votes and their
failures, the figures it names and counts, and that it takes no time of its own. Its verdicts failing closed:
tests/comparing/test_baseline.py."""

from __future__ import annotations

from typing import Any

from distval.comparing.baseline import apply_baseline, baseline_case, failed_remeasures, skip_reasons
from distval.comparing.deltas import BASELINE_CASE, Tolerances
from distval.reports.json_report import json_report
from distval.results.outcome import FAILED, PASSED, SKIPPED
from distval.results.scenario import RunSummary
from tests.comparing.test_baseline import TWO_FIGURES, case, entry, figure, plans, report, result

OLD = report("old", entry(TWO_FIGURES, [case("env")]))
SLOW = entry([figure("all_reduce", 65536, "64KiB", 0.5), TWO_FIGURES[1]], [case("env")])
GOOD = entry(TWO_FIGURES, [case("env")])


def test_a_regression_confirmed_by_the_re_measures_says_the_votes_and_the_iterations() -> None:
    result = baseline_case(SLOW, OLD, Tolerances(), "G", [SLOW, SLOW])
    assert result.status == FAILED
    assert result.message == (
        "expected no figure to regress past the tolerance against G (run old) (matched by scenario_hash); 1 of 3 did "
        "in more than half of the 3 runs (the run and the 2 runs re-measuring it): busbw all_reduce 64KiB: 1 -> 0.5 GB/s "
        "(0.50x, tolerance -20%); re-measured: 0.5 GB/s (0.50x), 0.5 GB/s (0.50x) (regressed in 3 of 3 runs) "
        "(busbw: medians and bests of 5 iterations)"
    )
    alone = baseline_case(SLOW, OLD, Tolerances(), "G")
    assert "1 of 3 did: busbw all_reduce 64KiB" in alone.message and alone.duration_s == 0.0


def test_a_regression_the_re_measures_cleared_passes_and_says_so() -> None:
    result = baseline_case(SLOW, OLD, Tolerances(), "G", [GOOD, GOOD])
    assert result.status == PASSED
    assert result.message == (
        "3 figure(s) within tolerance of G (run old) (matched by scenario_hash): 2 busbw (lowest ratio 0.50x, medians "
        "of 5 iterations), 1 durations (highest ratio 1.00x); 1 regressed in the run and not in most of the 3 runs "
        "(noise, not a slower image): busbw all_reduce 64KiB: 1 -> 0.5 GB/s (0.50x, tolerance -20%); re-measured: "
        "1 GB/s (1.00x), 1 GB/s (1.00x) (regressed in 1 of 3 runs)"
    )
    assert result.duration_s == 0.0


def test_no_match_is_a_skip_that_takes_no_time() -> None:
    result = baseline_case(entry(TWO_FIGURES, [case("env")], name="new"), OLD, Tolerances(), "G")
    assert (result.name, result.status, result.duration_s) == (BASELINE_CASE, SKIPPED, 0.0)
    skipped = entry([], [case("env", SKIPPED, 0.0, "no GPU")], status=SKIPPED)
    both = baseline_case(skipped, report("old", skipped), Tolerances(), "G")
    assert (both.status, both.duration_s) == (SKIPPED, 0.0)


def _failed_run(bad: int) -> dict[str, Any]:
    cases = [case("env")] + [case(f"check{i}", FAILED, message=f"{i}" * 250) for i in range(bad)]
    return entry(TWO_FIGURES, cases, status=FAILED)


def test_a_failed_re_measure_names_three_failures_each_cut_at_200_characters_and_counts_them() -> None:
    (line,) = failed_remeasures([GOOD, _failed_run(4)])
    said = "; ".join(f"check{i} failed: {f'{i}' * 200}" for i in range(3))
    assert line == f"re-measure 2 failed ({said}; ... (4 in all))"
    (line,) = failed_remeasures([_failed_run(3)])
    assert line == f"re-measure 1 failed ({said})"


def test_missing_figures_are_named_ten_at_most_and_counted() -> None:
    sizes = [2**k for k in range(10, 21)]  # 11 sizes
    many = report("old", entry([figure("all_reduce", size, str(size), 1.0) for size in sizes], [case("env")]))
    result = baseline_case(entry([], [case("env")]), many, Tolerances(), "G")
    named = ", ".join(f"busbw all_reduce {size}" for size in sizes[:10])
    assert result.status == FAILED
    assert result.message.endswith(f"11 missing: {named}, ... (11 in all)"), result.message
    ten = report("old", entry([figure("all_reduce", size, str(size), 1.0) for size in sizes[:10]], [case("env")]))
    assert baseline_case(entry([], [case("env")]), ten, Tolerances(), "G").message.endswith(f"10 missing: {named}")


SIZES = [2**k for k in range(10, 15)]  # 5 sizes, 1KiB .. 16KiB


def _figures(medians: list[float], best: float | None = None) -> list[dict[str, Any]]:
    found = [figure("all_reduce", size, str(size), median) for size, median in zip(SIZES, medians, strict=True)]
    return [{**f, "best_busbw_gbps": best} if best is not None else f for f in found]


def test_a_pass_names_three_noisy_medians_counts_them_all_and_says_the_worst_ratios() -> None:
    old = report("old", entry(_figures([1.0] * 5, best=1.0), [case("env"), case("store")]))
    new = entry(_figures([0.5] * 4 + [0.9], best=1.0), [case("env", duration_s=1.5), case("store", duration_s=1.2)])
    result = baseline_case(new, old, Tolerances(), "G")
    assert result.status == PASSED
    noise = "; ".join(
        f"busbw all_reduce {size}: 1 -> 0.5 GB/s (0.50x, tolerance -20%; best 1 -> 1 GB/s (1.00x)): its best held (1.00x)"
        for size in SIZES[:3]
    )
    assert result.message == (
        "7 figure(s) within tolerance of G (run old) (matched by scenario_hash): 5 busbw (lowest ratio 0.50x, medians "
        "of 5 iterations); 4 busbw median(s) below the tolerance, their best held or their call slower by at most "
        f"100 us (noise, not a slower image): {noise}; ... (4 in all), 2 durations (highest ratio 1.50x)"
    )
    three = baseline_case({**new, "bandwidth": _figures([0.5] * 3 + [0.9] * 2, best=1.0)}, old, Tolerances(), "G")
    assert "3 busbw median(s) below the tolerance" in three.message and "in all)" not in three.message


def test_a_pass_names_three_cleared_regressions_and_counts_them_all() -> None:
    old = report("old", entry(_figures([1.0] * 5), [case("env")]))
    good = entry(_figures([1.0] * 5), [case("env")])
    result = baseline_case(entry(_figures([0.5] * 4 + [1.0]), [case("env")]), old, Tolerances(), "G", [good, good])
    assert result.status == PASSED
    cleared = "; ".join(
        f"busbw all_reduce {size}: 1 -> 0.5 GB/s (0.50x, tolerance -20%); re-measured: 1 GB/s (1.00x), 1 GB/s (1.00x) "
        "(regressed in 1 of 3 runs)"
        for size in SIZES[:3]
    )
    assert result.message.endswith(
        f"; 4 regressed in the run and not in most of the 3 runs (noise, not a slower image): {cleared}; ... (4 in all)"
    ), result.message
    three = baseline_case(entry(_figures([0.5] * 3 + [1.0] * 2), [case("env")]), old, Tolerances(), "G", [good, good])
    assert three.message.endswith("(regressed in 1 of 3 runs)"), three.message


def test_a_pass_with_durations_only_names_no_busbw_ratio() -> None:
    result = baseline_case(entry([], [case("env")]), report("old", entry([], [case("env")])), Tolerances(), "G")
    assert result.message == (
        "1 figure(s) within tolerance of G (run old) (matched by scenario_hash): 0 busbw, 1 durations (highest ratio 1.00x)"
    )


def test_the_machine_is_hinted_at_only_where_its_raw_tcp_fell_past_the_tolerance() -> None:
    def at(busbw: float, tcp: float) -> dict[str, Any]:
        return {**figure("broadcast", 1048576, "1MiB", busbw), "tcp_gbps": tcp}

    old = report("old", entry([at(1.0, 1.0)], [case("env")]))
    at_the_edge = baseline_case(entry([at(0.5, 0.8)], [case("env")]), old, Tolerances(), "G")  # 0.80x: within -20 %
    assert at_the_edge.status == FAILED and "fell too" not in at_the_edge.message, at_the_edge.message
    past = baseline_case(entry([at(0.5, 0.79)], [case("env")]), old, Tolerances(), "G")
    assert past.status == FAILED and "the raw TCP between the same ranks fell too (0.79-0.79x" in past.message
    two = report("old", entry([at(1.0, 1.0), {**at(1.0, 1.0), "size": 2097152, "label": "2MiB"}], [case("env")]))
    both = entry([at(0.5, 0.7), {**at(0.5, 0.5), "size": 2097152, "label": "2MiB"}], [case("env")])
    assert "fell too (0.50-0.70x of the baseline's at those sizes)" in baseline_case(both, two, Tolerances(), "G").message


def test_one_re_measure_is_said_as_one_run() -> None:
    result = baseline_case(SLOW, OLD, Tolerances(), "G", [SLOW])
    assert "1 of 3 did in more than half of the 2 runs (the run and the run re-measuring it)" in result.message


def test_a_skip_says_the_first_three_reasons_in_order_each_cut_at_200_characters() -> None:
    cases = [case("env", SKIPPED, message=letter * 250) for letter in "dcba"]
    assert skip_reasons([entry([], cases, status=SKIPPED)]) == "; ".join(letter * 200 for letter in "abc")
    assert skip_reasons([entry([], [], status=SKIPPED)]) == "no reason given"


def test_fail_on_skip_leaves_an_unusable_baseline_failing_every_scenario() -> None:
    bw, other = plans()
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    cut = {**good, "early_error": {"kind": "interrupted", "message": "interrupted by signal 15"}}
    summary = apply_baseline(run, cut, Tolerances(), "GOOD.json", fail_on_skip=True)
    assert [s.cases[-1].status for s in summary.scenarios] == [FAILED, FAILED]
    assert all("ended early" in s.cases[-1].message for s in summary.scenarios)
