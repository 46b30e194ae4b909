"""The candidate-against-reference judgement (distval/comparing/reference.py) and its run-command side
(distval/session/pairs.py): pairs in ABBA order, checks attributed to the image or not, figures judged by the
paired interval, and nothing compared never a pass."""

from __future__ import annotations

import argparse
import math
from typing import Any

import pytest

from distval.cli.main import build_parser
from distval.cli.reference import reference_options
from distval.comparing.judges import PairedRuns, ReferenceOptions, with_reference
from distval.comparing.reference import (
    CANDIDATE,
    REFERENCE,
    REFERENCE_CASE,
    PairedTolerances,
    paired,
    reference_case,
    schedule,
    t95,
)
from distval.config import parse_config
from distval.errors import BadInput
from distval.plan.model import ScenarioPlan
from distval.results.outcome import ERROR, FAILED, PASSED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from distval.session.pairs import check_reference, run_pairs
from distval.targets.engines.planning import plan_scenario

TOLERANCES = PairedTolerances()


def figure(operation: str, size: int, label: str, busbw: float) -> dict[str, Any]:
    return {"operation": operation, "size": size, "label": label, "busbw_gbps": busbw, "iterations": 5}


def entry(
    busbw: float, statuses: dict[str, str] | None = None, duration_s: float = 10.0, image_id: str = "sha256:aa"
) -> dict[str, Any]:
    cases = [{"name": n, "status": s, "duration_s": 1.0, "message": "m"} for n, s in (statuses or {"all_reduce": PASSED}).items()]
    return {
        "name": "bw",
        "image_id": "sha256:aa",
        "status": PASSED,
        "duration_s": duration_s,
        "bandwidth": [figure("all_reduce", 65536, "64KiB", busbw), figure("all_reduce", 1048576, "1MiB", 2 * busbw)],
        "cases": cases,
    }


def test_the_order_alternates_who_goes_first() -> None:
    assert schedule(4) == ((CANDIDATE, REFERENCE), (REFERENCE, CANDIDATE), (CANDIDATE, REFERENCE), (REFERENCE, CANDIDATE))


def test_t_quantiles_match_the_table_and_approach_the_normal() -> None:
    assert t95(1) == 6.314 and t95(4) == 2.132 and t95(30) == 1.697
    assert abs(t95(31) - 1.696) < 0.003 and abs(t95(1000) - 1.6464) < 0.001
    with pytest.raises(ValueError):
        t95(0)


def test_a_figure_regresses_only_when_its_whole_interval_is_past_the_tolerance() -> None:
    # Every pair 40 % lower, little spread: the interval is far below 0.9.
    slow = paired("busbw", "all_reduce 1MiB", [0.6, 0.61, 0.59], [1.0, 1.0, 1.0], TOLERANCES)
    assert slow.regressed and slow.high < 0.9 and math.isclose(slow.ratio, 0.6, rel_tol=0.02)
    # The same mean, one noisy pair: the interval reaches past 0.9, and the figure does not regress.
    noisy = paired("busbw", "all_reduce 1MiB", [0.3, 1.1, 0.6], [1.0, 1.0, 1.0], TOLERANCES)
    assert not noisy.regressed and noisy.low < noisy.ratio < noisy.high
    # Durations: longer by more than the tolerance and by more than the slack.
    longer = paired("duration", "all_reduce", [20.0, 21.0, 19.0], [10.0, 10.0, 10.0], TOLERANCES)
    assert longer.regressed
    short = paired("duration", "store", [0.4, 0.42, 0.41], [0.1, 0.1, 0.1], TOLERANCES)
    assert not short.regressed  # 4x, but by 0.3 s: within the slack
    same = paired("busbw", "x", [1.0, 1.0], [1.0, 1.0], TOLERANCES)
    assert not same.regressed and same.low == same.high == 1.0


def test_the_same_image_in_every_pair_passes_and_says_what_it_compared() -> None:
    case = reference_case([entry(1.0)] * 3, [entry(1.02)] * 3, schedule(3), "good:1", TOLERANCES)
    assert case.status == PASSED, case.message
    assert "4 figure(s) and 1 check(s) paired with the reference good:1 (sha256:aa) over 3 pair(s)" in case.message
    assert case.details["order"] == ["candidate first", "reference first", "candidate first"]


