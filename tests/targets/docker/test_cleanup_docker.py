"""``distval cleanup`` against the real Engine. Marked ``docker``.

Each test creates its own runs (a network and a running ``sleep`` container, through the Engine, so
with the Engine's labels) and narrows ``distval cleanup`` to what it created: the Engine the command
uses lists only resources that carry the test's own ``distval.test`` label, so no other run on this
Engine is ever touched. Whatever a test leaves is removed by that label at its end.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import distval.cli.main
from distval.cli.main import main
from distval.owner import UNKNOWN, Owner, current_owner, start_time
from distval.plan.specs import ContainerPlan, NetworkPlan
from distval.targets.docker.engine import Engine
from tests.docker_helpers import leftovers

pytestmark = pytest.mark.docker
IMAGE = "distval-fixtures/harness-base:trixie"
TEST_LABEL = "distval.test"


@pytest.fixture
def token(docker_client: Any, fixture_image: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    fixture_image(IMAGE)  # the sleep containers' image
    value = secrets.token_hex(4)

    class ScopedEngine(Engine):
        def list_managed(self, labels: list[str] | None = None) -> list[Any]:
            return super().list_managed([*(labels or []), f"{TEST_LABEL}={value}"])

    monkeypatch.setattr(distval.cli.main, "Engine", ScopedEngine)
    yield value
    Engine("t-cleanup").remove_matching([f"{TEST_LABEL}={value}"])


def create_run(token: str, owner: Owner | None = None) -> str:
    """A run with a network and a running sleep container, labelled by the Engine (owner: this process by default)."""
    run_id = "t" + secrets.token_hex(4)
    engine = Engine(run_id, owner=owner)
    labels = ((TEST_LABEL, token),)
    network = NetworkPlan(f"distval-{run_id}", True, labels)
    engine.create_network(network)
    container = engine.create_container(
        ContainerPlan(f"distval-{run_id}-sleep", "sleep", 0, (0,), ("sleep", "300"), (), labels, "/", IMAGE, (network.name,))
    )
    engine.start(container)
    assert engine.state(container).status == "running"
    return run_id


def dead_owner() -> Owner:
    process = subprocess.Popen(["sleep", "60"])
    started = start_time(process.pid)
    assert started not in (None, UNKNOWN)
    process.kill()
    process.wait()
    return Owner(current_owner().host, process.pid, str(started))


def test_cleanup_keeps_a_live_run_and_removes_a_dead_owners_run(
    token: str, docker_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    live = create_run(token)
    dead = create_run(token, owner=dead_owner())
    assert main(["cleanup"]) == 0
    out = capsys.readouterr().out
    assert f"kept run {live} (1 container(s), 1 network(s)): its owner, pid " in out
    assert f"removed run {dead} (1 container(s), 1 network(s)): its owner, pid " in out
    assert sorted(leftovers(docker_client, live)) == [f"distval-{live}", f"distval-{live}-sleep"]
    assert leftovers(docker_client, dead) == []
    (container,) = docker_client.containers.list(filters={"label": f"distval.run={live}"})
    assert container.status == "running"


def test_cleanup_older_than_removes_a_live_run_once_it_is_old_enough(
    token: str, docker_client: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    live = create_run(token)
    time.sleep(2.5)
    assert main(["cleanup", "--older-than", "1h"]) == 0
    assert len(leftovers(docker_client, live)) == 2
    assert main(["cleanup", "--older-than", "2s"]) == 0
    assert leftovers(docker_client, live) == []
    assert f"removed run {live} (1 container(s), 1 network(s)): its newest resource is " in capsys.readouterr().out


def test_cleanup_run_id_removes_a_live_run(token: str, docker_client: Any, capsys: pytest.CaptureFixture[str]) -> None:
    live, other = create_run(token), create_run(token)
    assert main(["cleanup", "--run-id", live]) == 0
    assert leftovers(docker_client, live) == []
    assert len(leftovers(docker_client, other)) == 2
    assert capsys.readouterr().out.splitlines()[-1] == "removed 1 container(s) and 1 network(s); kept 0 run(s)"
