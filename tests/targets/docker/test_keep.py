"""--keep-on-failure's decisions without Docker (distval/targets/docker/keep.py): which scenarios are kept, what the run's final
cleanup removes, and the lines printed. Against the real Engine: tests/targets/docker/test_reaper_docker.py."""

from __future__ import annotations

from typing import Any

import pytest

from distval.cli.main import main
from distval.engine_protocol import Resource
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED
from distval.targets.docker.keep import Keeper, inspect_commands


class Held:
    """The part of the Engine a Keeper uses, over a list of resources."""

    run_id = "k1"

    def __init__(self, resources: list[Resource]) -> None:
        self.held = list(resources)

    def list_managed(self, labels: list[str] | None = None) -> list[Resource]:
        wanted = dict(label.split("=", 1) for label in labels or [])
        return [r for r in self.held if all(r.labels.get(k) == v for k, v in wanted.items())]

    def remove_resources(self, found: list[Resource]) -> tuple[int, int]:
        for resource in found:
            self.held.remove(resource)
        return 0, 0

    def remove_labelled(self, extra_label: str | None = None) -> tuple[int, int]:
        key, value = (extra_label or "=").split("=", 1)
        return self.remove_resources([r for r in self.held if r.labels.get(key) == value])


def scenario(name: str, containers: int = 2) -> list[Resource]:
    labels = {"distval.run": "k1", "distval.scenario": name}
    return [Resource("network", f"n-{name}", f"distval-k1-{name}", labels, None)] + [
        Resource("container", f"c-{name}-{i}", f"distval-k1-{name}-n{i}", labels, None) for i in range(containers)
    ]


REAPER = Resource("container", "r", "distval-k1-reaper", {"distval.run": "k1", "distval.role": "reaper"}, None)


class Verdict:
    def __init__(self, name: str, status: str) -> None:
        self.status = status
        self.plan: Any = type("Plan", (), {"scenario": type("Scenario", (), {"name": name})()})()


def names(engine: Held) -> list[str]:
    return sorted(r.name for r in engine.held)


def test_failed_and_errored_scenarios_are_kept_the_others_removed_as_they_finish() -> None:
    engine = Held(scenario("good") + scenario("bad") + scenario("broken") + scenario("skipped", 0) + [REAPER])
    keeper = Keeper(engine, True)  # type: ignore[arg-type]
    for name, status in (("good", PASSED), ("bad", FAILED), ("broken", ERROR), ("skipped", SKIPPED)):
        keeper.settle(Verdict(name, status))  # type: ignore[arg-type]
    assert keeper.kept == ("bad", "broken")
    assert "distval-k1-good-n0" not in names(engine) and "distval-k1-bad-n0" in names(engine)
    keeper.remove_run(engine)  # type: ignore[arg-type]
    assert names(engine) == sorted(r.name for r in scenario("bad") + scenario("broken") + [REAPER])


def test_without_the_option_nothing_is_kept_and_settle_removes_nothing() -> None:
    engine = Held(scenario("bad") + [REAPER])
    keeper = Keeper(engine, False)  # type: ignore[arg-type]
    keeper.settle(Verdict("bad", FAILED))  # type: ignore[arg-type]
    assert keeper.kept == () and len(engine.held) == 4  # the runtime removes each scenario's resources itself
    keeper.remove_run(engine)  # type: ignore[arg-type]
    assert names(engine) == ["distval-k1-reaper"]  # last, by the caller, after everything else


def test_an_interrupted_run_keeps_nothing() -> None:
    engine = Held(scenario("bad"))
    keeper = Keeper(engine, True)  # type: ignore[arg-type]
    keeper.settle(Verdict("bad", FAILED))  # type: ignore[arg-type]
    keeper.forget()
    keeper.remove_run(engine)  # type: ignore[arg-type]
    assert engine.held == []


def test_the_lines_name_each_kept_container_its_commands_and_the_removal() -> None:
    engine = Held(scenario("good") + scenario("bad") + [REAPER])
    keeper = Keeper(engine, True)  # type: ignore[arg-type]
    keeper.settle(Verdict("bad", FAILED))  # type: ignore[arg-type]
    n0, n1 = "distval-k1-bad-n0", "distval-k1-bad-n1"
    assert keeper.instructions() == [
        "kept 2 container(s) and 1 network(s) of 1 failed scenario(s) (--keep-on-failure): bad",
        f"  {n0}:",
        f"    docker logs {n0}",
        f"    docker commit {n0} distval-kept:{n0} && docker run --rm -it --entrypoint sh distval-kept:{n0}; "
        f"docker rmi distval-kept:{n0}",
        f"  {n1}:",
        f"    docker logs {n1}",
        f"    {inspect_commands(n1)[1]}",
        "remove them: distval cleanup --run-id k1",
    ]
    assert Keeper(engine, True).instructions() == []  # type: ignore[arg-type]


def test_keep_on_failure_needs_containers(capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("version: 1\nscenarios:\n  - {topology: in-container, world_size: 2, checks: [env]}\n")
    assert main(["run", str(config), "--local", "--keep-on-failure", "--quiet"]) == 2
    assert (
        "distval: --keep-on-failure asks for the failed scenarios' resources kept (--keep-on-failure); the local target "
        "cannot give it: it runs local processes, which end with the run"
    ) in capsys.readouterr().err