def test_a_slower_candidate_fails_with_each_regressed_figure() -> None:
    case = reference_case([entry(0.6), entry(0.62), entry(0.58)], [entry(1.0)] * 3, schedule(3), "good:1", TOLERANCES)
    assert case.status == FAILED
    assert "2 of 4 regressed: busbw all_reduce 64KiB: 0.60x the reference" in case.message, case.message


def test_a_check_that_fails_only_on_the_candidate_is_caused_by_the_image() -> None:
    bad = entry(1.0, {"all_reduce": FAILED})
    case = reference_case([bad, entry(1.0), entry(1.0)], [entry(1.0)] * 3, schedule(3), "good:1", TOLERANCES)
    assert case.status == FAILED
    assert "caused by the image: all_reduce (failed/passed/passed vs passed/passed/passed)" in case.message


def test_a_check_that_fails_on_both_is_not_attributable_to_the_image() -> None:
    bad = entry(1.0, {"all_reduce": FAILED})
    case = reference_case([bad] * 3, [entry(1.0), bad, entry(1.0)], schedule(3), "good:1", TOLERANCES)
    assert case.status == ERROR
    assert case.message.startswith("not attributable to the image: all_reduce failed on the reference good:1")


def test_a_check_that_fails_only_on_the_reference_is_said_and_passes() -> None:
    bad = entry(1.0, {"all_reduce": FAILED})
    case = reference_case([entry(1.0)] * 2, [bad, entry(1.0)], schedule(2), "good:1", TOLERANCES)
    assert case.status == PASSED and "failed on the reference only: all_reduce" in case.message


def test_nothing_compared_is_not_a_pass() -> None:
    # The reference never ran (its image missing, the run stopped): no pair at all.
    assert reference_case([entry(1.0)], [], schedule(3), "good:1", TOLERANCES).status == FAILED
    # One pair: a ratio, not an interval.
    one = reference_case([entry(1.0)], [entry(1.0)], schedule(1), "good:1", TOLERANCES)
    assert one.status == FAILED and "expected at least 2 complete pairs" in one.message
    # Pairs that share no figure and no check.
    empty = {"name": "bw", "status": ERROR, "cases": [], "bandwidth": []}
    nothing = reference_case([entry(1.0)] * 2, [empty, empty], schedule(2), "good:1", TOLERANCES)
    assert nothing.status == FAILED and "no figure and no check is in both" in nothing.message


def test_a_scenario_skipped_on_both_images_skips_the_comparison_with_the_reason() -> None:
    skipped = {
        "name": "bw",
        "status": "skipped",
        "duration_s": 2.0,
        "bandwidth": [],
        "cases": [{"name": "all_reduce", "status": "skipped", "message": "no GPU"}],
    }
    case = reference_case([skipped] * 2, [skipped] * 2, schedule(2), "good:1", TOLERANCES)
    assert case.status == "skipped" and case.message.endswith("good:1: no GPU"), case.message
    # Skipped on the candidate only: the reference ran, nothing was compared: failed.
    assert reference_case([skipped] * 2, [entry(1.0)] * 2, schedule(2), "good:1", TOLERANCES).status == FAILED


def test_figures_from_the_image_that_are_not_positive_finite_numbers_are_not_paired() -> None:
    hostile = entry(1.0)
    hostile["bandwidth"] = [figure("all_reduce", 65536, "64KiB", float("nan")), figure("all_reduce", 1048576, "1MiB", -1.0)]
    hostile["duration_s"] = float("inf")
    case = reference_case([hostile] * 2, [entry(1.0)] * 2, schedule(2), "good:1", TOLERANCES)
    assert {f["kind"] for f in case.details["figures"]} == {"duration"}, case.details["figures"]


# --- the run command's side ----------------------------------------------------------------------------

CONFIG = """\
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks: [all_reduce]
"""


def plans(image: str) -> tuple[ScenarioPlan, ...]:
    return tuple(plan_scenario(s, "run1", image) for s in parse_config(CONFIG, "bw.yaml").scenarios)


