"""A run's judges and what each was asked: --baseline's 'baseline' testcase (distval/comparing/baseline.py judges
it), --reference's 'reference' testcase (distval/comparing/reference.py) and --references' 'references' testcase
(distval/comparing/system_references.py), each added to every scenario of the run's summary once its scenarios ran
(distval/session/run.py asks each, also for a run that stopped early)."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from distval.comparing.baseline import baseline_cases, with_cases
from distval.comparing.deltas import Tolerances
from distval.comparing.reading import combined_baseline, scenario_entries
from distval.comparing.reference import (
    DEFAULT_CONFIRM_PAIRS,
    REFERENCE_CASE,
    Confirmation,
    PairedTolerances,
    reference_case,
    regressed_figures,
    sampled_figures,
    schedule,
)
from distval.comparing.system_references import Machine, expected_failures, references_case
from distval.config.references import References
from distval.results.scenario import RunSummary, ScenarioResult
from distval.results.shape import falls, straggler


@dataclass(frozen=True)
class BaselineOptions:
    """What ``distval run``'s --baseline options asked (distval/cli/baseline.py declares each; --fail-on-skip is the
    run's): read once from the parsed command line, so that the contract is these fields, not attribute names."""

    baselines: tuple[tuple[str, Mapping[str, Any]], ...]  # (path, report) of each --baseline; () without one
    remeasure: int | None  # None: the default (distval/session/remeasure.py DEFAULT_REMEASURE)
    tolerances: Tolerances
    fail_on_skip: bool
    # (label, report): the one baseline the run is judged against (``combined_baseline``: the median of several),
    # combined once with the options for the re-measures and the 'baseline' testcases alike; None without --baseline.
    against: tuple[str, Mapping[str, Any]] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "against", combined_baseline(self.baselines) if self.baselines else None)


@dataclass(frozen=True)
class ReferenceOptions:
    """What ``distval run``'s --reference options asked, read once from the parsed command line."""

    image: str | None  # None: no --reference
    pairs: int
    tolerances: PairedTolerances
    pairs_given: bool = False  # --pairs was on the command line (it needs --reference)
    # --confirm-pairs: more pairs of a scenario where a figure regressed after its first ``pairs`` (0: none)
    confirm_pairs: int = DEFAULT_CONFIRM_PAIRS
    confirm_pairs_given: bool = False  # --confirm-pairs was on the command line (it needs --reference)


@dataclass(frozen=True)
class ReferencesOptions:
    """What --references FILE --system NAME asked: the file as read (None: no --references) and the system."""

    references: References | None
    system: str


@dataclass(frozen=True)
class PairedRuns:
    """One scenario's runs beyond its own: the candidate's later runs (pairs 2...) and the reference's, by pair."""

    candidates: tuple[ScenarioResult, ...]  # pairs 2..N (pair 1's is the scenario's own result)
    references: tuple[ScenarioResult, ...]
    order: tuple[tuple[str, str], ...]  # every planned pair's, confirmation pairs included
    confirmation: Confirmation | None = None  # the confirmation pairs asked for, if any


def confirmation_trigger(
    options: ReferenceOptions, candidates: Sequence[ScenarioResult], references: Sequence[ScenarioResult]
) -> tuple[str, ...]:
    """The figures of one scenario's pairs so far (``candidates[i]`` and ``references[i]`` from pair i) that regress
    by --reference's rule: what makes the run stage run its confirmation pairs (distval/comparing/reference.py
    ``regressed_figures``); () where none does."""
    summary = RunSummary("", ())
    return regressed_figures(scenario_entries(summary, candidates), scenario_entries(summary, references), options.tolerances)


def with_baseline(
    summary: RunSummary,
    options: BaselineOptions,
    remeasures: Mapping[int, Sequence[Mapping[str, Any]]],
    entries: Sequence[Mapping[str, Any]],
) -> RunSummary:
    """The summary with a 'baseline' testcase per scenario when --baseline was given (and scenarios ran: a run
    with none exits non-zero on its own, RunSummary.exit_code); ``remeasures``: ``remeasure``'s entries;
    ``entries``: the JSON report entries of the summary's scenarios, built once by the run stage."""
    if options.against is None or not summary.scenarios:
        return summary

    path, baseline = options.against
    cases = baseline_cases(entries, baseline, options.tolerances, path, remeasures, options.fail_on_skip)
    return with_cases(summary, cases)


