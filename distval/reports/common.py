"""What several reports state alike, derived from the ``RunSummary``: the properties of a run and of each
testsuite, the command that reproduces a scenario, how many check results passed, a scenario's failing testcases,
a duration to the millisecond, the name of a scenario's testsuite (JUnit, and the JSON report's ``suite_name``)
and of the run's, and when things ran."""

from __future__ import annotations

import glob
import math
import shlex
from collections.abc import Sequence
from datetime import datetime, timezone

from distval import __version__
from distval.results.bandwidth import TopologyRow, topology_rows
from distval.results.outcome import ERROR, FAILED, PASSED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult


def run_properties(summary: RunSummary) -> dict[str, str]:
    """The properties every testsuite of a run carries (JUnit and the JSON report alike)."""
    return {
        "run_id": summary.run_id,
        "distval_version": __version__,
        "docker_engine_version": summary.engine_version or "unknown",
        "host": summary.host,
        "mode": summary.mode,
    }


def ran_sample_image(summary: RunSummary, scenario: ScenarioResult) -> bool:
    """Whether the scenario's image was distval's sample image, run for want of one: the run stage says so
    (``image_note``) only where its target runs images (``TargetKind.runs_images``) and named none, and then a
    scenario that names no image runs the sample."""
    return summary.image_note is not None and scenario.plan.scenario.image is None


def suite_properties(summary: RunSummary, scenario: ScenarioResult) -> dict[str, str]:
    """A testsuite's properties: its scenario's, then the run's, then whether it ran distval's sample image."""
    properties = dict(scenario.properties)
    properties.update(run_properties(summary))
    # A consumer of the reports can tell a verdict on distval's own sample image from one on the image it built.
    properties["sample_image"] = "true" if ran_sample_image(summary, scenario) else "false"
    return properties


def reproduce_command(summary: RunSummary, scenario: ScenarioResult) -> str:
    """The one command that runs this scenario again, on the same image."""
    config = summary.config_path or "CONFIG"
    return shlex.join(
        [
            "distval",
            "run",
            config,
            *scenario.plan.target_args,
            "--filter",
            glob.escape(scenario.plan.scenario.name),
            *summary.selection_args,
        ]
    )


def passed_counts(summary: RunSummary) -> tuple[int, int]:
    """(passed check results, all check results) over every scenario."""
    passed = sum(1 for s in summary.scenarios for c in s.cases if c.status == PASSED)
    return passed, sum(len(s.cases) for s in summary.scenarios)


def failing_cases(scenario: ScenarioResult) -> list[CaseResult]:
    """The scenario's failed or errored testcases, in order."""
    return [c for c in scenario.cases if c.status in (FAILED, ERROR)]


MAX_SECONDS = 1e9  # about 32 years: a longer duration is a clock gone wrong


def milliseconds(seconds: float) -> int:
    """A duration in whole milliseconds; a negative, NaN, infinite or absurd one (a clock gone wrong) is 0."""
    return round(seconds * 1000) if 0 < seconds <= MAX_SECONDS else 0


def suite_label(summary: RunSummary, scenario: ScenarioResult) -> str:
    """What keeps the reports of different images apart: --suite-prefix when given, else the scenario's image
    (host mode: its Python)."""
    return summary.suite_prefix or scenario.plan.image


def image_repository(image: str) -> str:
    """The image reference without its tag or digest (``reg:5000/torch:sha-1a2b`` -> ``reg:5000/torch``): what
    names the same image from commit to commit, where pipelines tag each build with its commit."""
    name = image.split("@", 1)[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > slash else name


def identity_label(summary: RunSummary, scenario: ScenarioResult) -> str:
    """What a testcase's identity (JUnit's classname) names the image by: --suite-prefix when given, else the
    image's repository, so that GitLab's and Jenkins' history follow a testcase across tags (a pipeline tags its
    image with the commit); the tag stays in the ``image`` property and the testsuite's name. Where two images of
    the run share a repository (a candidate and its reference), the whole reference keeps them apart."""
    if summary.suite_prefix:
        return summary.suite_prefix
    image = scenario.plan.image
    repository = image_repository(image)
    others = {s.plan.image for s in summary.scenarios if image_repository(s.plan.image) == repository}
    return repository if len(others) <= 1 else image


def run_identity_label(summary: RunSummary) -> str | None:
    """``identity_label`` for the run as a whole (the early stop's testcase): the prefix, else the images'
    repositories (the whole references where two share one), comma-separated; None when no image is known."""
    if summary.suite_prefix:
        return summary.suite_prefix
    images = run_images(summary)
    repositories = [image_repository(image) for image in images]
    unique = len(set(repositories)) == len(repositories)
    return ",".join(repositories if unique else images) or None


def run_images(summary: RunSummary) -> tuple[str, ...]:
    """The images the run was to validate: the plan's (``summary.images``), else those its scenarios ran."""
    return summary.images or tuple(sorted({s.plan.image for s in summary.scenarios}))


def run_label(summary: RunSummary) -> str | None:
    """What names the reports of the run as a whole (the early stop's testsuite): --suite-prefix when given,
    else its images, comma-separated; None when no image is known (the config could not be read, no --image)."""
    return summary.suite_prefix or ",".join(run_images(summary)) or None


def suite_name(summary: RunSummary, scenario: ScenarioResult) -> str:
    """The testsuite's name: ``[<image or --suite-prefix>] <scenario> (<topology>, <layout>...)``."""
    return f"[{suite_label(summary, scenario)}] {scenario.plan.suite_name}"


def utc_iso(seconds: float | None) -> str | None:
    """A time since the epoch as ISO 8601 with its zone, ``2026-12-03T19:03:27.125Z``; None when unknown."""
    if seconds is None or not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS * 10:
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def wall_seconds(scenarios: Sequence[ScenarioResult]) -> float | None:
    """The run's wall-clock time, from the first scenario's start to the last one's end (scenarios run at once
    with --jobs); None when a scenario's start is not known (collect kubernetes)."""
    starts = [s.started_at for s in scenarios]
    known = [start for start in starts if start is not None and math.isfinite(start)]
    if not scenarios or len(known) != len(starts):
        return None
    ends = [start + (milliseconds(s.duration_s) / 1000) for start, s in zip(known, scenarios, strict=True)]
    return max(ends) - min(known)


def topology_rows_of(summary: RunSummary) -> list[TopologyRow]:
    """busbw in one container next to across containers, for each world size that has both."""
    return topology_rows(
        (s.plan.scenario.name, s.plan.scenario.topology, s.plan.scenario.world_size, s.figures) for s in summary.scenarios
    )
