"""The registry of targets (distval/targets/registry.py): a new kind of target is a folder of its own plus one line
in the table. A toy kind, added here as that one line, gets its options on ``distval run`` and ``distval plan``,
a name for --target, a dry run that plans, and refusals: of its options without it, and of what its declaration
lacks; and, declaring a doctor, ``distval doctor``'s options, its checks' lines when they choose it, its refusals
and its rows in docs/doctor.md's table. A toy cluster, which distval runs nothing on (as Kubernetes), gets
``distval export`` and ``distval collect`` commands with its options, and ``--target`` refused with its declared
reason. Nothing outside targets/ imports a kind's folder or compares a value with a kind's name."""

from __future__ import annotations

import ast
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from distval.cli.doctor import doctor_reference
from distval.cli.main import build_parser, main
from distval.config import Config, Scenario
from distval.doctor.checks import DoctorCheck, Finding, Line
from distval.errors import InternalError
from distval.plan.model import RunPlan, ScenarioPlan
from distval.results.outcome import ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult
from distval.run.events import RunEvents
from distval.targets import registry
from distval.targets.base import Log, Target
from distval.targets.capabilities import COLLECT, EXPORT, Lacking, TargetDeclaration
from distval.targets.docker import plan as one_engine
from distval.targets.kind import (
    CHOICE,
    FLAG,
    PATH,
    CollectCommand,
    DoctorCommand,
    DoctorEngine,
    EngineFor,
    ExportCommand,
    Exported,
    TargetKind,
    TargetOption,
    TargetOptions,
    Warn,
)
from tests.paths import ROOT

