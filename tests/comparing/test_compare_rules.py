"""The rules behind ``distval compare``'s items, one at a time (distval/comparing/comparison.py): how verdicts rank
(a skip below a pass, failed and error alike, an unknown status with the failures), what of ``--baseline``'s own
testcase is judged, a check that ran in OLD and not in NEW, a report's malformed testcases, and what each item says.
The command's output as people read it: tests/comparing/test_compare.py."""

from __future__ import annotations

from typing import Any

import pytest

from distval.comparing.baseline import compare_reports
from distval.comparing.comparison import (
    IMPROVEMENT,
    NOT_COMPARED,
    NOTE,
    REGRESSION,
    TESTCASE,
    UNCHANGED,
    VERDICTS,
    Item,
    Judgement,
    judge,
    line,
    verdict_line,
)
from distval.comparing.deltas import BASELINE_CASE, Tolerances
from distval.errors import EXIT_CHECKS_FAILED, EXIT_PASSED
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from tests.comparing.test_baseline import TWO_FIGURES, case, entry, report

JUDGED = Tolerances()  # durations judged, as --duration-tolerance asks
NOT_JUDGED = Tolerances(durations_judged=False)  # compare's default


def judged(old: dict[str, Any], new: dict[str, Any], tolerances: Tolerances = JUDGED) -> Judgement:
    return judge(compare_reports(old, new, tolerances))


def item(judgement: Judgement, name: str, kind: str = TESTCASE) -> Item:
    (found,) = [i for i in judgement.items if i.name == name and i.kind == kind]
    return found


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (SKIPPED, PASSED, IMPROVEMENT),
        (FAILED, PASSED, IMPROVEMENT),
        (ERROR, SKIPPED, REGRESSION),  # run, now skipped: nothing shows the error gone
        (SKIPPED, ERROR, REGRESSION),
        (SKIPPED, FAILED, REGRESSION),
        (ERROR, FAILED, UNCHANGED),  # failed and error are both red: no better, no worse
        (FAILED, ERROR, UNCHANGED),
        # A status distval never writes (a hand-edited report) ranks with the failures.
        (PASSED, "exploded", REGRESSION),
        (SKIPPED, "exploded", REGRESSION),
        (FAILED, "exploded", UNCHANGED),
        ("exploded", ERROR, UNCHANGED),
        ("exploded", PASSED, IMPROVEMENT),
    ],
)
def test_how_verdicts_rank_a_testcase_and_a_scenario(before: str, after: str, expected: str) -> None:
    def run(run_id: str, status: str) -> dict[str, Any]:
        return report(run_id, entry(TWO_FIGURES, [case("env"), case("collectives.all_reduce", status)], status=status))

    judgement = judged(run("old", before), run("new", after))
    assert item(judgement, "collectives.all_reduce").status == expected
    assert item(judgement, "bw", kind="scenario").status == expected
    assert judgement.exit_code == (EXIT_CHECKS_FAILED if expected == REGRESSION else EXIT_PASSED)


def test_baselines_own_testcase_is_judged_where_both_reports_have_it_and_only_then() -> None:
    with_baseline = report("old", entry(TWO_FIGURES, [case("env"), case(BASELINE_CASE, duration_s=0.0)]))
    failed = report("new", entry(TWO_FIGURES, [case("env"), case(BASELINE_CASE, FAILED, 0.0)]))
    assert item(judged(with_baseline, failed), BASELINE_CASE).status == REGRESSION
    # One report made with --baseline and one without: no regression either way, and said as one-sided.
    without = report("new", entry(TWO_FIGURES, [case("env")]))
    for old, new, why in [(with_baseline, without, "only in OLD"), (without, with_baseline, "only in NEW")]:
        judgement = judged(old, new)
        assert judgement.exit_code == EXIT_PASSED
        one_sided = item(judgement, BASELINE_CASE)
        assert (one_sided.status, one_sided.why) == (NOT_COMPARED, why)


def test_a_check_that_ran_in_old_and_not_in_new_is_a_regression_whatever_its_verdict() -> None:
    old = report("old", entry(TWO_FIGURES, [case("env"), case("store", FAILED, 2.0)]))
    gone = report("new", entry(TWO_FIGURES, [case("env")]))
    no_duration = report("new", entry(TWO_FIGURES, [case("env"), {"name": "store", "status": FAILED, "message": "x"}]))
    for new in (gone, no_duration):
        judgement = judged(old, new)
        store = item(judgement, "store")
        assert (store.status, store.why) == (REGRESSION, "ran in OLD, did not run in NEW")
        assert judgement.exit_code == EXIT_CHECKS_FAILED
    # One that did not run in OLD either (failed before it timed anything) is no figure that went missing.
    never = report("old", entry(TWO_FIGURES, [case("env"), {"name": "store", "status": FAILED, "message": "x"}]))
    assert judged(never, gone).exit_code == EXIT_PASSED


