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
from distval.session.pairs import PairedRuns, ReferenceOptions, check_reference, run_pairs, with_reference
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

    own, paired_runs = run_pairs([candidate], [reference], 3, run("first"), run("again"), lambda line: None)
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
