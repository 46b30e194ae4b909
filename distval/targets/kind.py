"""What each kind of target declares for the run stage and the command line (TorchX's schedulers declare their
``runopts`` the same way): its own options, when the command line chooses it, what it refuses beside it, the
target it makes to run and the one it makes for a dry run (``distval plan``: no side effects), and how the
reports name it. distval/targets/registry.py lists every kind; nothing outside targets/ names one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from distval.config import Config
from distval.targets.base import Target
from distval.targets.capabilities import TargetDeclaration

if TYPE_CHECKING:
    from distval.targets.docker.engine import Engine

Warn = Callable[[str], None]
EngineFor = Callable[[str], "Engine"]

# What an option's value is, for the command line to parse it: a flag, free text, a path (its ``names`` says of
# what), or one of ``choices``.
FLAG, TEXT, PATH, CHOICE = "flag", "text", "path", "choice"


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


@dataclass(frozen=True)
class TargetKind:
    """A kind of target as the run stage and the command line see it."""

    declaration: TargetDeclaration
    chosen: Callable[[TargetOptions], bool]  # whether the command line chooses this kind (the first that does wins)
    make: Callable[[TargetOptions, Config, EngineFor, Warn], Target]  # the target that runs
    dry_run: Callable[[TargetOptions, Config, EngineFor], Target]  # the one that only plans: no side effects
    chosen_with: str  # the option that chooses it, as a refusal names it ("--local", "--target slurm")
    options: tuple[TargetOption, ...] = ()
    # (dests, refusal): refused when every one of those options is given, in this order (options of other kinds
    # this one cannot take, or two of its own that exclude each other).
    refuses: tuple[tuple[tuple[str, ...], str], ...] = ()
    target_choice: str | None = None  # its value of --target, with how --target's help says it; None: not chosen so
    target_help: str = ""
    report_mode: str = ""  # the reports' ``mode`` property (default: the declaration's name)
    runs_images: bool = True  # False: no image runs (no sample image for want of one)
    summary_note: str | None = None  # said after the terminal summary of a run that ran scenarios

    @property
    def name(self) -> str:
        return self.declaration.name

    @property
    def mode(self) -> str:
        return self.report_mode or self.declaration.name
