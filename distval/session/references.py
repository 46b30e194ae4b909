"""``distval run --references FILE --system NAME`` in the run stage: the file read before anything runs, and the
``references`` testcase (distval/comparing/system_references.py) added to each scenario with what the run knows of
the machine (the reference image's figures, the shape of the curves, a straggler)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distval.comparing.reference import REFERENCE_CASE
from distval.comparing.system_references import Machine, expected_failures, references_case
from distval.config.references import References, load_references, system_problem
from distval.errors import BadInput
from distval.results.scenario import RunSummary, ScenarioResult
from distval.results.shape import falls, straggler


@dataclass(frozen=True)
class ReferencesOptions:
    references: References | None
    system: str


def references_options(path: str | None, system: str | None) -> ReferencesOptions:
    """--references and --system: the file read and the system checked, before anything runs; BadInput (a ConfigError
    for the file, one line per problem) otherwise."""
    if path is None:
        if system is not None:
            raise BadInput("--system names the machine for --references: give --references FILE too")
        return ReferencesOptions(None, "")
    if system is None:
        raise BadInput("--references FILE judges the run on one system's references: give --system NAME too")
    references = load_references(path)
    problem = system_problem(references, system)
    if problem is not None:
        raise BadInput(problem)
    return ReferencesOptions(references, system)


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
