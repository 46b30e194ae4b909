"""The two other ways to use distval, against the real Engine: `docker compose up` of the image under
test, and the harness's own image driving the host's Engine through the socket. Marked ``docker``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from distval.tarball import regular_files
from tests.docker_helpers import cases, leftovers, outcome, validate
from tests.paths import ROOT

pytestmark = pytest.mark.docker
COMPOSE = shutil.which("docker-compose")
# The checks the harness image runs in the default config's scenarios: those its test asserts on.
HARNESS_CHECKS = ("all_reduce", "ddp_sync")


def compose(project: str, image: str, *args: str, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    assert COMPOSE is not None
    return subprocess.run(
        [COMPOSE, "-p", project, "-f", str(ROOT / "compose.yaml"), *args],
        cwd=ROOT,
        env={**os.environ, "IMAGE": image},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


@pytest.fixture
def project(docker_client: object) -> Iterator[str]:
    if COMPOSE is None:
        pytest.skip("docker-compose is not installed")
    name = "distval-test-" + secrets.token_hex(3)
    yield name
    compose(name, "unused", "down", "-v", "--remove-orphans")
    remaining = docker_client.containers.list(all=True, filters={"label": f"com.docker.compose.project={name}"})  # type: ignore[attr-defined]
    assert remaining == []


def up(project: str, image: str) -> subprocess.CompletedProcess[str]:
    return compose(project, image, "up", "--abort-on-container-exit", "--exit-code-from", "rank0")


def test_compose_up_passes_on_the_fixture_with_a_verdict_per_check(fixture_image: Callable[[str], str], project: str) -> None:
    result = up(project, fixture_image("distval-fixtures/torch:2.6-debian"))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for rank in (0, 1):
        for case in ("env", "launch", "all_reduce", "collectives.broadcast", "ddp_sync", "ddp_sampler", "store", "timeout"):
            assert f"distval: rank {rank} {case} passed" in result.stdout, (rank, case)
        assert f"distval: rank {rank} reconfigure skipped reconfigure needs torch >= 2.14" in result.stdout


def test_compose_up_fails_on_the_broken_all_reduce(fixture_image: Callable[[str], str], project: str) -> None:
    result = up(project, fixture_image("distval-fixtures/broken:allreduce-noop"))
    assert result.returncode == 1, result.stdout[-3000:]
    assert (
        "distval: rank 0 all_reduce failed all_reduce(SUM) of rank+1 over 2 ranks: expected 3.0 in every element, got 1.0"
        in result.stdout
    )
    assert "distval: rank 1 env passed" in result.stdout


def test_harness_image_validates_the_fixture_through_the_socket(
    fixture_image: Callable[[str], str], harness_image: str, docker_client: object, tmp_path: Path
) -> None:
    """The harness in its own image runs the default config's scenarios on the host's Engine through the socket. Only
    the checks asserted here run in them: the default config's whole list on this image is test_suite_docker.py's
    good-image test (tests/default_runs.py), and what this proves is the way in, not the checks again (the whole
    list here cost about 75 s of a warm CI run for two checks asserted)."""
    image = fixture_image("distval-fixtures/torch:2.6-debian")
    run_id = "h" + secrets.token_hex(4)
    client = docker_client
    container = client.containers.create(  # type: ignore[attr-defined]
        harness_image,
        command=["run", "configs/default.yaml", "--image", image, "--junit", "/results/results.xml",
                 "--run-id", run_id, *(arg for check in HARNESS_CHECKS for arg in ("--check", check))],
        volumes={"/var/run/docker.sock": {"bind": "/var/run/docker.sock", "mode": "rw"}},
        # Not the run's own id: the harness inside removes everything labelled with that at its end.
        labels={"distval.managed": "true", "distval.run": run_id + "-harness"},
    )  # fmt: skip
    try:
        container.start()
        status = container.wait(timeout=600)
        logs = container.logs().decode()
        assert status["StatusCode"] == 0, logs[-3000:]
        stream, _ = container.get_archive("/results/results.xml")
        junit = tmp_path / "results.xml"
        junit.write_bytes(regular_files(b"".join(stream))["results.xml"])
    finally:
        container.remove(force=True)
    found = cases(validate(junit))
    assert outcome(found[("cross-container-2ranks (cross-container, 2x1, 2 ranks, static)", "all_reduce")]) == ("passed", "")
    assert outcome(found[("in-container-3ranks (in-container, 3 ranks)", "ddp_sync")]) == ("passed", "")
    ran = {name for _, name in found}
    assert {"all_reduce", "ddp_sync"} <= ran and not ran & {"collectives.broadcast", "timeout", "libraries"}, sorted(ran)
    assert leftovers(client, run_id) == []
