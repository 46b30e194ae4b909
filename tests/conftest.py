"""Shared test setup: the ``docker`` marker, and --require-docker, which turns "no Engine" into failures.

Docker tests run against the real Engine with the real fixture images; when those images are missing
or stale they are built first (harness.fixtures, no registry), which takes a few minutes once.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest


def _all_fixture_tags() -> list[str]:
    from harness.fixtures import FIXTURES

    return list(FIXTURES)


FIXTURE_TAGS = _all_fixture_tags()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-docker",
        action="store_true",
        default=False,
        help="fail (instead of skip) the Docker tests when no Docker Engine is reachable or the fixtures cannot be built",
    )


def _unavailable(config: pytest.Config, reason: str) -> None:
    if config.getoption("--require-docker"):
        pytest.fail(f"--require-docker: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client(pytestconfig: pytest.Config) -> Iterator[object]:
    try:
        import docker

        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any reason the Engine is unusable is a skip reason
        _unavailable(pytestconfig, f"no reachable Docker Engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def fixture_images(pytestconfig: pytest.Config, docker_client: object) -> list[str]:
    from harness.engine import Engine
    from harness.errors import DistvalError
    from harness.fixtures import build_fixtures

    try:
        build_fixtures(Engine("tests-fixtures"), FIXTURE_TAGS, lambda line: print(line, flush=True))
    except DistvalError as exc:
        _unavailable(pytestconfig, f"the fixture images cannot be built here: {exc}")
    return FIXTURE_TAGS


def leftovers(client: object, run_id: str | None = None) -> list[str]:
    """Names of containers and networks labelled distval.managed=true (of one run, if given)."""
    labels = ["distval.managed=true"] + ([f"distval.run={run_id}"] if run_id else [])
    containers = client.containers.list(all=True, filters={"label": labels})  # type: ignore[attr-defined]
    networks = client.networks.list(filters={"label": labels})  # type: ignore[attr-defined]
    return [c.name for c in containers] + [n.name for n in networks]