def with_reference(
    summary: RunSummary, options: ReferenceOptions, paired: Mapping[str, PairedRuns], planned: Collection[str]
) -> RunSummary:
    """The summary with a ``reference`` testcase added to each scenario planned to run in pairs (``planned``: their
    names; not those the selection left out), and the reference image named in its properties. One that has no
    pairs (the run stopped first) gets a failed testcase from ``reference_case``: nothing compared."""
    if options.image is None or not summary.scenarios:
        return summary
    own_entries = scenario_entries(summary, summary.scenarios)
    sides: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}
    for result, entry in zip(summary.scenarios, own_entries, strict=True):
        name = result.plan.scenario.name
        if name in planned:
            runs = paired.get(name, PairedRuns((), (), schedule(options.pairs)))
            sides[name] = ([entry, *scenario_entries(summary, runs.candidates)], scenario_entries(summary, runs.references))
    # The whole run is one decision: the rank test's significance is shared among every figure it judges.
    family = sum(sampled_figures(*pair) for pair in sides.values())
    scenarios = []
    for result in summary.scenarios:
        name = result.plan.scenario.name
        if name not in sides:
            scenarios.append(result)
            continue
        runs = paired.get(name, PairedRuns((), (), schedule(options.pairs)))
        candidates, references = sides[name]
        case = reference_case(candidates, references, runs.order, options.image, options.tolerances, family, runs.confirmation)
        reference_id = case.details.get("reference_image_id")
        properties = (
            *result.properties,
            ("reference_image", options.image),
            ("reference_image_id", str(reference_id) if reference_id else "unknown"),
        )
        scenarios.append(dataclasses.replace(result, cases=(*result.cases, case), properties=properties))
    return dataclasses.replace(summary, scenarios=tuple(scenarios))


def with_references(summary: RunSummary, options: ReferencesOptions, entries: Sequence[Mapping[str, Any]]) -> RunSummary:
    """The summary with each scenario's expected failures said and its ``references`` testcase added. ``entries``:
    the JSON report entries of the summary's scenarios, built once by the run stage; the testcase reads an entry's
    name and busbw figures, which no judge's testcase changes."""
    if options.references is None or not summary.scenarios:
        return summary
    by_scenario = options.references.systems[options.system]
    scenarios = []
    for result, entry in zip(summary.scenarios, entries, strict=True):
        ours = by_scenario.get(result.plan.scenario.name)
        cases, problems, notes = expected_failures(result.cases, ours, options.system)
        judged = dataclasses.replace(result, cases=cases)
        case = references_case(entry, ours, options.system, options.references.path, problems, notes, machine_of(judged))
        scenarios.append(judged if case is None else dataclasses.replace(judged, cases=(*judged.cases, case)))
    return dataclasses.replace(summary, scenarios=tuple(scenarios))


def machine_of(result: ScenarioResult) -> Machine:
    """What the scenario's run says of the machine: the reference image's busbw where --reference ran pairs (the
    ``reference`` testcase's figures), busbw falling past its plateau, and a straggler with its node."""
    reference_busbw: dict[str, tuple[float, ...]] = {}
    for case in result.cases:
        if case.name == REFERENCE_CASE:
            for figure in case.details.get("figures") or []:  # type: ignore[attr-defined]
                if isinstance(figure, dict) and figure.get("kind") == "busbw":
                    reference_busbw[str(figure.get("name"))] = tuple(figure.get("reference") or ())
    scenario = result.plan.scenario
    return Machine(
        reference_busbw,
        tuple(f.describe() for f in falls(result.figures)),
        straggler(result.figures, scenario.nproc_per_node),
        scenario.nodes,
    )
