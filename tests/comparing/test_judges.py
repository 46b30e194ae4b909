"""distval/comparing/judges.py: a judge nobody asked for leaves the run's summary as it is, one asked of a run where
no scenario ran adds nothing, the reference image's id is named (or said unknown), and what the machine's reference
figures are comes from the ``reference`` testcase's busbw figures alone."""

from __future__ import annotations

from distval.comparing.deltas import Tolerances
from distval.comparing.judges import (
    BaselineOptions,
    PairedRuns,
    ReferenceOptions,
    ReferencesOptions,
    machine_of,
    with_baseline,
    with_reference,
    with_references,
)
from distval.comparing.reading import scenario_entries
from distval.comparing.reference import REFERENCE_CASE, schedule
from distval.results.outcome import PASSED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from tests.comparing import test_reference as paired_runs
from tests.comparing import test_system_references as system_references

GOOD = {"run_id": "good", "scenarios": [{"name": "bw", "status": PASSED, "cases": [], "bandwidth": []}]}


def summary() -> RunSummary:
    (plan,) = paired_runs.plans("cand:1")
    return RunSummary("run1", (paired_runs.result(plan),))


def test_a_judge_nobody_asked_for_leaves_the_summary_as_it_is() -> None:
    run = summary()
    entries = scenario_entries(run, run.scenarios)
    assert with_baseline(run, BaselineOptions((), None, Tolerances(), fail_on_skip=False), {}, entries) is run
    assert with_reference(run, ReferenceOptions(None, 3, paired_runs.TOLERANCES), {}, ["bw"]) is run
    assert with_references(run, ReferencesOptions(None, ""), entries) is run


def test_a_judge_asked_of_a_run_where_no_scenario_ran_adds_nothing() -> None:
    empty = RunSummary("run1", ())
    asked = BaselineOptions((("GOOD.json", GOOD),), None, Tolerances(), fail_on_skip=False)
    assert with_baseline(empty, asked, {}, []) is empty
    assert with_reference(empty, paired_runs.options(), {}, ["bw"]) is empty
    assert with_references(empty, ReferencesOptions(system_references.REFS, "ci-2core"), []) is empty
    # The guard can pass: with a scenario, each asked judge adds its testcase.
    run = summary()
    entries = scenario_entries(run, run.scenarios)
    assert with_baseline(run, asked, {}, entries).scenarios[0].cases[-1].name == "baseline"
    assert with_reference(run, paired_runs.options(), {}, ["bw"]).scenarios[0].cases[-1].name == REFERENCE_CASE


def test_the_reference_images_id_is_named_or_said_unknown() -> None:
    (candidate,), (reference,) = paired_runs.plans("cand:1"), paired_runs.plans("ref:1")
    run = RunSummary("run1", (paired_runs.result(candidate),))
    runs = PairedRuns((paired_runs.result(candidate),), (paired_runs.result(reference),) * 2, schedule(2))
    (judged,) = with_reference(run, paired_runs.options(), {"bw": runs}, ["bw"]).scenarios
    assert ("reference_image_id", "sha256:ref:1") in judged.properties
    (stopped,) = with_reference(run, paired_runs.options(), {}, ["bw"]).scenarios  # no reference run: no id
    assert ("reference_image_id", "unknown") in stopped.properties


def test_the_machines_reference_figures_are_the_reference_testcases_busbw_figures() -> None:
    reference_case = CaseResult(
        REFERENCE_CASE,
        PASSED,
        "ok",
        0.0,
        details={
            "figures": [
                {"kind": "busbw", "name": "all_reduce 64KiB", "reference": [1.0, 1.1]},
                {"kind": "busbw", "name": "all_reduce 1MiB"},  # no reference values: an empty series
                {"kind": "duration", "name": "store", "reference": [0.2, 0.3]},
                "not a figure",
            ]
        },
    )
    # Another testcase with busbw figures of its own is no reference's.
    other = CaseResult("baseline", PASSED, "ok", 0.0, details={"figures": [{"kind": "busbw", "name": "x", "reference": [9.0]}]})
    result: ScenarioResult = system_references.result("bw", (other, reference_case))
    assert dict(machine_of(result).reference_busbw) == {"all_reduce 64KiB": (1.0, 1.1), "all_reduce 1MiB": ()}
    assert dict(machine_of(system_references.result("bw", (other,))).reference_busbw) == {}
