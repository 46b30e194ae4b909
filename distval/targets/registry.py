"""Every kind of target, in the order the command line's choice is asked (the first kind it chooses runs; the last
is the default). A new target is a folder of its own with its ``TargetKind`` and one line here: the command line
declares its options, ``--target`` offers it, the run stage and ``distval plan`` use it, and ``distval export``,
``distval collect`` and ``distval doctor`` offer it where it has them, all from this table; choosing one that
distval does not run is refused, saying what it offers instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from distval.config import Config
from distval.errors import BadInput
from distval.targets.base import Target
from distval.targets.capabilities import NAMING_OPTIONS
from distval.targets.engines.kind import CONTAINERS_KIND
from distval.targets.kind import (
    CleanEngine,
    CollectCommand,
    DoctorCommand,
    EngineFor,
    ExportCommand,
    NodeEngines,
    TargetKind,
    TargetOption,
    TargetOptions,
    Warn,
)
from distval.targets.kubernetes.kind import KUBERNETES_KIND
from distval.targets.local.kind import LOCAL_KIND
from distval.targets.slurm.kind import SLURM_KIND

if TYPE_CHECKING:
    from distval.targets.kind import Engine

KINDS: tuple[TargetKind, ...] = (LOCAL_KIND, KUBERNETES_KIND, SLURM_KIND, CONTAINERS_KIND)


def kinds() -> Sequence[TargetKind]:
    """The table, read where it is used (a test adds a toy kind)."""
    return KINDS


def default_kind() -> TargetKind:
    return kinds()[-1]


def target_choices() -> tuple[TargetKind, ...]:
    """The kinds --target names, the default first."""
    chosen_by_name = [k for k in kinds() if k.target_choice is not None]
    return tuple(sorted(chosen_by_name, key=lambda k: k is not default_kind()))


def all_options() -> tuple[TargetOption, ...]:
    return tuple(option for kind in kinds() for option in kind.options)


def exporting_kinds() -> tuple[tuple[TargetKind, ExportCommand], ...]:
    """The kinds ``distval export`` offers, each with its export."""
    return tuple((kind, kind.export) for kind in kinds() if kind.export is not None)


def collecting_kinds() -> tuple[tuple[TargetKind, CollectCommand], ...]:
    """The kinds ``distval collect`` offers, each with its collect."""
    return tuple((kind, kind.collect) for kind in kinds() if kind.collect is not None)


def doctor_kinds() -> tuple[tuple[TargetKind, DoctorCommand], ...]:
    """The kinds ``distval doctor`` checks for, each with its doctor, in the table's order (the first chosen is)."""
    return tuple((kind, kind.doctor) for kind in kinds() if kind.doctor is not None)


def doctor_options() -> tuple[TargetOption, ...]:
    return tuple(option for _kind, doctor in doctor_kinds() for option in doctor.options)


def chosen_doctor(options: TargetOptions) -> tuple[TargetKind, DoctorCommand]:
    """The kind whose doctor the options choose (the first with a doctor that they choose) and its doctor; BadInput
    (one line) for an option of another kind's doctor, or one its doctor refuses beside it."""
    kind, doctor = next((kind, doctor) for kind, doctor in doctor_kinds() if kind.chosen(options))
    for other, theirs in doctor_kinds():
        if other is kind:
            continue
        for dest, refusal in theirs.needs_it:
            if options.get(dest):
                raise BadInput(refusal)
    for dests, refusal in doctor.refuses:
        if all(options.get(dest) for dest in dests):
            raise BadInput(refusal)
    return kind, doctor


def engine_class() -> type[Engine]:
    """The Docker Engine's client class (docker-py imported with it, on this call): the first kind's that has one."""
    return next(kind.engine_class for kind in kinds() if kind.engine_class is not None)()


def node_engines() -> NodeEngines:
    """``distval nodes``: the first kind's that runs across node Engines."""
    return next(kind.node_engines for kind in kinds() if kind.node_engines is not None)


def engine_cleanup() -> CleanEngine:
    """``distval cleanup`` of one Engine: the first kind's that leaves resources on Docker Engines."""
    return next(kind.clean_engine for kind in kinds() if kind.clean_engine is not None)


def chosen_kind(options: TargetOptions) -> TargetKind:
    return next(kind for kind in kinds() if kind.chosen(options))


def refuse_options(options: TargetOptions) -> TargetKind:
    """The kind the options choose; BadInput (one line) for a kind distval does not run, an option of another kind
    that needs its own, an option naming what the chosen kind's declaration lacks, or what the kind refuses beside
    it."""
    kind = chosen_kind(options)
    not_run = kind.declaration.not_run(kind.chosen_with)
    if not_run is not None:
        raise BadInput(not_run)
    for other in kinds():
        if other is kind:
            continue
        for option in other.options:
            if option.needs_its_target and options.get(option.dest):
                raise BadInput(f"{option.flag} {option.needs_its_target}: it needs {other.chosen_with}")
    for naming in NAMING_OPTIONS:  # what the run's options name that the target lacks (its declaration's)
        refusal = kind.declaration.option_refusal(naming, kind.chosen_with) if options.get(naming.dest) else None
        if refusal is not None:
            raise BadInput(refusal)
    for dests, refusal in kind.refuses:
        if all(options.get(dest) for dest in dests):
            raise BadInput(refusal)
    return kind


def choose_target(options: TargetOptions, config: Config, engine_for: EngineFor, warn: Warn) -> Target:
    """The target that runs what the options ask for; ``engine_for(run_id)``: the Engine, asked for only when a
    Docker run opens."""
    make = refuse_options(options).make
    assert make is not None, "refuse_options refuses a kind that cannot run"
    return make(options, config, engine_for, warn)


def dry_run_target(options: TargetOptions, config: Config, engine_for: EngineFor) -> Target:
    """The target that only plans what the options ask for (``distval plan``): nothing is created or started."""
    dry_run = refuse_options(options).dry_run
    assert dry_run is not None, "refuse_options refuses a kind that cannot run"
    return dry_run(options, config, engine_for)
