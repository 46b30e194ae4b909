"""The default config on a good image, run once per test session and read by every test that asserts on it.

Why: three test files asserted on the same run of configs/default.yaml on the 2.6 image (the reports' names and
properties, every check passing with each skip explained, ...), and each paid for it again: about a minute and a half
per run on this machine since the default config holds 3, 2 and 4 ranks. One run, its exit code, JUnit and JSON report
kept, and what it left behind taken right after it, serves them all.

The default image runs as distval's sample image (``--sample-image``, no ``--image``): that is how a newcomer runs it,
and the reports must say so (test_docker.py checks the ``sample_image`` property); every other image by ``--image``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from distval.cli.main import main
from distval.config.shipped import DEFAULT_IMAGE
from tests.docker_helpers import DEFAULT_CONFIG, config_images, leftovers


@dataclass(frozen=True)
class DefaultRun:
    """One ``distval run configs/default.yaml`` and what it wrote."""

    image: str
    code: int
    junit: Path
    report: Path
    run_id: str
    left_behind: list[str]  # the run's containers and networks still there after it ended


class DefaultRuns:
    """``runs(image)``: the default config's run on ``image``, made on first use."""

    def __init__(self, folder: Path, fixture_image: Callable[[str], str], docker_client: object) -> None:
        self._folder = folder
        self._fixture_image = fixture_image
        self._client = docker_client
        self._done: dict[str, DefaultRun] = {}

    def __call__(self, image: str) -> DefaultRun:
        if image not in self._done:
            self._done[image] = self._run(image)
        return self._done[image]

    def _run(self, image: str) -> DefaultRun:
        sample = image == DEFAULT_IMAGE
        for needed in config_images(DEFAULT_CONFIG) if sample else [image]:
            self._fixture_image(needed)
        name = image.rsplit("/", 1)[-1].replace(":", "-")
        junit, report = self._folder / f"{name}.xml", self._folder / f"{name}.json"
        run_id = "d" + secrets.token_hex(4)
        chosen = ["--sample-image"] if sample else ["--image", image]
        argv = ["run", DEFAULT_CONFIG, *chosen, "--junit", str(junit), "--json", str(report), "--run-id", run_id]
        code = main([*argv, "--quiet"])
        return DefaultRun(image, code, junit, report, run_id, leftovers(self._client, run_id))