def result(plan: ScenarioPlan, status: str = PASSED) -> ScenarioResult:
    return ScenarioResult(plan, (CaseResult("all_reduce", status, "m", 1.0),), (("image_id", f"sha256:{plan.image}"),), "", 5.0)


def test_pairs_run_one_at_a_time_in_the_schedules_order() -> None:
    (candidate,), (reference,) = plans("cand:1"), plans("ref:1")
    ran: list[tuple[str, str]] = []

    def run(kind: str) -> Any:
        def go(plans: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
            ran.extend((kind, p.image) for p in plans)
            return [result(p) for p in plans]

        return go

    own, paired_runs = run_pairs([candidate], [reference], options(3), run("first"), run("again"), lambda line: None)
    assert ran == [
        ("first", "cand:1"),
        ("again", "ref:1"),
        ("again", "ref:1"),
        ("again", "cand:1"),
        ("again", "cand:1"),
        ("again", "ref:1"),
    ]
    assert own[0].plan.image == "cand:1"
    assert len(paired_runs["bw"].candidates) == 2 and len(paired_runs["bw"].references) == 3


def options(pairs: int = 2) -> ReferenceOptions:
    return ReferenceOptions("ref:1", pairs, TOLERANCES)


def test_the_reference_testcase_is_added_and_names_the_reference_image() -> None:
    (candidate,), (reference,) = plans("cand:1"), plans("ref:1")
    summary = RunSummary("run1", (result(candidate),))
    runs = PairedRuns((result(candidate),), (result(reference), result(reference)), schedule(2))
    judged = with_reference(summary, options(), {"bw": runs}, ["bw"])
    (scenario,) = judged.scenarios
    assert scenario.cases[-1].name == REFERENCE_CASE and scenario.cases[-1].status == PASSED, scenario.cases[-1].message
    assert ("reference_image", "ref:1") in scenario.properties
    # A scenario that was to run in pairs and has none (the run stopped first): failed, nothing compared.
    stopped = with_reference(summary, options(), {}, ["bw"])
    assert stopped.scenarios[0].cases[-1].status == FAILED
    # One that was not to run (left out by the selection): no reference testcase.
    assert with_reference(summary, options(), {}, []).scenarios[0].cases == summary.scenarios[0].cases


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["run", *argv])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (("--pairs", "3"), "--pairs counts the runs paired with --reference"),
        (("--reference", "r:1", "--pairs", "1"), "--pairs 1: expected 2..50"),
        (("--reference", "r:1", "--pairs", "51"), "--pairs 51: expected 2..50"),
        (("--reference", "r:1", "--jobs", "2"), "--jobs 2 with --reference: the pairs run one scenario at a time"),
    ],
)
def test_bad_combinations_are_refused_before_anything_runs(argv: tuple[str, ...], expected: str) -> None:
    args = parsed(*argv)
    with pytest.raises(BadInput, match=expected.replace("-", r"\-").replace(".", r"\.")):
        check_reference(reference_options(args), args.jobs)


def test_the_paired_tolerances_are_the_options() -> None:
    assert reference_options(parsed("--reference", "r:1")).tolerances.busbw == 0.20
    assert reference_options(parsed("--reference", "r:1", "--busbw-tolerance", "0.3")).tolerances.busbw == 0.3


def test_a_reference_that_never_ran_a_check_compared_nothing() -> None:
    # The reference image missing or broken at start: each run an error with only a setup case, yet a time to
    # verdict; that one figure is no comparison of the images.
    broken = {"name": "bw", "status": ERROR, "duration_s": 3.0, "bandwidth": [], "cases": [
        {"name": "setup", "status": ERROR, "duration_s": 3.0, "message": "no such image"},
    ]}  # fmt: skip
    case = reference_case([entry(1.0)] * 2, [broken] * 2, schedule(2), "gone:1", TOLERANCES)
    assert case.status == FAILED, case.message
    assert "no check ran on both images" in case.message


