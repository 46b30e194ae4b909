"""The local target as the command line chooses it (--local) and its options."""

from __future__ import annotations

from distval.config import Config
from distval.targets.base import Target
from distval.targets.declarations import LOCAL
from distval.targets.kind import FLAG, EngineFor, TargetKind, TargetOption, TargetOptions, Warn
from distval.targets.local.doctor import DOCTOR
from distval.targets.local.target import LocalTarget


def _make(options: TargetOptions, _config: Config, _engine_for: EngineFor, _warn: Warn) -> Target:
    return LocalTarget(options.run_id, options.get("python"))


def _dry_run(options: TargetOptions, _config: Config, _engine_for: EngineFor) -> Target:
    return LocalTarget(options.run_id, options.get("python"), dry_run=True)


LOCAL_KIND = TargetKind(
    declaration=LOCAL,
    chosen=lambda options: bool(options.get("local")),
    make=_make,
    dry_run=_dry_run,
    chosen_with="--local",
    options=(
        TargetOption(
            "--local",
            "local",
            "no Docker: run each node as local processes with the local Python's torch (see --python)",
            kind=FLAG,
            default=False,
        ),
        TargetOption(
            "--python",
            "python",
            "with --local: the Python whose torch runs the scenarios (default: each scenario's python, found on PATH)",
            metavar="PATH",
            needs_its_target="names the local Python of --local",
        ),
    ),
    report_mode="host",  # the reports' name of it, as before --local had its name
    runs_images=False,
    doctor=DOCTOR,
    summary_note="(host mode, --local: local processes with the local torch, no Docker; every testsuite is marked [host])",
)
