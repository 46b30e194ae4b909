"""A run against --reference IMAGE: the option combinations it refuses and the paired runs (distval/comparing/reference.py
says why pairs, in which order, and how they are judged; distval/comparing/judges.py adds the ``reference`` testcase)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from distval.comparing.judges import PairedRuns, ReferenceOptions, confirmation_trigger
from distval.comparing.reference import (
    CANDIDATE,
    MAX_PAIRS,
    REFERENCE,
    Confirmation,
    listed,
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
        if options.confirm_pairs_given:
            raise BadInput("--confirm-pairs counts the runs paired with --reference: give --reference IMAGE too")
        return
    if not 2 <= options.pairs <= MAX_PAIRS:
        raise BadInput(f"--pairs {options.pairs}: expected 2..{MAX_PAIRS} (one pair gives a ratio, not an interval)")
    if not 0 <= options.confirm_pairs <= MAX_PAIRS - options.pairs:
        raise BadInput(
            f"--confirm-pairs {options.confirm_pairs}: expected 0..{MAX_PAIRS - options.pairs} with --pairs "
            f"{options.pairs} (at most {MAX_PAIRS} pairs of a scenario in all)"
        )
    if jobs is not None and jobs > 1:
        raise BadInput(
            f"--jobs {jobs} with --reference: the pairs run one scenario at a time, so that the two images of a pair "
            "share the machine's state and nothing else runs beside them"
        )


def run_pairs(
    candidates: Sequence[ScenarioPlan],
    references: Sequence[ScenarioPlan],
    options: ReferenceOptions,
    run_first: RunPlans,
    run_again: RunPlans,
    log: Callable[[str], None],
) -> tuple[list[ScenarioResult], dict[str, PairedRuns]]:
    """Every scenario's pairs, scenario after scenario, each pair in ``schedule``'s order; returns the scenarios' own
    results (each one's first candidate run) and, by the scenario's name, its other runs. The same image as
    candidate and reference is allowed: it is how the false-alarm rate is measured (docs/measurements.md).
    ``run_first`` runs the scenario's own run (its resources kept on failure where --keep-on-failure asks),
    ``run_again`` the others (never kept).

    Where a figure of a scenario regresses after its ``options.pairs`` pairs, its ``options.confirm_pairs``
    confirmation pairs follow at once, continuing the order (distval/comparing/reference.py says why and how they
    are judged). An interrupt in any pair, a confirmation pair's too, ends the whole run as any interrupt does."""
    pairs, more = options.pairs, options.confirm_pairs
    order = schedule(pairs + more)
    own: list[ScenarioResult] = []
    paired: dict[str, PairedRuns] = {}
    for candidate, reference in zip(candidates, references, strict=True):
        name = candidate.scenario.name
        runs: dict[str, list[ScenarioResult]] = {CANDIDATE: [], REFERENCE: []}
        confirmation: Confirmation | None = None
        total, number = pairs, 0
        while number < total:
            number += 1
            members = order[number - 1]
            log(f"{name}: {'pair' if number <= pairs else 'confirmation pair'} {number} of {total}, {members[0]} first")
            for member in members:
                run = run_first if member == CANDIDATE and not runs[CANDIDATE] else run_again
                (result,) = run((candidate if member == CANDIDATE else reference,))
                runs[member].append(result)
            triggered = confirmation_trigger(options, runs[CANDIDATE], runs[REFERENCE]) if number == pairs and more else ()
            if triggered:
                confirmation, total = Confirmation(pairs, more, triggered), pairs + more
                log(
                    f"{name}: {len(triggered)} figure(s) regressed over {pairs} pairs ({listed(triggered)}); {more} "
                    "confirmation pair(s) follow, and a figure is called regressed only where it regresses again over "
                    "every pair"
                )
        own.append(runs[CANDIDATE][0])
        paired[name] = PairedRuns(tuple(runs[CANDIDATE][1:]), tuple(runs[REFERENCE]), order[:total], confirmation)
    return own, paired
