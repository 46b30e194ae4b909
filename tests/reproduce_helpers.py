"""What the tests of the reproduce command share (tests/targets/test_reproduce.py, the slurm target's): the options a
``distval run`` command line gives the target, and whether a reproduce command chooses the same target again."""

from __future__ import annotations

import shlex

from distval.cli.main import build_parser
from distval.cli.target_options import target_options
from distval.reports.common import reproduce_command
from distval.results.scenario import RunSummary, ScenarioResult
from distval.targets.kind import TargetOptions
from distval.targets.registry import chosen_kind

CONFIG = "configs/default.yaml"


def run_options(argv: list[str]) -> TargetOptions:
    """What ``distval run CONFIG ARGV`` asks of the target."""
    return target_options(build_parser().parse_args(["run", CONFIG, *argv]))


def reproduced(result: ScenarioResult) -> list[str]:
    """The reproduce command of a run of ``result`` alone, as its words."""
    return shlex.split(reproduce_command(RunSummary("r1", (result,), config_path=CONFIG), result))


def same_target(given: TargetOptions, again: list[str], scenario: str) -> None:
    """``again`` (a reproduce command of ``scenario``) chooses the kind ``given`` chose, each of its options as given."""
    assert again[:3] == ["distval", "run", CONFIG] and again[again.index("--filter") + 1] == scenario
    reparsed = target_options(build_parser().parse_args(again[1:]))
    kind = chosen_kind(given)
    assert chosen_kind(reparsed) is kind
    assert {o.dest: reparsed.get(o.dest) for o in kind.options} == {o.dest: given.get(o.dest) for o in kind.options}
