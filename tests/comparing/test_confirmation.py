"""--reference's confirmation pairs (distval/session/pairs.py runs them, distval/comparing/reference.py judges them):
more pairs only for a scenario with a regressed figure, continuing the ABBA order; a transient regression that they
contradict passes, a persistent one fails, a confirmation run's failed check fails; an interrupt in them ends the
pairs; --confirm-pairs 0 is the judgement without them. Fake runs: each run's busbw is scripted."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from distval.cli.main import build_parser, main
from distval.cli.reference import reference_options
from distval.comparing.judges import PairedRuns, ReferenceOptions, with_reference
from distval.comparing.reference import (
    DEFAULT_CONFIRM_PAIRS,
    REFERENCE_CASE,
    Confirmation,
    PairedTolerances,
    listed,
    reference_case,
    regressed_figures,
    schedule,
)
from distval.config import parse_config
from distval.errors import BadInput, Interrupted
from distval.plan.model import ScenarioPlan
from distval.results.outcome import FAILED, PASSED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from distval.session.pairs import check_reference, run_pairs
from distval.targets.engines.planning import plan_scenario
from tests.comparing.test_system_references import CONFIG  # scenario bw with a bandwidth check, and one without

TOLERANCES = PairedTolerances()
# The busbw of each run of the candidate in scenario bw, in the order it ran (the reference's is always 1.0):
# TRANSIENT is slower in the first three pairs only (a load swing that hit them alike), PERSISTENT in every pair.
TRANSIENT = (0.50, 0.52, 0.48, 1.0, 0.98)
PERSISTENT = (0.50, 0.52, 0.48, 0.51, 0.49)
STEADY = (1.0, 1.01, 0.99, 1.0, 1.0)


def plans(image: str) -> tuple[ScenarioPlan, ...]:
    return tuple(plan_scenario(s, "run1", image) for s in parse_config(CONFIG, "c.yaml").scenarios)


def bandwidth_case(busbw: float) -> CaseResult:
    figures = [
        {"size": size, "label": label, "busbw_gbps": busbw * scale, "time_us": 10.0, "algbw_gbps": busbw * scale / 2}
        for size, label, scale in ((65536, "64KiB", 1.0), (1048576, "1MiB", 2.0))
    ]
    return CaseResult("bandwidth.all_reduce", PASSED, "ok", 1.0, details={"figures": figures, "iterations": 5, "world_size": 2})


class FakeRuns:
    """Runs a plan by returning a result: the candidate's busbw in scenario bw from ``candidate_busbw``, one value per
    run in turn, every other busbw 1.0; ``store`` fails in the candidate runs numbered in ``store_fails`` (1-based)."""

    def __init__(self, candidate_busbw: Sequence[float], store_fails: Sequence[int] = (), interrupt_at: int = 0) -> None:
        self.candidate_busbw = list(candidate_busbw)
        self.store_fails = store_fails
        self.interrupt_at = interrupt_at  # the run (1-based over every run) that is interrupted; 0: none
        self.ran: list[tuple[str, str, str]] = []  # (first or again, scenario, image)
        self.candidate_runs = 0
        self.plans: list[ScenarioPlan] = []

    def runner(self, kind: str) -> Any:
        def run(plans: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
            return [self.one(kind, plan) for plan in plans]

        return run

    def one(self, kind: str, plan: ScenarioPlan) -> ScenarioResult:
        self.ran.append((kind, plan.scenario.name, plan.image))
        self.plans.append(plan)
        if len(self.ran) == self.interrupt_at:
            raise Interrupted("interrupted by SIGINT")
        candidate = plan.image.startswith("cand")
        cases = []
        busbw = 1.0
        if candidate and plan.scenario.name == "bw":
            self.candidate_runs += 1
            busbw = self.candidate_busbw[self.candidate_runs - 1]
        if plan.scenario.name == "bw":
            cases.append(bandwidth_case(busbw))
        store_failed = candidate and plan.scenario.name == "bw" and self.candidate_runs in self.store_fails
        cases.append(CaseResult("store", FAILED if store_failed else PASSED, "m", 1.0))
        return ScenarioResult(plan, tuple(cases), (("image_id", f"sha256:{plan.image}"),), "", 5.0)


def options(pairs: int = 3, confirm: int = DEFAULT_CONFIRM_PAIRS) -> ReferenceOptions:
    return ReferenceOptions("ref:1", pairs, TOLERANCES, confirm_pairs=confirm)


def judged(fake: FakeRuns, asked: ReferenceOptions) -> tuple[dict[str, CaseResult], dict[str, PairedRuns], list[str]]:
    """Every scenario run in pairs by ``fake``, then judged: each scenario's ``reference`` testcase by name, the pairs,
    and the progress log."""
    log: list[str] = []
    own, paired = run_pairs(plans("cand:1"), plans("ref:1"), asked, fake.runner("first"), fake.runner("again"), log.append)
    summary = with_reference(RunSummary("run1", tuple(own)), asked, paired, ["bw", "quiet"])
    cases = {s.plan.scenario.name: next(c for c in s.cases if c.name == REFERENCE_CASE) for s in summary.scenarios}
    return cases, paired, log


def test_confirmation_pairs_run_only_for_the_scenario_with_a_regressed_figure_and_continue_the_order() -> None:
    fake = FakeRuns(TRANSIENT)
    cases, paired, log = judged(fake, options())
    bw = [(kind, image) for kind, name, image in fake.ran if name == "bw"]
    # 3 pairs, then 2 confirmation pairs (ABBA continued: pair 4 the reference first, pair 5 the candidate first).
    assert [image for _, image in bw] == [
        "cand:1",
        "ref:1",
        "ref:1",
        "cand:1",
        "cand:1",
        "ref:1",
        "ref:1",
        "cand:1",
        "cand:1",
        "ref:1",
    ]
    assert bw[0][0] == "first" and {kind for kind, _ in bw[1:]} == {"again"}  # a confirmation run is never kept
    # The same plans as the first pairs': the confirmation changes how often a scenario runs, not its hash.
    candidate, reference = plans("cand:1")[0], plans("ref:1")[0]
    assert all(p in (candidate, reference) for p in fake.plans if p.scenario.name == "bw")
    assert paired["bw"].order == schedule(5) and len(paired["bw"].candidates) == 4 and len(paired["bw"].references) == 5
    assert paired["bw"].confirmation == Confirmation(3, 2, ("busbw all_reduce 64KiB", "busbw all_reduce 1MiB"))
    # The scenario whose figures held ran its 3 pairs only.
    assert sum(1 for _, name, _ in fake.ran if name == "quiet") == 6
    assert paired["quiet"].confirmation is None and paired["quiet"].order == schedule(3)
    assert cases["quiet"].details["confirmation"] is None and cases["quiet"].details["pairs"] == 3
    # The progress log says why, and counts the confirmation pairs.
    assert "bw: 2 figure(s) regressed over 3 pairs (busbw all_reduce 64KiB, busbw all_reduce 1MiB); 2 confirmation" in "\n".join(
        log
    )
    assert "bw: confirmation pair 4 of 5, reference first" in log and "bw: confirmation pair 5 of 5, candidate first" in log
    assert not any("confirmation" in line for line in log if line.startswith("quiet"))


def test_a_transient_regression_the_confirmation_pairs_contradict_passes_and_says_so() -> None:
    cases, _, _ = judged(FakeRuns(TRANSIENT), options())
    bw = cases["bw"]
    assert bw.status == PASSED, bw.message
    assert (
        "over 5 pair(s), none worse on the candidate; 2 of them confirmation pairs, run because busbw all_reduce 64KiB, "
        in bw.message
    )
    assert "regressed over the first 3, not confirmed over all 5" in bw.message
    details = bw.details
    assert details["pairs"] == 5 and len(details["order"]) == 5
    assert details["confirmation"] == {
        "after_pairs": 3,
        "pairs": 2,
        "ran": 2,
        "triggered_by": ["busbw all_reduce 64KiB", "busbw all_reduce 1MiB"],
        "confirmed": [],
    }
    # The figures list every pair, the confirmation pairs too.
    small = next(f for f in details["figures"] if f["name"] == "all_reduce 64KiB")
    assert tuple(small["candidate"]) == TRANSIENT
    assert len(small["reference"]) == 5 and small["regressed"] is False


def test_a_persistent_regression_is_seen_again_and_fails() -> None:
    cases, _, _ = judged(FakeRuns(PERSISTENT), options())
    bw = cases["bw"]
    assert bw.status == FAILED, bw.message
    assert "2 of 5 regressed over the first 3 pairs and again over all 5: busbw all_reduce 64KiB: 0.50x" in bw.message
    assert bw.details["confirmation"]["confirmed"] == ["busbw all_reduce 64KiB", "busbw all_reduce 1MiB"]
    assert cases["quiet"].status == PASSED


def test_without_confirmation_pairs_the_transient_regression_fails_as_before() -> None:
    # --confirm-pairs 0: 3 pairs and the judgement of before (the guard can fail: the test above passes only through
    # the confirmation pairs).
    fake = FakeRuns(TRANSIENT)
    cases, paired, log = judged(fake, options(confirm=0))
    assert len(fake.ran) == 12 and paired["bw"].confirmation is None and paired["bw"].order == schedule(3)
    assert cases["bw"].status == FAILED and "2 of 5 regressed: busbw all_reduce 64KiB" in cases["bw"].message
    assert not any("confirmation" in line for line in log)
    # Exactly the testcase of a run without the option: its pairs judged with no confirmation at all.
    fake = FakeRuns(TRANSIENT)
    own, paired = run_pairs(
        plans("cand:1")[:1], plans("ref:1")[:1], options(confirm=0), fake.runner("first"), fake.runner("again"), lambda line: None
    )
    runs = paired["bw"]
    before = PairedRuns(runs.candidates, runs.references, schedule(3))
    summary = RunSummary("run1", tuple(own))
    assert with_reference(summary, options(confirm=0), {"bw": runs}, ["bw"]) == with_reference(
        summary, options(confirm=0), {"bw": before}, ["bw"]
    )


def test_steady_figures_run_no_confirmation() -> None:
    fake = FakeRuns(STEADY)
    cases, paired, _ = judged(fake, options())
    assert len(fake.ran) == 12 and paired["bw"].confirmation is None
    assert cases["bw"].status == PASSED and "confirmation" not in cases["bw"].message
    # Decided once, after all the first pairs: slower in pairs 1 and 2 (an interval past the tolerance over those two)
    # but not in pair 3 is no regression over the 3 pairs, and runs none.
    fake = FakeRuns((0.50, 0.52, 1.0))
    cases, paired, _ = judged(fake, options())
    assert len(fake.ran) == 12 and paired["bw"].confirmation is None and cases["bw"].status == PASSED


def test_a_confirmation_run_that_fails_a_check_fails_like_any_pair() -> None:
    # The 4th candidate run is the first confirmation pair's: its store fails while every reference run passed.
    cases, _, _ = judged(FakeRuns(TRANSIENT, store_fails=(4,)), options())
    bw = cases["bw"]
    assert bw.status == FAILED
    assert "caused by the image: store (passed/passed/passed/failed/passed vs passed/passed/passed/passed/passed)" in bw.message
    # A check's failure in the first pairs triggers no confirmation of its own: the figures do.
    fake = FakeRuns(STEADY, store_fails=(2,))
    cases, paired, _ = judged(fake, options())
    assert paired["bw"].confirmation is None and cases["bw"].status == FAILED


def test_an_interrupt_during_the_confirmation_pairs_ends_the_pairs() -> None:
    # Run 7 of scenario bw is its first confirmation run: the interrupt ends the pairs as any pair's does (the run
    # stage then ends the run with the interrupt's exit code and no verdict on the scenario).
    fake = FakeRuns(TRANSIENT, interrupt_at=7)
    with pytest.raises(Interrupted):
        run_pairs(plans("cand:1"), plans("ref:1"), options(), fake.runner("first"), fake.runner("again"), lambda line: None)
    assert len(fake.ran) == 7 and all(name == "bw" for _, name, _ in fake.ran)


def entry(busbw: float) -> dict[str, Any]:
    bandwidth = [{"operation": "all_reduce", "size": 65536, "label": "64KiB", "busbw_gbps": busbw, "time_us": 1.0}]
    return {
        "name": "bw",
        "status": PASSED,
        "duration_s": 5.0,
        "bandwidth": bandwidth,
        "cases": [{"name": "store", "status": PASSED}],
    }


def test_a_figure_is_called_regressed_only_where_it_triggered_the_confirmation_and_regresses_again() -> None:
    candidates, references = [entry(v) for v in PERSISTENT], [entry(1.0)] * 5
    triggered = Confirmation(3, 2, ("busbw all_reduce 64KiB",))
    assert reference_case(candidates, references, schedule(5), "ref:1", TOLERANCES, None, triggered).status == FAILED
    # Past the tolerance over every pair, but it did not trigger the confirmation: not seen twice, not called.
    other = Confirmation(3, 2, ("duration store",))
    case = reference_case(candidates, references, schedule(5), "ref:1", TOLERANCES, None, other)
    assert case.status == PASSED, case.message
    assert case.details["confirmation"]["confirmed"] == [] and case.details["figures"][0]["regressed"] is False
    # Without a confirmation, the same pairs regress.
    assert reference_case(candidates, references, schedule(5), "ref:1", TOLERANCES).status == FAILED


def test_confirmation_pairs_that_did_not_all_complete_fail_closed() -> None:
    candidates, references = [entry(v) for v in TRANSIENT[:4]], [entry(1.0)] * 4
    case = reference_case(
        candidates, references, schedule(5), "ref:1", TOLERANCES, None, Confirmation(3, 2, ("busbw all_reduce 64KiB",))
    )
    assert case.status == FAILED
    assert (
        "expected 2 confirmation pairs after the first 3 (run because busbw all_reduce 64KiB regressed there); 1 completed"
        in case.message
    )
    assert case.details["confirmation"]["ran"] == 1
    # None completed (the run stage stops before; a testcase judged from such pairs still says 0, never less).
    for kept in (3, 2):
        stopped = reference_case(
            candidates[:kept], references[:kept], schedule(5), "ref:1", TOLERANCES, None, Confirmation(3, 2, ("busbw x",))
        )
        assert stopped.status == FAILED and "regressed there); 0 completed" in stopped.message
        assert stopped.details["confirmation"]["ran"] == 0


def test_the_triggering_figures_are_named_up_to_ten() -> None:
    labels = [f"busbw all_reduce {n}KiB" for n in range(12)]
    assert listed(labels[:10]) == ", ".join(labels[:10])
    assert listed(labels[:11]) == ", ".join(labels[:10]) + " and 1 more"
    assert listed(labels) == ", ".join(labels[:10]) + " and 2 more"


def test_the_trigger_is_the_rule_of_the_final_judgement() -> None:
    # One rule: what triggers is exactly what the testcase would call regressed over the same pairs.
    candidates, references = [entry(v) for v in TRANSIENT[:3]], [entry(1.0)] * 3
    assert regressed_figures(candidates, references, TOLERANCES) == ("busbw all_reduce 64KiB",)
    case = reference_case(candidates, references, schedule(3), "ref:1", TOLERANCES)
    assert [f["name"] for f in case.details["figures"] if f["regressed"]] == ["all_reduce 64KiB"]
    steady = [entry(v) for v in STEADY[:3]]
    assert regressed_figures(steady, references, TOLERANCES) == ()
    # At the tolerance's edge the trigger moves with the tolerance asked.
    assert regressed_figures(candidates, references, PairedTolerances(busbw=0.55)) == ()


def parsed(*argv: str) -> Any:
    return build_parser().parse_args(["run", *argv])


def test_confirm_pairs_is_an_option_of_reference_with_its_bounds() -> None:
    assert reference_options(parsed("--reference", "r:1")).confirm_pairs == DEFAULT_CONFIRM_PAIRS == 2
    assert reference_options(parsed("--reference", "r:1", "--confirm-pairs", "0")).confirm_pairs == 0
    check_reference(reference_options(parsed("--reference", "r:1", "--pairs", "3", "--confirm-pairs", "47")), None)
    check_reference(reference_options(parsed("--reference", "r:1", "--pairs", "50", "--confirm-pairs", "0")), None)
    check_reference(reference_options(parsed("--reference", "r:1", "--jobs", "1")), 1)  # one at a time: as the pairs run
    check_reference(reference_options(parsed("--reference", "r:1", "--pairs", "2")), None)  # the fewest for an interval
    with pytest.raises(BadInput, match="--confirm-pairs -1: expected 0..47"):  # what the command line cannot give
        check_reference(options(confirm=-1), None)
    # The default shrinks to what --pairs leaves (--pairs 50 stays as valid as before); a K given does not.
    assert reference_options(parsed("--reference", "r:1", "--pairs", "49")).confirm_pairs == 1
    assert reference_options(parsed("--reference", "r:1", "--pairs", "50")).confirm_pairs == 0
    for argv, expected in (
        (("--confirm-pairs", "2"), "--confirm-pairs counts the runs paired with --reference: give --reference IMAGE too"),
        (("--confirm-pairs", "0"), "--confirm-pairs counts the runs paired with --reference: give --reference IMAGE too"),
        (("--reference", "r:1", "--pairs", "3", "--confirm-pairs", "48"), "--confirm-pairs 48: expected 0..47 with --pairs 3"),
        (("--reference", "r:1", "--pairs", "50", "--confirm-pairs", "1"), "--confirm-pairs 1: expected 0..0 with --pairs 50"),
    ):
        args = parsed(*argv)
        with pytest.raises(BadInput) as refused:
            check_reference(reference_options(args), args.jobs)
        assert expected in str(refused.value)


def test_plan_with_a_reference_says_the_pairs_and_that_confirmation_pairs_may_follow(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--image", "cand:1", "--reference", "ref:1"]) == 0
    text = capsys.readouterr().out
    assert "reference: each scenario runs in 3 pairs with ref:1 (distval run --pairs)" in text
    assert "2 confirmation pairs of that scenario follow (--confirm-pairs)" in text
    assert main(["plan", "--image", "cand:1", "--reference", "ref:1", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)["reference"]
    assert (data["image"], data["pairs"], data["confirm_pairs"]) == ("ref:1", 3, 2)
    # Without --reference, neither.
    assert main(["plan", "--image", "cand:1"]) == 0
    assert "confirmation" not in capsys.readouterr().out
    assert main(["plan", "--image", "cand:1", "--format", "json"]) == 0
    assert "reference" not in json.loads(capsys.readouterr().out)