TOY = TargetDeclaration(
    name="toy",
    chosen_with="`--target toy`",
    runs="nothing: it only plans, for this test",
    lacks={
        "reference": Lacking("a toy pairs nothing"),
        "reaper": Lacking("a toy starts nothing"),
        "docker_engines": Lacking("plans on paper"),
    },
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


# The toy's doctor: a check of its own, once, and one of each of its wheels (as the docker kind's checks of each
# Engine), chosen by its flag (as --local chooses the local kind for a run and its doctor alike).
@dataclass(frozen=True, kw_only=True)
class ToyCheck(DoctorCheck):
    function: Callable[[str], Finding]


TOY_CHECKS = (
    ToyCheck(name="shelf", what="the toy is on its shelf", function=lambda shelf: Finding("ok", f"on the {shelf} shelf")),
    ToyCheck(
        name="wheel",
        per="wheel",
        what="each wheel turns",
        function=lambda wheel: Finding("warn", f"{wheel} squeaks", "oil it") if wheel == "back" else Finding("ok", wheel),
    ),
)


def _toy_lines(options: TargetOptions, _connect: DoctorEngine) -> Iterator[Line]:
    shelf, wheels = TOY_CHECKS
    yield Line(shelf.name, "", shelf.function(options.get("toy_shelf") or "bottom"))
    for wheel in ("front", "back"):
        yield Line(wheels.name, wheel, wheels.function(wheel))


TOY_DOCTOR = DoctorCommand(
    runs="--toy",
    heading=lambda options: f"on the toy's {options.get('toy_shelf') or 'bottom'} shelf",
    checks=TOY_CHECKS,
    lines=_toy_lines,
    options=(
        TargetOption("--toy", "toy", "check the toy instead", kind=FLAG, default=False),
        TargetOption("--toy-shelf", "toy_shelf", "with --toy: its shelf", metavar="SHELF"),
    ),
    refuses=((("hosts",), "doctor --toy checks a toy: --hosts goes without --toy"),),
    needs_it=(("toy_shelf", "doctor --toy-shelf goes with --toy"),),
)


TOY_KIND = TargetKind(
    declaration=TOY,
    chosen=lambda options: options.get("target") == "toy" or bool(options.get("toy")),
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
    doctor=TOY_DOCTOR,
)


# A cluster distval runs nothing on, as Kubernetes: its scenarios are exported for you to run, and what ran is
# collected into the reports.
CLUSTER = TargetDeclaration(
    name="toycluster",
    chosen_with="`distval export toycluster`",
    runs="nothing: its scenarios are written out, one line each, for this test",
    ways=(EXPORT, COLLECT),
)


def _export(options: TargetOptions, scenarios: Callable[[], Config], out: Path) -> Iterator[Exported]:
    out.mkdir(parents=True, exist_ok=True)
    for scenario in scenarios().scenarios:
        if scenario.faults:
            yield Exported(scenario.name, refused="a toy cluster injects no fault")
            continue
        path = out / f"{scenario.name}.job"
        path.write_text(f"{options.image} {options.get('queue')} {options.run_id}\n", encoding="utf-8")
        yield Exported(scenario.name, line=f"{path}: {scenario.name}")


def _collect(options: TargetOptions) -> RunSummary:
    jobs = options.get("jobs")
    return RunSummary(f"toy-{len(jobs)}", (), ("bad_input", f"{len(jobs)} job(s), none ran"), 2, config_path=None)


CLUSTER_KIND = TargetKind(
    declaration=CLUSTER,
    chosen=lambda options: options.get("target") == "toycluster",
    chosen_with="--target toycluster",
    target_choice="toycluster",
    target_help="toycluster: refused (export, then collect)",
    export=ExportCommand(
        help="a job file per scenario",
        write=_export,
        form="a toy cluster's form",
        next_step=lambda run_id, out: f"run id {run_id}: submit {out}/*.job",
        image_help="the image",
        out_default="toy-jobs",
        out_names="the directory of the jobs",
        out_help="where the job files go",
        run_id_help="in the job files",
        options=(TargetOption("--queue", "queue", "the queue", default="default"),),
    ),
    collect=CollectCommand(
        help="the jobs' files -> the reports",
        summarize=_collect,
        exit_codes=(),
        options=(TargetOption("jobs", "jobs", "the job files", nargs="+", metavar="JOB"),),
    ),
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one registry line a new target adds (two toys: one that runs, one that exports)."""
    monkeypatch.setattr(registry, "KINDS", (TOY_KIND, CLUSTER_KIND, *registry.KINDS))
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
    # What the run's options name that it lacks: refused from its declaration, no refusal written for it.
    assert main(["plan", "--target", "toy", "--hosts", "unix:///run/a.sock"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == "distval: --hosts names Docker Engines, --target toy plans on paper: give one, not both"
    )
    assert main(["plan", "--target", "toy", "--image", "img:1", "--filter", "in-container-3ranks"]) == 0


def test_a_kind_that_exports_gets_export_and_collect_and_its_run_is_refused(
    toy: None, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "jobs"
    config = str(ROOT / "configs" / "faults.yaml")
    argv = ["export", "toycluster", config, "--image", "img:1", "--queue", "fast", "--run-id", "r1", "-o", str(out)]
    assert main([*argv, "--filter", "kill-2x1"]) == 2
    captured = capsys.readouterr()
    assert "distval: not exported: kill-2x1: a toy cluster injects no fault" in captured.err
    assert f"no scenario of {config} has a toy cluster's form" in captured.err
    config = str(ROOT / "configs" / "default.yaml")
    argv[2] = config
    assert main([*argv, "--filter", "in-container-3ranks"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{out}/in-container-3ranks.job: in-container-3ranks",
        f"run id r1: submit {out}/*.job",
    ]
    assert (out / "in-container-3ranks.job").read_text(encoding="utf-8") == "img:1 fast r1\n"
    assert main(["export", "toycluster", config, "--image", "img:1", "--queue"]) == 2  # its option as declared
    capsys.readouterr()
    report = tmp_path / "report.json"
    assert main(["collect", "toycluster", "a.job", "b.job", "--json", str(report)]) == 2
    assert json.loads(report.read_text(encoding="utf-8"))["run_id"] == "toy-2"
    assert "2 job(s), none ran" in capsys.readouterr().out
    for command in (["plan", "--target", "toycluster"], ["run", "--target", "toycluster", "--image", "img:1", "-q"]):
        assert main(command) == 2
        assert (
            "--target toycluster asks for a run distval starts, follows and stops itself (distval run); "
            "the toycluster target cannot give it: use distval export toycluster (its scenarios written out, to be run "
            "by hand), then distval collect toycluster (what ran by hand judged into the reports)"
        ) in capsys.readouterr().err


def test_without_the_line_a_kind_has_no_export(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "toycluster", "c.yaml", "--image", "img:1"]) == 2
    assert "invalid choice: 'toycluster'" in capsys.readouterr().err


def test_a_kind_that_declares_a_doctor_gets_its_options_checks_and_refusals(
    toy: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["doctor", "--toy", "--toy-shelf", "top", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["mode"], data["image"], data["exit_code"]) == ("toy", None, 0)
    assert [(c["check"], c["engine"], c["status"], c["todo"]) for c in data["checks"]] == [
        ("shelf", None, "ok", None),
        ("wheel", "front", "ok", None),
        ("wheel", "back", "warn", "oil it"),
    ]
    assert main(["doctor", "--toy"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "distval doctor: can distval run here, on the toy's bottom shelf?",
        "ok    shelf  on the bottom shelf",
        "ok    wheel  [front] front",
        "warn  wheel  [back] back squeaks -> oil it",
        "2 ok, 1 warn, 0 fail, 0 skip: nothing stops a run (exit 0)",
    ]
    # Its refusals, as it declares them: its option without it, what it refuses beside it.
    assert main(["doctor", "--toy-shelf", "top"]) == 2
    assert capsys.readouterr().err.strip() == "distval: doctor --toy-shelf goes with --toy"
    assert main(["doctor", "--toy", "--hosts", "tcp://10.0.0.1:2375"]) == 2
    assert capsys.readouterr().err.strip() == "distval: doctor --toy checks a toy: --hosts goes without --toy"
    # The other kinds' refusals still hold beside it.
    assert main(["doctor", "--toy", "--python", "/usr/bin/python3"]) == 2
    assert "doctor --python goes with --local" in capsys.readouterr().err
    # docs/doctor.md's table has its rows.
    rows = doctor_reference().splitlines()
    assert "| `shelf` | --toy | the toy is on its shelf |" in rows
    assert "| `wheel` | --toy, per wheel | each wheel turns |" in rows


def test_without_the_line_a_kind_has_no_doctor(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["doctor", "--toy"]) == 2
    assert "unrecognized arguments: --toy" in capsys.readouterr().err
    assert "--toy" not in doctor_reference()


def test_a_kind_and_its_declaration_agree_on_what_it_gives() -> None:
    """Which of run, export and collect a kind has is its declaration's: a kind that disagrees is never made."""
    with pytest.raises(ValueError, match="disagree on \\['export'\\]"):
        TargetKind(
            declaration=TOY, chosen=lambda _o: False, chosen_with="", make=_make, dry_run=_dry_run, export=CLUSTER_KIND.export
        )
    with pytest.raises(ValueError, match="disagree on \\['run'\\]"):
        TargetKind(declaration=TOY, chosen=lambda _o: False, chosen_with="")
    for kind in registry.kinds():
        assert kind.declaration.name == kind.name  # made: the registry's kinds agree


def _distval_imports(source: str) -> list[str]:
    tree = ast.parse(source)
    found = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.level == 0]
    found += [alias.name for n in ast.walk(tree) if isinstance(n, ast.Import) for alias in n.names]
    return found


def _concrete(imported: list[str], concrete: tuple[str, ...]) -> set[str]:
    """Those of ``imported`` that are a kind's folder or in it."""
    return {m for m in imported if m in concrete or m.startswith(tuple(c + "." for c in concrete))}


def test_no_module_outside_targets_imports_a_kinds_folder() -> None:
    """Every module of distval outside targets/ reaches a target through the registry (run, plan, export, collect,
    doctor, cleanup, nodes, the Engine's class): no import of a kind's folder (docker, engines, local, slurm,
    kubernetes). The parts every kind's doctor shares (distval/doctor/) import no target at all: the kinds import
    them."""
    kinds = {p.name for p in (ROOT / "distval/targets").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert {"docker", "engines", "local", "slurm", "kubernetes"} <= kinds
    concrete = tuple(f"distval.targets.{kind}" for kind in sorted(kinds))
    found: dict[str, set[str]] = {}
    scanned: dict[str, list[str]] = {}
    for path in sorted((ROOT / "distval").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("distval/targets/"):
            continue
        scanned[relative] = _distval_imports(path.read_text(encoding="utf-8"))
        named = _concrete(scanned[relative], concrete)
        if named:
            found[relative] = named
    assert found == {}
    doctor = {m for path, imported in scanned.items() if path.startswith("distval/doctor/") for m in imported}
    assert not {m for m in doctor if m.startswith("distval.targets")}, doctor
    # The scan can fail: it reads what a module imports, and a kind's folder among it is found.
    assert "distval.targets.registry" in scanned["distval/cli/doctor.py"]
    snippet = (
        "import distval.targets.local.runtime\nfrom distval.targets.docker import doctor\nfrom distval.targets import kind\n"
    )
    assert _concrete(_distval_imports(snippet), concrete) == {"distval.targets.local.runtime", "distval.targets.docker"}


def _names_compared(tree: ast.AST, names: set[str]) -> list[int]:
    """The lines where a comparison has a kind's name on one side (``x == "slurm"``, ``mode in ("docker",)``)."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        sides = [node.left, *node.comparators]
        constants = [c for side in sides for c in ([side] if isinstance(side, ast.Constant) else getattr(side, "elts", []))]
        if any(isinstance(c, ast.Constant) and c.value in names for c in constants):
            lines.append(node.lineno)
    return lines


def test_no_module_outside_targets_checks_a_targets_name() -> None:
    names = {kind.name for kind in registry.kinds()} | {kind.mode for kind in registry.kinds()} | {"engines"}
    assert {"local", "host", "slurm", "kubernetes", "docker"} <= names
    found = {}
    for path in sorted((ROOT / "distval").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if relative.startswith("distval/targets/"):
            continue
        lines = _names_compared(ast.parse(path.read_text(encoding="utf-8")), names)
        if lines:
            found[relative] = lines
    assert found == {}
    # The check can fail: a comparison with a kind's name is found.
    assert _names_compared(ast.parse('if plan.mode == "host":\n    pass\n'), names) == [1]
    assert _names_compared(ast.parse('ok = kind in ("docker", "x")\n'), names) == [1]
