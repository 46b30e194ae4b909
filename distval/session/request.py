"""What ``distval run`` asks, as one typed request: the command line parsed once (distval/cli/run.py), so that
the run stage reads these fields, never attribute names of a parsed command line."""

from __future__ import annotations

from dataclasses import dataclass

from distval.comparing.judges import BaselineOptions, ReferenceOptions
from distval.plan.selection import Selection
from distval.session.reports import ReportPaths
from distval.targets.kind import TargetOptions


@dataclass(frozen=True)
class RunRequest:
    run_id: str
    config_path: str  # the shipped default where none was given
    selection: Selection
    patterns: tuple[str, ...] | None  # --filter's; None: every scenario
    target: TargetOptions
    reports: ReportPaths
    baseline: BaselineOptions
    reference: ReferenceOptions
    jobs: int | None = None  # None: default_jobs()
    quiet: bool = False
    verbose: bool = False
    require_gpu: bool = False
    fail_on_skip: bool = False
    references: str | None = None  # --references FILE (read by the run stage, before anything runs)
    system: str | None = None  # --system NAME
