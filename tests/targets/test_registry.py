"""The registry of targets (distval/targets/registry.py): a new kind of target is a folder of its own plus one line
in the table. A toy kind, added here as that one line, gets its options on ``distval run`` and ``distval plan``,
a name for --target, a dry run that plans, and refusals: of its options without it, and of what its declaration
lacks. Nothing outside targets/ names a kind."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from distval.cli.main import build_parser, main
from distval.config import Config, Scenario
from distval.errors import InternalError
from distval.plan.model import RunPlan, ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import ScenarioResult
from distval.run.events import RunEvents
from distval.targets import registry
from distval.targets.base import Log, Target
from distval.targets.capabilities import Lacking, TargetDeclaration
from distval.targets.docker import plan as one_engine
from distval.targets.kind import CHOICE, PATH, EngineFor, TargetKind, TargetOption, TargetOptions, Warn
from tests.paths import ROOT

TOY = TargetDeclaration(
    name="toy",
    chosen_with="`--target toy`",
    runs="nothing: it only plans, for this test",
    lacks={"reference": Lacking("a toy pairs nothing"), "reaper": Lacking("a toy starts nothing")},
)
PLANNED: list[TargetOptions] = []


class ToyTarget:
    declaration = TOY

    def __init__(self, options: TargetOptions) -> None:
        self.flavour = options.get("toy_flavour")

    def plan_scenario(self, scenario: Scenario, run_id: str, slug: str, image: str | None = None) -> ScenarioPlan:
        return one_engine.plan_scenario(scenario, run_id, image or f"toy:{self.flavour}", slug)

    def open(self, plan: RunPlan, log: Log) -> None:
        raise InternalError(RuntimeError("a toy runs nothing"))

    def execute(self, plan: ScenarioPlan, events: RunEvents, stop: threading.Event) -> ScenarioOutcome:
        raise InternalError(RuntimeError("a toy runs nothing"))

    execute_again = execute

    def settle(self, result: ScenarioResult) -> None:
        """Nothing to keep."""

    def interrupted(self) -> None:
        """Nothing to stop."""

    def close(self) -> None:
        """Nothing to remove."""

    def engine_version(self) -> str | None:
        return None

    def closing_lines(self) -> list[str]:
        return []


def _make(options: TargetOptions, _config: Config, _engine_for: EngineFor, _warn: Warn) -> Target:
    return ToyTarget(options)


def _dry_run(options: TargetOptions, _config: Config, _engine_for: EngineFor) -> Target:
    PLANNED.append(options)
    return ToyTarget(options)


TOY_KIND = TargetKind(
    declaration=TOY,
    chosen=lambda options: options.get("target") == "toy",
    make=_make,
    dry_run=_dry_run,
    chosen_with="--target toy",
    options=(
        TargetOption(
            "--toy-flavour", "toy_flavour", "the toy's flavour", kind=CHOICE, default="plain", choices=("plain", "spicy")
        ),
        TargetOption(
            "--toy-dir", "toy_dir", "the toy's directory", kind=PATH, names="the toy's directory", needs_its_target="is the toy's"
        ),
    ),
    target_choice="toy",
    target_help="toy: plans only",
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registry line a new target adds."""
    monkeypatch.setattr(registry, "KINDS", (TOY_KIND, *registry.KINDS))
    PLANNED.clear()


def test_a_new_kind_gets_its_options_and_a_name_for_target(toy: None) -> None:
    args = build_parser().parse_args(["run", "--target", "toy", "--toy-flavour", "spicy"])
    assert (args.target, args.toy_flavour) == ("toy", "spicy")
    plan = build_parser().parse_args(["plan", "--target", "toy"])
    assert (plan.target, plan.toy_flavour) == ("toy", "plain")


def test_without_the_line_the_kind_is_unknown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--target", "toy"]) == 2
    assert "invalid choice: 'toy'" in capsys.readouterr().err


def test_plan_is_the_new_kinds_dry_run(toy: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--target", "toy", "--toy-flavour", "spicy", "--filter", "in-container-3ranks"]) == 0
    (options,) = PLANNED
    assert options.get("toy_flavour") == "spicy"
    out = capsys.readouterr().out
    assert "image: toy:spicy" in out
    assert "beside the ranks" not in out  # it lacks a reaper: distval starts no helper beside its ranks


def test_its_options_need_it_and_its_declaration_refuses_what_it_lacks(
    toy: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(["plan", "--toy-dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == "distval: --toy-dir is the toy's: it needs --target toy"
    assert main(["plan", "--target", "toy", "--reference", "ref:1"]) == 2
    assert "the toy target cannot give it: a toy pairs nothing" in capsys.readouterr().err


def test_the_run_stage_and_the_command_line_name_no_target() -> None:
    """The run stage and the CLI of run and plan reach targets through the registry only: no import of a kind's
    folder (docker, engines, local, slurm, kubernetes)."""
    concrete = ("distval.targets.docker", "distval.targets.engines", "distval.targets.local", "distval.targets.slurm")
    paths = [*sorted((ROOT / "distval/session").glob("*.py")), *(ROOT / f"distval/cli/{n}.py" for n in ("run", "plan"))]
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        modules = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        named = [m for m in modules if m.startswith(concrete + ("distval.targets.kubernetes",))]
        assert named == [], (path, named)
