"""tests/docker_helpers.py without Docker: fixture images are built once each, on request, one at a time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from distval.config.shipped import DEFAULT_IMAGE
from distval.errors import EnvironmentUnusable
from tests.docker_helpers import FixtureImages, FixtureUnavailable, config_images

NOOP = "distval-fixtures/broken:allreduce-noop"
STOCK = "distval-fixtures/torch:2.6-debian-stock"


def test_each_tag_is_built_once_and_returned() -> None:
    builds: list[list[str]] = []
    images = FixtureImages(builds.append)
    assert images(NOOP) == NOOP
    assert images(NOOP) == NOOP
    assert images(STOCK) == STOCK
    assert builds == [[NOOP], [STOCK]]


def test_a_tag_that_is_not_a_fixture_is_a_test_bug_not_a_skip() -> None:
    builds: list[list[str]] = []
    with pytest.raises(ValueError, match="distval-fixtures/torch:9.9 is not a fixture image"):
        FixtureImages(builds.append)("distval-fixtures/torch:9.9")
    assert builds == []


def test_a_failed_build_is_not_retried_and_says_why_each_time() -> None:
    attempts: list[list[str]] = []

    def build(tags: list[str]) -> None:
        attempts.append(tags)
        raise EnvironmentUnusable("building the fixture images needs mmdebstrap")

    images = FixtureImages(build)
    for _ in range(2):
        with pytest.raises(FixtureUnavailable, match=f"fixture image {NOOP} cannot be built here: .*needs mmdebstrap"):
            images(NOOP)
    assert attempts == [[NOOP]]


def test_concurrent_requests_build_once_and_never_two_builds_at_a_time() -> None:
    running = 0
    most = 0
    builds: list[str] = []
    lock = threading.Lock()

    def build(tags: list[str]) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        time.sleep(0.05)
        with lock:
            running -= 1
            builds.extend(tags)

    images = FixtureImages(build)
    results: list[str] = []
    threads = [threading.Thread(target=lambda tag=tag: results.append(images(tag))) for tag in [NOOP, STOCK] * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(builds) == sorted([NOOP, STOCK])
    assert most == 1
    assert sorted(results) == sorted([NOOP, STOCK] * 4)


def test_config_images_are_the_planned_images_each_once(tmp_path: Path) -> None:
    config = tmp_path / "images.yaml"
    config.write_text(
        "scenarios:\n"
        "  - {topology: in-container, world_size: 2, checks: [env]}\n"
        f"  - {{topology: in-container, world_size: 2, checks: [env], name: broken, image: '{NOOP}'}}\n"
        "  - {topology: cross-container, world_size: 2, checks: [env]}\n"
    )
    assert config_images(str(config)) == sorted([DEFAULT_IMAGE, NOOP])
