"""Shared test setup: the ``docker`` marker's fixtures, and --require-docker, which turns "no Engine" (or
"fixture image cannot be built") into failures instead of skips.

Docker tests run against the real Engine with the real fixture images. Each test asks for the images it
uses with ``fixture_image(tag)``: a missing or stale image is built then (distval.images, no registry;
minutes the first time, once per session), so running one Docker test builds only what it needs.
Helpers the Docker test modules share live in tests/docker_helpers.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# First: the runner's $CI and $GITHUB_STEP_SUMMARY leave the environment before any test sees it.
from tests import runner_environment  # noqa: F401
from tests.budget_report import BudgetReport
from tests.default_runs import DefaultRuns
from tests.docker_helpers import FixtureImages, FixtureUnavailable, harness_context, unavailable
from tests.local_registry import LocalRegistry, RegistryUnavailable, local_registry

BUDGET_REPORT = "distval-budget-report"


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(BudgetReport(), BUDGET_REPORT)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--require-docker",
        action="store_true",
        default=False,
        help="fail (instead of skip) the Docker tests when no Docker Engine is reachable or the fixtures cannot be built",
    )


@pytest.fixture(scope="session")
def docker_client(pytestconfig: pytest.Config) -> Iterator[object]:
    try:
        import docker

        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any reason the Engine is unusable is a skip reason
        unavailable(pytestconfig, f"no reachable Docker Engine: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def fixture_image(pytestconfig: pytest.Config, docker_client: object) -> Callable[[str], str]:
    """``fixture_image(tag)`` returns the tag once that fixture image (and its parents) is in the Engine and
    current, building it if needed, once per session; a test that cannot have its image is skipped (or
    fails, with --require-docker) with the reason."""
    from distval.images import build_fixtures
    from distval.targets.docker.engine import Engine

    engine = Engine("tests-fixtures")
    images = FixtureImages(lambda tags: build_fixtures(engine, tags, lambda line: print(line, flush=True)))
    budgets: BudgetReport = pytestconfig.pluginmanager.get_plugin(BUDGET_REPORT)

    def require(tag: str) -> str:
        try:
            with budgets.building():  # not the test file's time: beside it in the budget report
                return images(tag)
        except FixtureUnavailable as exc:
            unavailable(pytestconfig, str(exc))

    return require


@pytest.fixture(scope="session")
def default_run(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path_factory: pytest.TempPathFactory
) -> DefaultRuns:
    """``default_run(image)``: configs/default.yaml on that image, run once per session (tests/default_runs.py)."""
    return DefaultRuns(tmp_path_factory.mktemp("default-runs"), fixture_image, docker_client)


@pytest.fixture(scope="session")
def harness_image(
    fixture_image: Callable[[str], str], docker_client: object, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """distval's own image (the Dockerfile), built offline from the harness base once per session and removed at its
    end. Three files drive it (the reaper inside it, a run through the socket, verify without a socket); each built its
    own copy of the same context before, about 40 s apiece in a warm CI run."""
    from distval.image_names import HARNESS_BASE
    from distval.targets.docker.engine import Engine

    base = fixture_image(HARNESS_BASE)
    tag = "distval-test/harness:" + secrets.token_hex(3)
    context = harness_context(tmp_path_factory.mktemp("harness"))
    Engine("tests-harness-image").build(context, tag, {}, print, buildargs={"BASE": base, "PIP_NO_INDEX": "1"})
    yield tag
    docker_client.images.remove(tag, force=True)  # type: ignore[attr-defined]


@pytest.fixture(scope="session", name="local_registry")
def local_registry_fixture(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalRegistry]:
    """A real registry on a free 127.0.0.1 port for the whole session (tests/local_registry.py); skipped where
    Debian's docker-registry is missing, a failure with --require-docker."""
    try:
        with local_registry(tmp_path_factory.mktemp("registry")) as registry:
            yield registry
    except RegistryUnavailable as exc:
        unavailable(pytestconfig, str(exc))


@pytest.fixture
def fake_docker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """`distval run` against the fake Engine and a fake runtime (tests/report_helpers.py); the config to run."""
    from tests.report_helpers import use_fake_docker

    return use_fake_docker(monkeypatch, tmp_path)
