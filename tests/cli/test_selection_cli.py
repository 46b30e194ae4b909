"""Choosing what runs on the command line: --filter on run, plan and export kubernetes, and the check selection
(--check, --skip-check, -k): one line and exit 2 for a name that is no check, a -k that does not parse or a pattern
that matches nothing; the plan and its hash show the selection; a scenario left no check is reported skipped and
a run that validated nothing does not exit 0; the reproduce command repeats the selection. No Docker: ``run`` uses
the fake Engine (tests/report_helpers.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distval.cli.main
from distval.cli.main import main
from distval.config import load_config
from distval.errors import FilterMismatch
from distval.plan.selection import NO_CHECK_SELECTED, selection_of
from distval.session.selection import matching_names, plan_selected, select
from distval.targets.docker.target import DockerTarget
from tests.fake_engine import FakeEngine
from tests.paths import ROOT
from tests.report_helpers import IMAGE, RUN_ID, run

DEFAULT = str(ROOT / "configs" / "default.yaml")
FAULTS = str(ROOT / "configs" / "faults.yaml")
MIXED = """\
scenarios:
  - name: inside
    topology: in-container
    world_size: 2
    checks: [env, all_reduce]
  - name: env-only
    topology: in-container
    world_size: 2
    checks: [env]
"""


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    return line


@pytest.mark.parametrize(
    ("prog", "command"),
    [
        ("distval plan", ["plan", DEFAULT]),
        ("distval run", ["run", DEFAULT, "--image", IMAGE]),
        ("distval export kubernetes", ["export", "kubernetes", DEFAULT, "--image", IMAGE]),
    ],
)
def test_a_check_that_is_no_check_is_one_line_with_the_closest(
    prog: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--check", "allreduce"]) == 2
    line = _one_line(capsys)
    assert line.startswith(f"{prog}: error: argument --check: expected a check name (env, identity, ")
    assert line.endswith(f"got 'allreduce'; did you mean 'all_reduce'? (see {prog} --help)")
    assert main([*command, "--skip-check", "nope"]) == 2
    assert _one_line(capsys).endswith(f"got 'nope' (see {prog} --help)")


@pytest.mark.parametrize("command", [["plan", DEFAULT], ["export", "kubernetes", DEFAULT, "--image", IMAGE]])
def test_a_k_that_does_not_parse_is_one_line(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command, "-k", "env and (store"]) == 2
    assert "argument -k: -k 'env and (store': expected ')' at the end" in _one_line(capsys)


@pytest.mark.parametrize("command", [["plan", DEFAULT], ["export", "kubernetes", DEFAULT, "--image", IMAGE]])
def test_filter_on_plan_and_export_refuses_a_pattern_that_matches_nothing(
    command: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([*command, "--filter", "in-*", "--filter", "nope*"]) == 2
    assert _one_line(capsys) == (
        f"distval: --filter 'nope*' matches no scenario of {DEFAULT}; its scenarios: "
        "in-container-3ranks, cross-container-2ranks, cross-container-2x2"
    )


def test_plan_shows_the_filter_and_the_selection(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", DEFAULT, "--filter", "cross-*-2ranks", "-k", "ddp or store"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"run <run-id> from {DEFAULT}: 1 scenario(s)\n")
    assert "scenario cross-container-2ranks (" in out and "scenario in-container-3ranks" not in out
    assert "scenario cross-container-2x2" not in out
    assert "\n  checks: ddp_sync, ddp_sampler, store\n" in out


def test_plan_says_which_scenarios_the_selection_leaves_no_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "m.yaml"
    config.write_text(MIXED, encoding="utf-8")
    assert main(["plan", str(config), "--check", "all_reduce"]) == 0
    assert capsys.readouterr().out.startswith(
        f"run <run-id> from {config}: 1 scenario(s); not run, {NO_CHECK_SELECTED}: env-only\n"
    )
    assert main(["plan", str(config), "--check", "all_reduce", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["name"] for s in data["scenarios"]] == ["inside"]
    assert data["not_run"] == [{"name": "env-only", "reason": NO_CHECK_SELECTED}]


def test_plan_says_which_check_a_fault_keeps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", FAULTS, "--filter", "kill-2x1", "--check", "collective_loop"]) == 0
    out = capsys.readouterr().out
    assert "\nselection: kill-2x1: kept all_reduce: its faults[0] lands after it\n" in out
    assert "\n  checks: all_reduce, collective_loop\n" in out


def test_the_scenario_hash_covers_the_selection() -> None:
    config = load_config(DEFAULT)
    target = DockerTarget(IMAGE, FakeEngine, False, print)

    def hashes(*check: str) -> list[str]:
        selected = select(config, None, selection_of(list(check), None, None))
        return [s.scenario_hash for s in plan_selected(target, selected, RUN_ID).scenarios]

    every = hashes()
    assert hashes("env") != every and hashes("env") != hashes("store")
    # Selecting every check a scenario lists is that scenario: the same hash.
    listed = [c.name for c in config.scenarios[0].checks]
    assert hashes(*listed) == every


def test_export_writes_only_the_filtered_and_selected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "o"
    args = ["export", "kubernetes", DEFAULT, "--image", IMAGE, "--out", str(out), "--run-id", "r1"]
    assert main([*args, "--filter", "in-*", "--check", "env"]) == 0
    plan, written = sorted(out.iterdir())  # the job's plan file and manifests
    assert "in-container" in written.name and plan.name == written.name.replace(".yaml", ".plan.json")
    assert '"name": "env"' in plan.read_text(encoding="utf-8") and '"name": "all_reduce"' not in plan.read_text(encoding="utf-8")
    capsys.readouterr()
    config = tmp_path / "m.yaml"
    config.write_text(MIXED, encoding="utf-8")
    assert main(["export", "kubernetes", str(config), "--image", IMAGE, "--out", str(tmp_path / "p"), "--skip-check", "env"]) == 0
    assert f"distval: not exported: env-only: {NO_CHECK_SELECTED}" in capsys.readouterr().err.splitlines()
    assert main(["export", "kubernetes", str(config), "--image", IMAGE, "--out", str(tmp_path / "q"), "-k", "not env"]) == 0
    capsys.readouterr()
    assert (
        main(["export", "kubernetes", str(config), "--image", IMAGE, "--out", str(tmp_path / "r"), "-k", "not (env or all)"]) == 2
    )
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"distval: nothing to export: the check selection leaves no scenario of {config} a check"
    )


def test_a_run_the_selection_leaves_nothing_runs_nothing_and_fails(
    fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake_docker, tmp_path, "-k", "store") == 5  # store is in no scenario of the config: nothing validated
    assert FakeEngine.instances == [] or all("create_network" not in e.calls for e in FakeEngine.instances)
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [s["status"] for s in report["scenarios"]] == ["skipped", "skipped"]
    reason = f"{NO_CHECK_SELECTED} (-k store)"
    assert [(c["name"], c["status"], c["message"]) for c in report["scenarios"][0]["cases"]] == [
        ("env", "skipped", reason),
        ("all_reduce", "skipped", reason),
    ]
    assert report["exit_code"] == 5
    out = capsys.readouterr().out
    assert "nothing was validated: every scenario was skipped" in out


def test_a_run_with_a_selection_runs_the_selected_and_reports_the_rest_skipped(
    fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_docker.write_text(MIXED, encoding="utf-8")
    # --fail-on-skip: a scenario the command line left no check is its choice, not drift.
    assert run(fake_docker, tmp_path, "--check", "all_reduce", "--fail-on-skip") == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [(s["name"], s["status"]) for s in report["scenarios"]] == [("inside", "passed"), ("env-only", "skipped")]
    assert report["scenarios"][1]["reproduce"] == (
        f"distval run {fake_docker} --image {IMAGE} --filter env-only --check all_reduce"
    )
    assert "all_reduce" in json.dumps(report["scenarios"][0]["cases"])


def test_the_reproduce_command_repeats_the_selection(fake_docker: Path, tmp_path: Path) -> None:
    # The fake runtime fails all_reduce on rank 1 of 'across'.
    assert run(fake_docker, tmp_path, "--skip-check", "env", "-k", "all or env") == 1
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    across = report["scenarios"][1]
    assert across["status"] == "failed"
    assert across["reproduce"] == (f"distval run {fake_docker} --image {IMAGE} --filter across --skip-check env -k 'all or env'")


def test_a_check_no_scenario_lists_is_refused_before_anything_runs(
    fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(fake_docker, tmp_path, "--check", "bandwidth") == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"distval: --check bandwidth: no scenario of {fake_docker} lists it; they list: all_reduce, env"
    )
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["early_error"]["kind"] == "selection"


def test_engine_is_untouched_by_plan(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def no_engine(*args: object) -> None:
        raise AssertionError("plan must not touch the Engine")

    monkeypatch.setattr(distval.cli.main, "Engine", no_engine)
    assert main(["plan", DEFAULT, "--skip-check", "collectives"]) == 0
    assert "collectives" not in capsys.readouterr().out.split("checks: ")[1].splitlines()[0]


def test_a_filter_that_matches_nothing_lists_ten_scenarios_and_says_how_many_past_ten() -> None:
    ten = [f"s{i}" for i in range(10)]
    with pytest.raises(FilterMismatch) as raised:
        matching_names("c.yaml", ten, ["nope"])
    assert str(raised.value).endswith("its scenarios: " + ", ".join(ten))
    with pytest.raises(FilterMismatch) as raised:
        matching_names("c.yaml", [*ten, "s10"], ["nope"])
    assert str(raised.value).endswith("its scenarios: " + ", ".join(ten) + ", ... (11 in all)")