def test_the_interval_is_students_t_with_pairs_minus_one_degrees_on_the_sample_spread() -> None:
    candidate = [0.70, 0.80, 0.75]
    logs = [math.log(c) for c in candidate]
    mean = sum(logs) / 3
    sample_sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / 2)
    half = 2.920 * sample_sd / math.sqrt(3)  # t 0.95 at 2 degrees of freedom
    figure = paired("busbw", "x", candidate, [1.0] * 3, TOLERANCES)
    assert figure.low == pytest.approx(math.exp(mean - half), rel=1e-12)
    assert figure.high == pytest.approx(math.exp(mean + half), rel=1e-12)
    assert figure.ratio == pytest.approx(math.exp(mean), rel=1e-12)


def test_the_interval_width_decides_at_its_boundary() -> None:
    # With 2 degrees of freedom (t 2.920) the upper end is 0.80002: not past -20 %. With 3 (t 2.353), or the
    # normal's 1.645, it would be 0.786 and regress.
    wide = paired("busbw", "x", [0.7, 0.776, 0.72], [1.0] * 3, TOLERANCES)
    assert 0.8 < wide.high < 0.8001 and not wide.regressed
    narrower = paired("busbw", "x", [0.7, 0.770, 0.72], [1.0] * 3, TOLERANCES)
    assert narrower.high < 0.8 and narrower.regressed
    # Exactly at the tolerance is not past it, for busbw and durations alike.
    at = paired("busbw", "x", [0.8, 0.8], [1.0, 1.0], TOLERANCES)
    assert at.high == 0.8 and not at.regressed
    just_past = paired("busbw", "x", [0.7999, 0.7999], [1.0, 1.0], TOLERANCES)
    assert just_past.regressed
    slower_at = paired("duration", "x", [15.0, 15.0], [10.0, 10.0], TOLERANCES)
    assert slower_at.low == 1.5 and not slower_at.regressed
    assert paired("duration", "x", [15.01, 15.01], [10.0, 10.0], TOLERANCES).regressed


def test_a_duration_regresses_on_the_intervals_lower_end_and_past_the_slack() -> None:
    # The mean is 2x and the upper end far past +50 %, but the lower end is not: one pair was as fast as the
    # reference. Judging by the upper end (or the mean) would call it slower.
    spread = paired("duration", "x", [10.0, 30.0, 20.0], [10.0] * 3, TOLERANCES)
    assert spread.low < 1.5 < spread.high and not spread.regressed
    # Busbw the other way round: the lower end far below -20 %, the upper end not.
    assert not paired("busbw", "x", [1.0, 0.3, 0.5], [1.0] * 3, TOLERANCES).regressed
    # 2x with no spread, but slower by exactly the slack (1 s): not past it; by a little more: past it.
    assert not paired("duration", "x", [2.0, 2.0], [1.0, 1.0], TOLERANCES).regressed
    assert paired("duration", "x", [2.01, 2.01], [1.0, 1.0], TOLERANCES).regressed
    # Past the slack by far, within the tolerance: not slower.
    assert not paired("duration", "x", [140.0, 140.0], [100.0, 100.0], TOLERANCES).regressed


def test_the_t_quantile_past_the_table_is_the_corrected_normal() -> None:
    # Within 0.2 % of Student's exact quantile, and the formula pinned (z + (z^3 + z) / 4 df).
    exact = {31: 1.695519, 40: 1.683851, 60: 1.670649, 120: 1.657651}
    for degrees, value in exact.items():
        assert t95(degrees) == pytest.approx(value, rel=2e-3)
    z = 1.6448536269514722
    assert t95(31) == pytest.approx(z + (z**3 + z) / 124, rel=1e-9)
    assert t95(2) == 2.920 and t95(3) == 2.353 and t95(29) == 1.699