def test_a_testcase_with_no_name_or_no_mapping_is_left_out_and_the_rest_judged() -> None:
    cases: list[Any] = [case("env"), {"status": FAILED, "duration_s": 1.0}, "collectives", ["name"], None]
    odd = report("new", entry(TWO_FIGURES, cases))
    judgement = judged(report("old", entry(TWO_FIGURES, [case("env")])), odd)
    assert judgement.exit_code == EXIT_PASSED
    assert [i.name for i in judgement.items if i.kind == TESTCASE] == ["env"]


def test_a_faster_check_says_by_how_much_judged_or_not() -> None:
    old = report("old", entry(TWO_FIGURES, [case("env", duration_s=5.0), case("store", duration_s=5.0)]))
    new = report("new", entry(TWO_FIGURES, [case("env", duration_s=1.0), case("store", duration_s=0.0)]))
    judgement = judged(old, new)
    assert item(judgement, "env").why == "faster past the tolerance: 0.20x"
    assert item(judgement, "store").why == "faster past the tolerance: 0.00x"
    judgement = judged(old, new, NOT_JUDGED)
    assert (item(judgement, "env").status, item(judgement, "env").why) == (
        NOTE,
        "faster: 5.00 -> 1.00 s (0.20x; durations are judged with --duration-tolerance)",
    )
    assert item(judgement, "store").why == "faster: 5.00 -> 0.00 s (0.00x; durations are judged with --duration-tolerance)"


def test_a_testcase_in_one_report_only_is_not_compared_and_says_which() -> None:
    old = report("old", entry(TWO_FIGURES, [case("env"), case("store", SKIPPED, 0.0)]))
    new = report("new", entry(TWO_FIGURES, [case("env"), case("ddp", SKIPPED, 0.0)]))
    judgement = judged(old, new)
    assert [(i.name, i.status, i.why) for i in judgement.items if i.kind == TESTCASE] == [
        ("env", UNCHANGED, ""),
        ("ddp", NOT_COMPARED, "only in NEW"),
        ("store", NOT_COMPARED, "only in OLD"),
    ]


def test_each_side_of_a_scenario_says_its_torch() -> None:
    old, new = entry(TWO_FIGURES, [case("env")]), entry(TWO_FIGURES, [case("env")])
    new["properties"] = {**new["properties"], "torch_version": "2.6.0"}
    scenario = item(judged(report("old", old), report("new", new)), "bw", kind="scenario")
    assert scenario.old is not None and scenario.new is not None
    assert (scenario.old["torch"], scenario.new["torch"]) == ("unknown", "2.6.0")


def test_each_exit_code_is_said_with_its_own_meaning() -> None:
    for verdict in VERDICTS:
        assert verdict_line(verdict.exit_code) == verdict.meaning


def test_a_median_that_fell_while_the_best_held_is_unchanged_and_says_noise() -> None:
    def timed(median: float) -> dict[str, Any]:
        return {"operation": "all_reduce", "size": 65536, "label": "64KiB", "busbw_gbps": median, "best_busbw_gbps": 1.0}

    judgement = judged(report("old", entry([timed(1.0)], [case("env")])), report("new", entry([timed(0.5)], [case("env")])))
    figure = item(judgement, "all_reduce 64KiB", kind="busbw")
    assert (figure.status, figure.why) == (UNCHANGED, "median past tolerance, its best held (1.00x): noise")
    assert judgement.exit_code == EXIT_PASSED


def test_a_busbw_no_link_reaches_never_reads_as_an_improvement() -> None:
    # A broken image's figure below 0 in both reports: it regressed (new < old x 0.8) and "rose" (old < new x 0.8)
    # at once; fail closed, the regression wins.
    broken = [{"operation": "all_reduce", "size": 65536, "label": "64KiB", "busbw_gbps": -1.0}]
    judgement = judged(report("old", entry(broken, [case("env")])), report("new", entry(broken, [case("env")])))
    assert item(judgement, "all_reduce 64KiB", kind="busbw").status == REGRESSION
    assert judgement.exit_code == EXIT_CHECKS_FAILED


def test_a_scenarios_line_says_its_verdicts_without_its_duration() -> None:
    old, new = entry(TWO_FIGURES, [case("env")]), entry(TWO_FIGURES, [case("env", FAILED)], status=FAILED)
    old["duration_s"], new["duration_s"] = 12.0, 13.0
    judgement = judged(report("old", old), report("new", new))
    assert line(item(judgement, "bw", kind="scenario")) == "scenario bw: passed -> failed (verdict worse)"
    assert line(item(judgement, "env")) == "bw: testcase env: passed 1.00 s -> failed 1.00 s (verdict worse)"
