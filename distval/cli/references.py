"""``distval run --references FILE --system NAME`` (the ``references`` testcase of distval/reports/system_references.py)
and ``distval references suggest REPORT...`` (distval/reports/references_suggest.py)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from distval.cli import values as cli_values
from distval.config.keys import NAME_EXPECTED, NAME_PATTERN
from distval.config.references import References, load_references, system_problem
from distval.config.yaml_nodes import shown
from distval.errors import BadInput
from distval.reports.baseline import read_report, scenario_entries
from distval.reports.files import NotARegularFile, UnsafePath, write_atomically
from distval.reports.reference import REFERENCE_CASE
from distval.reports.references_suggest import render, suggest
from distval.reports.system_references import Machine, expected_failures, references_case
from distval.results.scenario import RunSummary, ScenarioResult
from distval.results.shape import falls, straggler


def system_name(value: str) -> str:
    """argparse type: a system label as the references file writes it."""
    if not NAME_PATTERN.fullmatch(value):
        raise argparse.ArgumentTypeError(f"expected {NAME_EXPECTED}; got {shown(value)}")
    return value


def add_references_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--references",
        type=cli_values.file_path("a references file"),
        metavar="FILE",
        help="judge the run against this machine's references (a YAML file: per system, per scenario, operation and "
        "size a busbw floor, and the checks expected to fail there): a 'references' testcase per scenario, where a "
        "figure with no reference fails (docs/reports.md, 'References per machine'). Needs --system",
    )
    parser.add_argument(
        "--system", type=system_name, metavar="NAME", help="with --references: the system (machine or SKU label) it ran on"
    )


@dataclass(frozen=True)
class ReferencesOptions:
    references: References | None
    system: str


def references_options(args: argparse.Namespace) -> ReferencesOptions:
    """The file read and the system checked, before anything runs: BadInput (a ConfigError for the file) otherwise."""
    if args.references is None:
        if args.system is not None:
            raise BadInput("--system names the machine for --references: give --references FILE too")
        return ReferencesOptions(None, "")
    if args.system is None:
        raise BadInput("--references FILE judges the run on one system's references: give --system NAME too")
    references = load_references(args.references)
    problem = system_problem(references, args.system)
    if problem is not None:
        raise BadInput(problem)
    return ReferencesOptions(references, args.system)


def with_references(summary: RunSummary, options: ReferencesOptions) -> RunSummary:
    """The summary with each scenario's expected failures said and its ``references`` testcase added."""
    if options.references is None or not summary.scenarios:
        return summary
    by_scenario = options.references.systems[options.system]
    scenarios = []
    for result in summary.scenarios:
        ours = by_scenario.get(result.plan.scenario.name)
        cases, problems, notes = expected_failures(result.cases, ours, options.system)
        judged = dataclasses.replace(result, cases=cases)
        (entry,) = scenario_entries(summary, [judged])
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


def add_references_command(commands: Any) -> None:
    references = commands.add_parser("references", help="write a references file from good runs (for run --references)")
    actions = references.add_subparsers(dest="references_action", metavar="ACTION", required=True)
    suggest_parser = actions.add_parser(
        "suggest",
        help="a references file from the JSON reports of good runs: each figure's median and a tolerance covering "
        "their spread, which the next good run passes",
    )
    suggest_parser.add_argument(
        "reports", nargs="+", type=cli_values.file_path("a JSON report"), metavar="REPORT", help="JSON reports of good runs"
    )
    suggest_parser.add_argument("--system", type=system_name, required=True, metavar="NAME", help="the machine's label")
    suggest_parser.add_argument(
        "--output",
        type=cli_values.file_path("the references file to write"),
        metavar="FILE",
        help="where to write it (default: standard output)",
    )
    suggest_parser.set_defaults(handler=command_references_suggest)


def command_references_suggest(args: argparse.Namespace) -> int:
    reports = [(path, read_report(path)) for path in args.reports]
    text = render(suggest(reports), args.system, args.reports)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        write_atomically(args.output, text)
    except (NotARegularFile, UnsafePath) as exc:
        raise BadInput(f"cannot write the references file {args.output}: {exc}") from None
    except OSError as exc:
        raise BadInput(f"cannot write the references file {args.output}: {exc.strerror or exc}") from None
    return 0
