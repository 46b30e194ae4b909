"""A run against --reference IMAGE: what it asked, the paired runs (distval/comparing/reference.py says why pairs, in
which order, and how they are judged) and the ``reference`` testcase it adds to each scenario."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distval.comparing.reading import scenario_entries
from distval.comparing.reference import (
    CANDIDATE,
    MAX_PAIRS,
    REFERENCE,
    PairedTolerances,
    reference_case,
    sampled_figures,
    schedule,
)
from distval.errors import BadInput
from distval.plan.model import ScenarioPlan
from distval.results.scenario import RunSummary, ScenarioResult

# Runs the given plans one at a time and returns their results in order (the run's scenario loop).
RunPlans = Callable[[tuple[ScenarioPlan, ...]], list[ScenarioResult]]


@dataclass(frozen=True)
class ReferenceOptions:
    """What ``distval run``'s --reference options asked, read once from the parsed command line."""

    image: str | None  # None: no --reference
    pairs: int
    tolerances: PairedTolerances
    pairs_given: bool = False  # --pairs was on the command line (it needs --reference)


def check_reference(options: ReferenceOptions, jobs: int | None) -> None:
    """The option combinations --reference refuses (exit code 2), before anything runs; ``jobs``: --jobs as given."""
    if options.image is None:
        if options.pairs_given:
            raise BadInput("--pairs counts the runs paired with --reference: give --reference IMAGE too")
        return
    if not 2 <= options.pairs <= MAX_PAIRS:
        raise BadInput(f"--pairs {options.pairs}: expected 2..{MAX_PAIRS} (one pair gives a ratio, not an interval)")
    if jobs is not None and jobs > 1:
        raise BadInput(
            f"--jobs {jobs} with --reference: the pairs run one scenario at a time, so that the two images of a pair "
            "share the machine's state and nothing else runs beside them"
        )


@dataclass(frozen=True)
class PairedRuns:
    """One scenario's runs beyond its own: the candidate's later runs (pairs 2...) and the reference's, by pair."""

    candidates: tuple[ScenarioResult, ...]  # pairs 2..N (pair 1's is the scenario's own result)
    references: tuple[ScenarioResult, ...]
    order: tuple[tuple[str, str], ...]


def run_pairs(
    candidates: Sequence[ScenarioPlan],
    references: Sequence[ScenarioPlan],
    pairs: int,
    run_first: RunPlans,
    run_again: RunPlans,
    log: Callable[[str], None],
) -> tuple[list[ScenarioResult], dict[str, PairedRuns]]:
    """Every scenario's pairs, scenario after scenario, each pair in ``schedule``'s order; returns the scenarios' own
    results (each one's first candidate run) and, by the scenario's name, its other runs. The same image as
    candidate and reference is allowed: it is how the false-alarm rate is measured (docs/measurements.md).
    ``run_first`` runs the scenario's own run (its resources kept on failure where --keep-on-failure asks),
    ``run_again`` the others (never kept)."""
    order = schedule(pairs)
    own: list[ScenarioResult] = []
    paired: dict[str, PairedRuns] = {}
    for candidate, reference in zip(candidates, references, strict=True):
        runs: dict[str, list[ScenarioResult]] = {CANDIDATE: [], REFERENCE: []}
        for number, members in enumerate(order, start=1):
            log(f"{candidate.scenario.name}: pair {number} of {pairs}, {members[0]} first")
            for member in members:
                run = run_first if member == CANDIDATE and not runs[CANDIDATE] else run_again
                (result,) = run((candidate if member == CANDIDATE else reference,))
                runs[member].append(result)
        own.append(runs[CANDIDATE][0])
        paired[candidate.scenario.name] = PairedRuns(tuple(runs[CANDIDATE][1:]), tuple(runs[REFERENCE]), order)
    return own, paired


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
        case = reference_case(candidates, references, runs.order, options.image, options.tolerances, family)
        reference_id = case.details.get("reference_image_id")
        properties = (
            *result.properties,
            ("reference_image", options.image),
            ("reference_image_id", str(reference_id) if reference_id else "unknown"),
        )
        scenarios.append(dataclasses.replace(result, cases=(*result.cases, case), properties=properties))
    return dataclasses.replace(summary, scenarios=tuple(scenarios))