def test_a_check_the_candidate_failed_and_the_reference_skipped_fails_the_comparison() -> None:
    # Another check both images ran keeps the pairs comparable: only the skipped one is unpaired.
    failed = entry(1.0, {"all_reduce": FAILED, "store": PASSED})
    skipped = entry(1.0, {"all_reduce": "skipped", "store": PASSED})
    case = reference_case([failed] * 2, [skipped] * 2, schedule(2), "good:1", TOLERANCES)
    assert case.status == FAILED, case.message
    assert "skipped or absent on the reference" in case.message
    assert "all_reduce (failed/failed vs skipped/skipped)" in case.message
    # Absent from every reference run (the reference's torch has no such check): the same.
    absent = entry(1.0, {"store": PASSED})
    assert reference_case([failed] * 2, [absent] * 2, schedule(2), "good:1", TOLERANCES).status == FAILED
    # Passed on the reference once, skipped once, never failed there: the image.
    passed = entry(1.0, {"all_reduce": PASSED, "store": PASSED})
    once = reference_case([failed] * 2, [passed, skipped], schedule(2), "good:1", TOLERANCES)
    assert once.status == FAILED and "caused by the image: all_reduce" in once.message
    # Failed on both, one reference run skipped it: not attributable (an error, not a pass).
    both = reference_case([failed] * 2, [failed, skipped], schedule(2), "good:1", TOLERANCES)
    assert both.status == ERROR and both.message.startswith("not attributable to the image: all_reduce")


def test_a_figure_says_its_unit_and_three_pairs_are_the_default() -> None:
    busbw = paired("busbw", "all_reduce 1MiB", [0.6, 0.61], [1.0, 1.0], TOLERANCES).describe()
    assert busbw.endswith("candidate 0.6/0.61, reference 1/1 GB/s)"), busbw
    duration = paired("duration", "store", [2.0, 2.0], [1.0, 1.0], TOLERANCES).describe()
    assert duration.endswith("candidate 2/2, reference 1/1 s)"), duration
    assert reference_options(parsed("--reference", "r:1")).pairs == 3


def test_bookkeeping_testcases_are_not_checks_to_attribute() -> None:
    # process_group failed on the candidate only: the group forming is judged by the checks that need it.
    bad = entry(1.0, {"all_reduce": PASSED, "process_group": FAILED, "exit_status": ERROR})
    case = reference_case([bad] * 2, [entry(1.0)] * 2, schedule(2), "good:1", TOLERANCES)
    assert case.status == PASSED, case.message
    assert case.details["checks"] == []


def test_durations_that_are_not_positive_numbers_are_not_paired() -> None:
    odd = entry(1.0)
    odd["duration_s"] = True  # a bool is no number of seconds
    zero = entry(1.0, duration_s=0.0)
    for candidate in (odd, zero):
        case = reference_case([candidate] * 2, [entry(1.0)] * 2, schedule(2), "good:1", TOLERANCES)
        kinds = [f["kind"] for f in case.details["figures"]]
        assert "time to verdict" not in kinds, kinds
        assert case.status == PASSED, case.message


def test_figures_are_listed_in_the_first_candidate_runs_order() -> None:
    first, second = entry(1.0), entry(1.0)
    second["bandwidth"] = list(reversed(second["bandwidth"]))
    case = reference_case([first, second], [second, second], schedule(2), "good:1", TOLERANCES)
    names = [f["name"] for f in case.details["figures"] if f["kind"] == "busbw"]
    assert names == ["all_reduce 64KiB", "all_reduce 1MiB"]
    case = reference_case([second, first], [first, first], schedule(2), "good:1", TOLERANCES)
    assert [f["name"] for f in case.details["figures"] if f["kind"] == "busbw"] == ["all_reduce 1MiB", "all_reduce 64KiB"]


def test_a_regression_beside_a_shared_failure_fails_rather_than_errs() -> None:
    bad = entry(0.5, {"all_reduce": FAILED, "store": PASSED})
    reference_bad = entry(1.0, {"all_reduce": FAILED, "store": PASSED})
    case = reference_case(
        [bad, entry(0.52, {"all_reduce": FAILED, "store": PASSED})], [reference_bad] * 2, schedule(2), "good:1", TOLERANCES
    )
    assert case.status == FAILED and "regressed" in case.message, case.message


