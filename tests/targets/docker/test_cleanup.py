"""``distval cleanup`` without Docker: owners, durations, which runs it removes and which it keeps, and what it
prints, against a fake Engine holding labelled resources. The real Engine: tests/targets/docker/test_cleanup_docker.py."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

import distval.cli.main
import distval.targets.docker.cleanup
from distval.cli.main import main
from distval.config.durations import format_duration, parse_duration
from distval.engine_protocol import Resource
from distval.errors import EngineError
from distval.labels import LABEL_MANAGED, LABEL_OWNER_HOST, LABEL_OWNER_MACHINE, LABEL_OWNER_PID, LABEL_OWNER_STARTED, LABEL_RUN
from distval.owner import UNKNOWN, Owner, current_owner, machine_id, owner_alive, start_time
from distval.targets.docker.cleanup import RunDecision, decide
from tests.fake_engine import FakeEngine

NOW = 1_800_000_000.0


def dead_owner() -> Owner:
    """A process of this host that has exited (its pid is free, or reused by a process started later)."""
    process = subprocess.Popen(["sleep", "60"])
    started = start_time(process.pid)
    assert started is not None and started != UNKNOWN
    process.kill()
    process.wait()
    return Owner(current_owner().host, process.pid, started, current_owner().machine)


def resources(run_id: str, owner: Owner | None, age_s: float = 60.0) -> list[Resource]:
    labels = {LABEL_MANAGED: "true", LABEL_RUN: run_id, **(owner.labels() if owner else {})}
    return [
        Resource("container", f"c-{run_id}", f"distval-{run_id}-n0", labels, NOW - age_s),
        Resource("network", f"n-{run_id}", f"distval-{run_id}", labels, NOW - age_s - 1),
    ]


# --- owners -----------------------------------------------------------------------------------------


def test_this_process_is_alive_and_an_exited_one_is_dead() -> None:
    me = current_owner()
    assert owner_alive(me, me.host) is True
    assert owner_alive(dead_owner(), me.host) is False


def test_a_reused_pid_is_not_the_owner() -> None:
    me = current_owner()
    assert owner_alive(Owner(me.host, me.pid, me.started + "0"), me.host) is False  # this pid, another start time


def test_another_host_cannot_be_judged() -> None:
    me = current_owner()
    assert owner_alive(Owner("elsewhere", me.pid, me.started), me.host) is None


def test_another_pid_namespace_cannot_be_judged() -> None:
    me = current_owner()
    boot, _, ticks = me.started.split(":")
    container = Owner(me.host, me.pid, f"{boot}:4000000001:{ticks}")  # the same host name, another PID namespace
    assert owner_alive(container, me.host) is None
    (decision,) = decide(resources("c", container), None, NOW, me.host)
    assert (decision.remove, decision.reason) == (
        False,
        f"its owner, pid {me.pid} on {me.host}, runs in another PID namespace (a container); --older-than or --run-id removes it",
    )


def test_an_owner_of_an_earlier_boot_is_gone() -> None:
    me = current_owner()
    _, namespace, ticks = me.started.split(":")
    earlier = f"00000000-0000-0000-0000-000000000000:{namespace}:{ticks}"
    assert owner_alive(Owner(me.host, me.pid, earlier, me.machine), me.host) is False


def test_an_unreadable_start_time_counts_as_alive_while_the_pid_exists() -> None:
    me = current_owner()
    assert owner_alive(Owner(me.host, me.pid, UNKNOWN, me.machine), me.host) is True
    assert owner_alive(Owner(me.host, dead_owner().pid, UNKNOWN, me.machine), me.host) is False


def test_owner_labels_round_trip_and_garbage_names_no_owner() -> None:
    me = current_owner()
    assert Owner.from_labels(me.labels()) == me
    assert Owner.from_labels({}) is None
    assert Owner.from_labels({LABEL_OWNER_HOST: "h", LABEL_OWNER_PID: "x1", LABEL_OWNER_STARTED: "s"}) is None


def test_another_machine_with_this_host_name_is_kept_unless_named_or_old(
    engine: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(distval.targets.docker.cleanup.time, "time", lambda: NOW)
    me, dead = current_owner(), dead_owner()
    other = "f" * 32
    assert me.machine and me.machine != other
    # A CI runner on another machine with this host name: its process is not ours to look up, even when a pid of
    # that number is gone here, or its boot id differs from ours.
    twin = Owner(me.host, dead.pid, dead.started, other)
    rebooted = Owner(me.host, dead.pid, "00000000-0000-0000-0000-000000000000:1:1", other)
    assert owner_alive(twin, me.host) is None and owner_alive(rebooted, me.host) is None
    engine.held = resources("twin", twin) + resources("rebooted", rebooted, age_s=7300)
    assert main(["cleanup"]) == 0
    assert remaining() == ["rebooted", "twin"]
    out = capsys.readouterr().out
    assert f"kept run twin (1 container(s), 1 network(s)): its owner, pid {dead.pid} on {me.host}, runs on another " in out
    assert "machine with this host name (machine id ffffffffffff); --older-than or --run-id removes it" in out
    assert main(["cleanup", "--older-than", "2h"]) == 0 and remaining() == ["twin"]
    assert main(["cleanup", "--run-id", "twin"]) == 0 and remaining() == []


def test_labels_without_a_machine_id_are_judged_only_on_this_host_and_boot() -> None:
    me, dead = current_owner(), dead_owner()
    old_style = Owner(me.host, dead.pid, dead.started)  # a distval before the machine id: this boot, pid gone
    assert owner_alive(old_style, me.host) is False
    assert owner_alive(Owner(me.host, me.pid, me.started), me.host) is True
    _, namespace, ticks = dead.started.split(":")
    other_boot = Owner(me.host, dead.pid, f"00000000-0000-0000-0000-000000000000:{namespace}:{ticks}")
    assert owner_alive(other_boot, me.host) is None  # another boot of an unknown machine: not known dead
    (decision,) = decide(resources("old", other_boot), None, NOW, me.host)
    assert not decision.remove and "on an unknown machine (labels without a machine id, of another boot)" in decision.reason
    assert owner_alive(Owner(me.host, dead.pid, UNKNOWN), me.host) is None


def test_the_machine_id_is_the_systems_else_one_kept_private(tmp_path: Any) -> None:
    system = tmp_path / "machine-id"
    system.write_text("0123456789abcdef0123456789abcdef\n")
    kept = tmp_path / "cache" / "distval" / "machine-id"
    assert machine_id(str(system), str(kept)) == "0123456789abcdef0123456789abcdef" and not kept.exists()
    made = machine_id(str(tmp_path / "none"), str(kept))
    assert len(made) == 32 and kept.read_text().strip() == made
    assert kept.stat().st_mode & 0o777 == 0o600 and kept.parent.stat().st_mode & 0o777 == 0o700
    machine_id.cache_clear()
    assert machine_id(str(tmp_path / "none"), str(kept)) == made  # the same id in every later run
    assert current_owner().labels()[LABEL_OWNER_MACHINE] == current_owner().machine
    labels = current_owner().labels()
    assert Owner.from_labels({**labels, LABEL_OWNER_MACHINE: "x\x1b"}) == Owner(*list(current_owner().__dict__.values())[:3])


# --- durations --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "seconds"), [("30m", 1800), ("2h", 7200), ("1h30m", 5400), ("90s", 90), ("1d", 86400)])
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5", "m", "2x", "-1h", "1h 30m", "h2"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration such as 30m"):
        parse_duration(text)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 59, 60, 5400, 90061)] == ["0s", "59s", "1m", "1h30m", "1d1h1m1s"]


# --- decisions --------------------------------------------------------------------------------------


def test_decide_removes_only_runs_that_are_over() -> None:
    me, dead = current_owner(), dead_owner()
    found = (
        resources("live", me)
        + resources("dead", dead)
        + resources("remote", Owner("elsewhere", 1, "b:1"))
        + resources("legacy", None)
    )
    decisions = decide(found, None, NOW, me.host)
    assert [(d.run_id, d.remove, d.reason) for d in decisions] == [
        ("live", False, f"its owner, pid {me.pid} on {me.host}, is still running; --run-id live removes it anyway"),
        ("dead", True, f"its owner, pid {dead.pid} on {dead.host}, is gone"),
        ("remote", False, "its owner, pid 1 on elsewhere, runs on another host; --older-than or --run-id removes it"),
        ("legacy", False, "it names no owner (made by an older distval); --older-than or --run-id removes it"),
    ]
    assert [len(d.resources) for d in decisions] == [2, 2, 2, 2]


def test_decide_older_than_removes_old_runs_whoever_owns_them() -> None:
    me = current_owner()
    found = resources("old", me, age_s=7300) + resources("young", me, age_s=600) + resources("remote", Owner("x", 1, "b:1"), 7300)
    decisions = decide(found, 7200, NOW, me.host)
    assert [(d.run_id, d.remove, d.reason) for d in decisions] == [
        ("old", True, "its newest resource is 2h1m40s old (--older-than 2h)"),
        (
            "young",
            False,
            f"its owner, pid {me.pid} on {me.host}, is still running; --run-id young removes it anyway "
            "(its newest resource is 10m old)",
        ),
        ("remote", True, "its newest resource is 2h1m40s old (--older-than 2h)"),
    ]


def test_the_newest_resource_decides_the_age() -> None:
    me = current_owner()
    old, young = resources("r", me, age_s=7300), resources("r", me, age_s=10)
    (decision,) = decide([old[0], young[1]], 7200, NOW, me.host)
    assert decision.remove is False


# --- the command, against a fake Engine ---------------------------------------------------------------


@pytest.fixture
def engine(monkeypatch: pytest.MonkeyPatch) -> type[FakeEngine]:
    monkeypatch.setattr(distval.cli.main, "Engine", FakeEngine)
    monkeypatch.setattr(FakeEngine, "held", [])
    return FakeEngine


def remaining() -> list[str]:
    return sorted({r.labels[LABEL_RUN] for r in FakeEngine.held})


def test_cleanup_keeps_a_live_run_and_removes_a_dead_one(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    me, dead = current_owner(), dead_owner()
    engine.held = resources("live", me) + resources("dead", dead)
    assert main(["cleanup"]) == 0
    assert remaining() == ["live"]
    assert capsys.readouterr().out.splitlines() == [
        f"kept run live (1 container(s), 1 network(s)): its owner, pid {me.pid} on {me.host}, is still running; "
        "--run-id live removes it anyway",
        f"removed run dead (1 container(s), 1 network(s)): its owner, pid {dead.pid} on {dead.host}, is gone",
        "removed 1 container(s) and 1 network(s); kept 1 run(s)",
    ]


def test_cleanup_run_id_and_all_remove_live_runs(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    me = current_owner()
    engine.held = resources("one", me) + resources("two", me) + resources("three", me)
    assert main(["cleanup", "--run-id", "two"]) == 0
    assert remaining() == ["one", "three"]
    assert capsys.readouterr().out.splitlines() == [
        "removed run two (1 container(s), 1 network(s)): named with --run-id two",
        "removed 1 container(s) and 1 network(s); kept 0 run(s)",
    ]
    assert main(["cleanup", "--all"]) == 0
    assert remaining() == []


def test_cleanup_older_than(engine: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.targets.docker.cleanup.time, "time", lambda: NOW)
    me = current_owner()
    engine.held = resources("old", me, age_s=3 * 3600) + resources("young", me, age_s=60)
    assert main(["cleanup", "--older-than", "2h"]) == 0
    assert remaining() == ["young"]
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "removed run old (1 container(s), 1 network(s)): its newest resource is 3h old (--older-than 2h)"


def test_cleanup_with_nothing_to_do(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup"]) == 0
    assert capsys.readouterr().out == "removed 0 container(s) and 0 network(s); kept 0 run(s)\n"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["cleanup", "--older-than", "soon"], "expected a duration such as 30m"),
        (["cleanup", "--all", "--run-id", "x"], "not allowed with argument"),
        (["cleanup", "--all", "--older-than", "1h"], "not allowed with argument"),
    ],
)
def test_cleanup_usage_errors(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2  # a usage error is one line and exit 2 (main returns it rather than exiting)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("distval cleanup: error: ") and expected in line


def test_decisions_count_their_resources() -> None:
    decision = RunDecision("r", tuple(resources("r", None)), False, "")
    assert decision.counts() == "1 container(s), 1 network(s)"


def test_cleanup_dry_run_says_the_same_decisions_and_removes_nothing(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    me, dead = current_owner(), dead_owner()
    engine.held = resources("live", me) + resources("dead", dead)
    assert main(["cleanup", "--dry-run"]) == 0
    assert remaining() == ["dead", "live"]
    assert capsys.readouterr().out.splitlines() == [
        f"would keep run live (1 container(s), 1 network(s)): its owner, pid {me.pid} on {me.host}, is still running; "
        "--run-id live removes it anyway",
        f"would remove run dead (1 container(s), 1 network(s)): its owner, pid {dead.pid} on {dead.host}, is gone",
        "would remove 1 container(s) and 1 network(s); would keep 1 run(s)",
    ]
    assert main(["cleanup", "--all", "--dry-run"]) == 0 and remaining() == ["dead", "live"]
    assert main(["cleanup"]) == 0 and remaining() == ["live"]  # the real one does what the dry run said


# --- --format json ------------------------------------------------------------------------------------


def test_cleanup_json_says_each_runs_decision_and_the_totals(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    me, dead = current_owner(), dead_owner()
    engine.held = resources("live", me) + resources("dead", dead) + resources("gone", dead)[:1]
    assert main(["cleanup", "--format", "json"]) == 0
    assert remaining() == ["live"]
    data = json.loads(capsys.readouterr().out)
    (one,) = data["engines"]
    assert one["engine"] == FakeEngine.where and one["error"] is None
    assert one["runs"] == [
        {
            "run_id": "live",
            "action": "kept",
            "reason": f"its owner, pid {me.pid} on {me.host}, is still running; --run-id live removes it anyway",
            "containers": 1,
            "networks": 1,
            "reaper": False,
        },
        {
            "run_id": "dead",
            "action": "removed",
            "reason": f"its owner, pid {dead.pid} on {dead.host}, is gone",
            "containers": 1,
            "networks": 1,
            "reaper": False,
        },
        {
            "run_id": "gone",
            "action": "removed",
            "reason": f"its owner, pid {dead.pid} on {dead.host}, is gone",
            "containers": 1,
            "networks": 0,
            "reaper": False,
        },
    ]
    totals = {"removed_containers": 2, "removed_networks": 1, "kept_runs": 1}
    assert {key: one[key] for key in totals} == totals
    assert data["totals"] == totals and data["dry_run"] is False and data["error"] is None


def test_cleanup_json_dry_run_says_what_would_happen_and_removes_nothing(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    me, dead = current_owner(), dead_owner()
    engine.held = resources("live", me) + resources("dead", dead)
    assert main(["cleanup", "--dry-run", "--format", "json"]) == 0
    assert remaining() == ["dead", "live"]
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] is True
    assert [(r["run_id"], r["action"]) for r in data["engines"][0]["runs"]] == [("live", "would_keep"), ("dead", "would_remove")]
    assert data["totals"] == {"removed_containers": 1, "removed_networks": 1, "kept_runs": 1}


def test_cleanup_json_with_nothing_to_do_is_still_an_object(engine: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cleanup", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["engines"][0]["runs"] == [] and data["totals"] == {"removed_containers": 0, "removed_networks": 0, "kept_runs": 0}


def test_cleanup_json_of_an_unreachable_engine_says_why(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No Engine answered: the exit code says so (3), stderr has the line, stdout is still one JSON object."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "no-config"))
    assert main(["cleanup", "--format", "json"]) == 3
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["engines"] == [] and "cannot reach the Docker Engine" in data["error"]
    assert captured.err.startswith("distval: cannot reach the Docker Engine")


def test_cleanup_json_of_an_engine_failing_midway_says_its_error(
    engine: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    engine.held = resources("dead", dead_owner())

    def refuse(self: FakeEngine, found: list[Resource]) -> tuple[int, int]:
        raise EngineError("remove container x: the Engine said no")

    monkeypatch.setattr(FakeEngine, "remove_resources", refuse)
    assert main(["cleanup", "--format", "json"]) == 3
    (one,) = json.loads(capsys.readouterr().out)["engines"]
    assert one["error"] == "remove container x: the Engine said no" and one["runs"] == []
