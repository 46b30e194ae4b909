"""What each kind of target declares for the run stage and the command line (TorchX's schedulers declare their
``runopts`` the same way): its own options, when the command line chooses it, what it refuses beside it, the
target it makes to run and the one it makes for a dry run (``distval plan``: no side effects), its export and
collect where it has them (``distval export NAME``, ``distval collect NAME``: what runs by hand on it), its
``distval doctor`` where it has one (its options, its checks and what yields their lines), and how the reports name
it. Which of run, export and collect a kind has is its declaration's ways (capabilities.py): a kind
whose callables disagree with them is refused when it is made. distval/targets/registry.py lists
every kind; nothing outside targets/ names one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distval.config import Config
from distval.doctor.checks import DoctorCheck, Line
from distval.engine_protocol import EngineAPI
from distval.plan.model import ScenarioPlan
from distval.results.scenario import RunSummary
from distval.targets.base import Target
from distval.targets.capabilities import COLLECT, EXPORT, RUN, TargetDeclaration

if TYPE_CHECKING:
    from distval.config.engine_hosts import HostSpec
    from distval.targets.docker.engine import Engine as Engine  # the Docker Engine, named for the command line's types

Warn = Callable[[str], None]
EngineFor = Callable[[str], "Engine"]
EngineOn = Callable[[str, "HostSpec | None"], "Engine"]  # the Engine of DOCKER_HOST (None) or of one of --hosts
# ``distval doctor``'s Engines, as the command line reaches them: the run id and DOCKER_HOST's (None) or one of --hosts.
DoctorEngine = Callable[[str, "HostSpec | None"], EngineAPI]
# One Engine's ``distval cleanup``: the Engine, --run-id, --all, --older-than, --dry-run and where its lines go ->
# its outcome as data and its exit code.
CleanEngine = Callable[["Engine", str | None, bool, float | None, bool, Warn], tuple[dict[str, Any], int]]

# What an option's value is, for the command line to parse it: a flag, free text, a path (its ``names`` says of
# what), one of ``choices``, or a duration (30m, 2h: in seconds).
FLAG, TEXT, PATH, CHOICE, DURATION = "flag", "text", "path", "choice", "duration"


@dataclass(frozen=True)
class TargetOption:
    """One option of ``distval run`` and ``distval plan`` that a target owns."""

    flag: str  # "--python"
    dest: str  # "python": its key in ``TargetOptions.values``
    help: str
    kind: str = TEXT
    default: Any = None
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    names: str = ""  # PATH: what the path names ("the directory of the jobs"), as a bad one is said
    # What the option is, said when it is given without its target ("names the local Python of --local": the
    # refusal reads "--python names ...: it needs --local"); empty: it is not refused there (a default-valued one).
    needs_its_target: str = ""
    # TEXT: why a value is not one (None when it is), said as the option's usage error; None: any text is one.
    problem: Callable[[str], str | None] | None = None
    # TEXT: the value made from the text; ValueError with the one line said as the option's usage error.
    parse: Callable[[str], Any] | None = None
    repeat: bool = False  # may be given again: its values in order ([] when never given)
    nargs: str | None = None  # a positional (``flag`` without dashes): how many ("*", "+")


@dataclass(frozen=True)
class TargetOptions:
    """What the command line asked of the target: the value of every target option by its ``dest`` (the options
    the kinds declare, and the image and Engine options every command line of a run has)."""

    run_id: str
    values: Mapping[str, Any]
    keep_on_failure: bool = False
    patterns: tuple[str, ...] | None = None  # --filter's: the Engines of the selected scenarios are the run's

    def get(self, dest: str) -> Any:
        return self.values.get(dest)

    @property
    def image(self) -> str | None:
        image: str | None = self.values.get("image")
        return image


def _nothing_beside() -> list[dict[str, Any]]:
    return []


def _no_lines(_plan: ScenarioPlan) -> list[str]:
    return []


def _no_data(_plan: ScenarioPlan) -> dict[str, object]:
    return {}


@dataclass(frozen=True)
class PlanShown:
    """What ``distval plan`` shows of a kind beyond its plans' steps: distval's own containers beside the ranks (where
    the target has distval's reaper), and a scenario's own lines and JSON (across hosts: the image copied, host
    networking)."""

    beside: Callable[[], list[dict[str, Any]]] = _nothing_beside
    scenario_lines: Callable[[ScenarioPlan], list[str]] = _no_lines
    scenario_data: Callable[[ScenarioPlan], dict[str, object]] = _no_data


@dataclass(frozen=True)
class NodeEngines:
    """``distval nodes up|down``: separate Docker Engines in containers here, for runs across several hosts (test
    infrastructure). ``start``: how many, the indexes that serve without TLS, where progress goes -> what was started,
    in words; ``stop``: the node set (None: every one) -> the containers and networks removed."""

    start: Callable[[int, Sequence[int], Warn], str]
    stop: Callable[[str | None], tuple[int, int]]


@dataclass(frozen=True)
class TargetKind:
    """A kind of target as the run stage and the command line see it."""

    declaration: TargetDeclaration
    chosen: Callable[[TargetOptions], bool]  # whether the command line chooses this kind (the first that does wins)
    chosen_with: str  # the option that chooses it, as a refusal names it ("--local", "--target slurm")
    # The target that runs, and the one that only plans (no side effects); None where distval runs nothing itself
    # (its declaration's ways lack RUN: choosing it is refused, saying its other ways).
    make: Callable[[TargetOptions, Config, EngineFor, Warn], Target] | None = None
    dry_run: Callable[[TargetOptions, Config, EngineFor], Target] | None = None
    options: tuple[TargetOption, ...] = ()
    # (dests, refusal): refused when every one of those options is given, in this order: two options that exclude
    # each other (what an option names that the target lacks is refused from its declaration: NAMING_OPTIONS).
    refuses: tuple[tuple[tuple[str, ...], str], ...] = ()
    target_choice: str | None = None  # its value of --target, with how --target's help says it; None: not chosen so
    target_help: str = ""
    report_mode: str = ""  # the reports' ``mode`` property (default: the declaration's name)
    runs_images: bool = True  # False: no image runs (no sample image for want of one)
    summary_note: str | None = None  # said after the terminal summary of a run that ran scenarios
    plan_shown: PlanShown = PlanShown()  # what ``distval plan`` shows of it beyond the steps
    clean_engine: CleanEngine | None = None  # ``distval cleanup`` of one Engine, where its runs leave resources there
    engine_class: Callable[[], type[Engine]] | None = None  # the Docker Engine's client, where it runs on Engines
    node_engines: NodeEngines | None = None  # ``distval nodes``, where it runs across node Engines
    export: ExportCommand | None = None  # ``distval export NAME``; None: not among its declaration's ways
    collect: CollectCommand | None = None  # ``distval collect NAME``; None: not among its declaration's ways
    doctor: DoctorCommand | None = None  # ``distval doctor`` when the doctor's options choose it; None: it has none

    def __post_init__(self) -> None:
        # One truth: what the declaration says the target gives (docs/targets.md, the refusals) is what it has.
        has = {RUN: self.make is not None and self.dry_run is not None, EXPORT: self.export is not None}
        has[COLLECT] = self.collect is not None
        wrong = [way.name for way, given in has.items() if given != self.declaration.serves(way)]
        if wrong:
            raise ValueError(f"target {self.name}: its declaration and its kind disagree on {wrong}")

    @property
    def name(self) -> str:
        return self.declaration.name

    @property
    def mode(self) -> str:
        return self.report_mode or self.declaration.name

    def chosen_again(self, options: TargetOptions) -> tuple[str, ...]:
        """The options that choose this kind again with the settings ``options`` gave it, for the command that
        reproduces a scenario: ``--target NAME`` where --target names it, then each of its own options given a value
        other than its default, as given (a flag alone). For flags and options of text, a path or a choice; a kind
        with an option of another kind (a duration, a parsed or repeated value) says its own."""
        args = ["--target", self.target_choice] if self.target_choice is not None else []
        for option in self.options:
            if option.kind == DURATION or option.parse is not None or option.repeat or option.nargs is not None:
                raise ValueError(f"target {self.name}: {option.flag} cannot be repeated as given; say it yourself")
            value = options.get(option.dest)
            if value is None or value == option.default:
                continue
            args += [option.flag] if option.kind == FLAG else [option.flag, str(value)]
        return tuple(args)


@dataclass(frozen=True)
class Exported:
    """One scenario of an export: the line that says what was written for it, or why it has no form there."""

    scenario: str
    line: str | None = None
    refused: str | None = None


@dataclass(frozen=True)
class ExportCommand:
    """``distval export NAME``: a config's scenarios written out for the target to run by hand. The command line
    gives every export the config, --image, the output directory, --run-id and the scenario and check selection."""

    help: str
    # The options, the chosen scenarios (asked for once the options are read: a bad option is said first) and the
    # output directory -> each scenario, as it is written.
    write: Callable[[TargetOptions, Callable[[], Config], Path], Iterator[Exported]]
    form: str  # "a Kubernetes form": "no scenario of CONFIG has ..." when none was written
    next_step: Callable[[str, Path], str]  # the run id and the directory -> the line that says what to do next
    image_help: str
    out_default: str
    out_names: str  # what the output directory is, as a bad path is said
    out_help: str
    run_id_help: str
    options: tuple[TargetOption, ...] = ()


@dataclass(frozen=True)
class CollectCommand:
    """``distval collect NAME``: what ran by hand on the target -> the run's summary (the command line writes its
    reports, with --fail-on-skip, whose value ``summarize`` reads as ``fail_on_skip``)."""

    help: str
    summarize: Callable[[TargetOptions], RunSummary]
    exit_codes: tuple[int, ...]  # beside 0, 2 and 4, which every command can return
    options: tuple[TargetOption, ...] = ()


def _no_image(_options: TargetOptions) -> str | None:
    return None


@dataclass(frozen=True)
class DoctorCommand:
    """``distval doctor`` of a kind, chosen as the kind is (its ``chosen``, from the doctor's options: the first kind
    with a doctor that the options choose). The command line gives every doctor --image, the --hosts options and
    --format, and the kinds' own options; a kind's checks are its own, the parts they share distval/doctor/'s."""

    runs: str  # where its checks run, as docs/doctor.md's table says it ("in containers")
    heading: Callable[[TargetOptions], str]  # what the output's first line asks about ("can distval run here, ...?")
    checks: tuple[DoctorCheck, ...]  # in the order of its lines
    # The options and the Engines -> each check's line, in ``checks``' order (a check of each Engine once per Engine).
    lines: Callable[[TargetOptions, DoctorEngine], Iterable[Line]]
    image: Callable[[TargetOptions], str | None] = _no_image  # the image it looks at (the JSON's); None: none
    options: tuple[TargetOption, ...] = ()
    # (dests, refusal): refused when it is chosen and every one of those options is given, in this order.
    refuses: tuple[tuple[tuple[str, ...], str], ...] = ()
    # (dest, refusal): its option refused when given and another kind's doctor is chosen.
    needs_it: tuple[tuple[str, str], ...] = ()