def test_pairs_are_complete_pairs_and_the_reference_id_is_shortened() -> None:
    # Three candidate runs and one reference run: one pair, not three.
    one = reference_case([entry(1.0)] * 3, [entry(1.0)], schedule(3), "good:1", TOLERANCES)
    assert one.status == FAILED and "expected at least 2 complete pairs with the reference good:1" in one.message
    long_id = "sha256:" + "ab" * 32
    reference = {**entry(1.0), "image_id": long_id}
    case = reference_case([entry(1.0)] * 2, [reference] * 2, schedule(2), "good:1", TOLERANCES)
    assert f"the reference good:1 ({long_id[:19]}) over 2 pair(s)" in case.message, case.message


def test_what_the_testcase_says_is_cut_at_ten_names_and_takes_no_time_of_its_own() -> None:
    names = [f"check{i:02d}" for i in range(11)]
    failed = entry(1.0, {**{n: FAILED for n in names}, "store": PASSED})
    passed = entry(1.0, {**{n: PASSED for n in names}, "store": PASSED})
    caused = reference_case([failed] * 2, [passed] * 2, schedule(2), "good:1", TOLERANCES)
    assert "check09 (" in caused.message and "check10" not in caused.message, caused.message
    shared = reference_case([failed] * 2, [failed] * 2, schedule(2), "good:1", TOLERANCES)
    assert shared.status == ERROR and "check09" in shared.message and "check10" not in shared.message
    skipped_all = entry(1.0, {**{n: "skipped" for n in names}, "store": PASSED})
    unpaired = reference_case([failed] * 2, [skipped_all] * 2, schedule(2), "good:1", TOLERANCES)
    assert unpaired.status == FAILED and "check09 (" in unpaired.message and "check10" not in unpaired.message
    only = reference_case([passed] * 2, [failed] * 2, schedule(2), "good:1", TOLERANCES)
    assert only.status == PASSED and "check09" in only.message and "check10" not in only.message
    many = {**entry(0.5), "bandwidth": [figure("all_reduce", 2**k, f"{2**k}B", 0.5) for k in range(11)]}
    good = {**entry(1.0), "bandwidth": [figure("all_reduce", 2**k, f"{2**k}B", 1.0) for k in range(11)]}
    regressed = reference_case([many] * 2, [good] * 2, schedule(2), "good:1", TOLERANCES)
    assert "11 of 13 regressed" in regressed.message and "all_reduce 512B" in regressed.message
    assert "all_reduce 1024B" not in regressed.message, regressed.message
    for case in (caused, shared, only, regressed):
        assert case.duration_s == 0.0  # the pairs' runs have their own times
    skipped = {"name": "bw", "status": "skipped", "duration_s": 0.1, "bandwidth": [], "cases": []}
    assert reference_case([skipped] * 2, [skipped] * 2, schedule(2), "good:1", TOLERANCES).duration_s == 0.0


def test_a_pass_names_the_lowest_busbw_and_the_details_round_to_four_places() -> None:
    candidate = {**entry(1.0), "bandwidth": [figure("all_reduce", 64, "64B", 0.95), figure("all_reduce", 128, "128B", 0.9)]}
    reference = {**entry(1.0), "bandwidth": [figure("all_reduce", 64, "64B", 1.0), figure("all_reduce", 128, "128B", 1.0)]}
    case = reference_case([candidate] * 2, [reference] * 2, schedule(2), "good:1", TOLERANCES)
    assert case.status == PASSED and "lowest busbw busbw all_reduce 128B: 0.90x" in case.message, case.message
    odd = {**entry(1.0), "bandwidth": [figure("all_reduce", 64, "64B", 0.123456789)]}
    (data,) = [
        f
        for f in reference_case(
            [odd] * 2, [{**odd, "bandwidth": [figure("all_reduce", 64, "64B", 1.0)]}] * 2, schedule(2), "g:1", TOLERANCES
        ).details["figures"]
        if f["kind"] == "busbw"
    ]
    assert (data["ratio"], data["low"], data["high"]) == (0.1235, 0.1235, 0.1235)
    # Too few pairs and nothing compared: the first reason said is the pairs.
    none = reference_case([entry(1.0)], [], schedule(3), "good:1", TOLERANCES)
    assert none.message == "expected at least 2 complete pairs with the reference good:1 to judge by; 0 ran"
