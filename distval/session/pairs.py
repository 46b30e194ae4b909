"""A run against --reference IMAGE: the option combinations it refuses and the paired runs (distval/comparing/reference.py
says why pairs, in which order, and how they are judged; distval/comparing/judges.py adds the ``reference`` testcase)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distval.comparing.judges import PairedRuns, ReferenceOptions
from distval.comparing.reference import (
    CANDIDATE,
    MAX_PAIRS,
    REFERENCE,
    schedule,
)
from distval.errors import BadInput
from distval.plan.model import ScenarioPlan
from distval.results.scenario import ScenarioResult

# Runs the given plans one at a time and returns their results in order (the run's scenario loop).
RunPlans = Callable[[tuple[ScenarioPlan, ...]], list[ScenarioResult]]


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
