"""The command that reproduces a scenario runs it again on the same target: parsed back, it chooses the kind that ran
it with the options it was given (docker: --image; --local --python; --target slurm with its own options), from the
kind's declaration (distval/targets/kind.py ``chosen_again``), never from a check of the target's name in the reports.
tests/targets/slurm/test_slurm_target.py keeps a Slurm job's results to the same."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

import pytest

from distval.config import load_config
from distval.plan.identity import with_hashes
from distval.results.scenario import unselected_result
from distval.targets.kind import DURATION, TargetOption, TargetOptions
from distval.targets.registry import dry_run_target
from distval.targets.slurm.kind import SLURM_KIND
from tests.paths import ROOT
from tests.reproduce_helpers import CONFIG, reproduced, run_options, same_target

IMAGE = "distval-fixtures/torch:2.6-debian"
SCENARIO = "cross-container-2ranks"


def _no_engine(_run_id: str) -> Any:
    raise AssertionError("planning asks no Engine")


def _planned(argv: list[str]) -> tuple[TargetOptions, list[str]]:
    """The options ``argv`` gives ``distval run``, and the reproduce command of the scenario its target plans."""
    options = run_options(argv)
    config = load_config(str(ROOT / CONFIG))
    scenario = next(s for s in config.scenarios if s.name == SCENARIO)
    plan = with_hashes(dry_run_target(options, config, _no_engine).plan_scenario(scenario, "r1", SCENARIO))
    return options, reproduced(unselected_result(plan, "not run here"))


def test_a_docker_scenario_is_reproduced_as_before() -> None:
    given, again = _planned(["--image", IMAGE])
    assert again == ["distval", "run", CONFIG, "--image", IMAGE, "--filter", SCENARIO]
    same_target(given, again, SCENARIO)


def test_a_local_scenario_is_reproduced_with_local_and_its_python() -> None:
    given, again = _planned(["--local", "--python", sys.executable])
    assert again[3:5] == ["--local", "--python"] and Path(again[5]).name.startswith("python")
    same_target(given, [*again[:5], sys.executable, *again[6:]], SCENARIO)  # the plan names the Python it resolved


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["--integration", "apptainer"], ["--integration", "apptainer"]),
        (
            ["--integration", "pyxis", "--partition", "gpu", "--slurm-dir", "/shared/jobs"],
            ["--slurm-dir", "/shared/jobs", "--integration", "pyxis", "--partition", "gpu"],
        ),
    ],
)
def test_a_slurm_scenario_is_reproduced_on_slurm_with_its_options(argv: list[str], shown: list[str]) -> None:
    given, again = _planned(["--target", "slurm", *argv, "--image", IMAGE])
    assert again == ["distval", "run", CONFIG, "--target", "slurm", *shown, "--image", IMAGE, "--filter", SCENARIO]
    same_target(given, again, SCENARIO)


def test_an_option_that_cannot_be_repeated_as_given_is_refused_not_dropped() -> None:
    """A duration is parsed to seconds and a repeated option to a list: a kind with one says its own options."""
    kind = dataclasses.replace(
        SLURM_KIND, options=(*SLURM_KIND.options, TargetOption("--grace", "grace", "a duration", kind=DURATION))
    )
    with pytest.raises(ValueError, match="--grace cannot be repeated as given"):
        kind.chosen_again(run_options([]))
