"""Baselines and ``distval compare`` fail closed: a comparison of nothing, a missing figure, a failed
re-measure, a worse verdict, a vanished scenario and an empty side are failures, never a pass; a report
path that is the baseline is refused; what the reports say is escaped where it is shown."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import pytest

from distval.cli.baseline import remeasure, with_baseline
from distval.cli.main import build_parser, main
from distval.cli.run import command_run
from distval.config import parse_config
from distval.errors import EXIT_BAD_INPUT, EXIT_CHECKS_FAILED, EXIT_INTERNAL, EXIT_PASSED
from distval.plan.model import ScenarioPlan
from distval.reports.baseline import BASELINE_CASE, Tolerances, apply_baseline, baseline_case, compare_reports
from distval.reports.comparison_markdown import render_comparison_markdown
from distval.reports.comparison_text import render_comparison_text
from distval.reports.json_report import json_report
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult
from distval.targets.planning import plan_scenario

CONFIG = """\
scenarios:
  - name: bw
    topology: in-container
    world_size: 2
    checks: [env]
  - name: other
    topology: in-container
    world_size: 2
    checks: [env]
"""


def figure(operation: str, size: int, label: str, busbw: float) -> dict[str, Any]:
    return {"operation": operation, "size": size, "label": label, "busbw_gbps": busbw, "iterations": 5}


def case(name: str, status: str = PASSED, duration_s: float = 1.0, message: str = "ok") -> dict[str, Any]:
    return {"name": name, "status": status, "duration_s": duration_s, "message": message}


def entry(
    bandwidth: list[dict[str, Any]], cases: list[dict[str, Any]], name: str = "bw", status: str = PASSED, image: str = "img"
) -> dict[str, Any]:
    """A scenario's entry of a JSON report (what distval/reports/json_report.py writes)."""
    properties = {"scenario_hash": f"h-{name}", "scenario_hash_any_image": f"a-{name}"}
    return {"name": name, "image": image, "status": status, "properties": properties, "bandwidth": bandwidth, "cases": cases}


def report(run_id: str, *scenarios: dict[str, Any], early_error: dict[str, str] | None = None) -> dict[str, Any]:
    return {"schema_version": 1, "run_id": run_id, "scenarios": list(scenarios), "early_error": early_error}


TWO_FIGURES = [figure("all_reduce", 65536, "64KiB", 1.0), figure("all_reduce", 1048576, "1MiB", 2.0)]


# --- the baseline testcase --------------------------------------------------------------------------------


def test_a_matched_scenario_that_compared_nothing_fails() -> None:
    # Both sides have the scenario, neither a figure the other has: "0 figure(s) within tolerance" was a pass.
    baseline = report("old", entry([], [case("process_group")]))
    result = baseline_case(entry([], [case("process_group")]), baseline, Tolerances(), "GOOD.json")
    assert result.status == FAILED, result.message
    assert "expected figures to compare with GOOD.json (run old) (matched by scenario_hash)" in result.message
    assert "neither has a busbw figure or a check's duration" in result.message


def test_a_figure_the_baseline_has_and_the_run_lacks_fails_and_is_named() -> None:
    baseline = report("old", entry(TWO_FIGURES, [case("env"), case("bandwidth.all_reduce")]))
    # The 1 MiB figure is gone and the bandwidth check did not run (skipped): what is left is within tolerance.
    run = entry(TWO_FIGURES[:1], [case("env"), case("bandwidth.all_reduce", SKIPPED)])
    result = baseline_case(run, baseline, Tolerances(), "GOOD.json")
    assert result.status == FAILED, result.message
    assert "2 missing: busbw all_reduce 1MiB, duration bandwidth.all_reduce" in result.message
    assert result.details["missing"] == ["busbw all_reduce 1MiB", "duration bandwidth.all_reduce"]
    # A figure only the run has is new, not a failure.
    more = baseline_case(
        entry(TWO_FIGURES, [case("env")]), report("old", entry(TWO_FIGURES[:1], [case("env")])), Tolerances(), "G"
    )
    assert more.status == PASSED, more.message


def test_a_failed_or_errored_remeasure_fails_the_baseline_testcase() -> None:
    baseline = report("old", entry(TWO_FIGURES, [case("env")]))
    slow = entry([figure("all_reduce", 65536, "64KiB", 0.5), TWO_FIGURES[1]], [case("env")])
    crashed = entry(
        TWO_FIGURES, [case("env"), case("collectives.all_reduce", FAILED, message="rank 1 exited 139")], status=FAILED
    )
    result = baseline_case(slow, baseline, Tolerances(), "GOOD.json", [crashed])
    assert result.status == FAILED, result.message
    assert "expected every run re-measuring this scenario to pass; re-measure 1 failed" in result.message
    assert "collectives.all_reduce failed: rank 1 exited 139" in result.message
    errored = entry(TWO_FIGURES, [case("env", ERROR, message="engine gone")], status=ERROR)
    result = baseline_case(slow, baseline, Tolerances(), "GOOD.json", [entry(TWO_FIGURES, [case("env")]), errored])
    assert result.status == FAILED and "re-measure 2 error (env error: engine gone)" in result.message, result.message
    # Two passing re-measures that recovered: noise, a pass.
    recovered = entry(TWO_FIGURES, [case("env")])
    assert baseline_case(slow, baseline, Tolerances(), "GOOD.json", [recovered, recovered]).status == PASSED


def plans() -> tuple[ScenarioPlan, ...]:
    return tuple(plan_scenario(s, "run1", "example/torch:good") for s in parse_config(CONFIG, "bw.yaml").scenarios)


def result(plan: ScenarioPlan, busbw: float, failed: bool = False) -> ScenarioResult:
    details = {
        "operation": "all_reduce",
        "world_size": 2,
        "iterations": 5,
        "warmup": 1,
        "figures": [
            {"size": 65536, "label": "64KiB", "bytes": 65536, "time_us": 65.536 / busbw, "algbw_gbps": busbw, "busbw_gbps": busbw}
        ],
    }
    cases = [CaseResult("env", FAILED if failed else PASSED, "rank 1 died" if failed else "ok", 0.1)]
    cases.append(CaseResult("bandwidth.all_reduce", PASSED, "ok", 0.2, details=details))
    name = plan.scenario.name
    return ScenarioResult(plan, tuple(cases), (("scenario_hash", f"h-{name}"), ("scenario_hash_any_image", f"a-{name}")), "", 1.0)


def test_remeasuring_stops_at_a_failed_remeasure_and_the_failure_fails_the_run() -> None:
    bw, other = plans()
    good = json_report(RunSummary("good", (result(bw, 1.0), result(other, 1.0))))
    first = RunSummary("run2", (result(bw, 0.1), result(other, 1.0)))
    args = argparse.Namespace(
        baseline=[("GOOD.json", good)], remeasure=2, busbw_tolerance=0.2, duration_tolerance=0.5, busbw_slack_us=0.0
    )
    asked: list[list[str]] = []

    def run_again(again: tuple[ScenarioPlan, ...]) -> list[ScenarioResult]:
        asked.append([p.scenario.name for p in again])
        return [result(p, 1.0, failed=True) for p in again]  # recovered figures, but a check failed

    found = remeasure(first, args, run_again, lambda line: None)
    assert asked == [["bw"]]  # no second re-measure after a failed one
    summary = with_baseline(first, argparse.Namespace(**vars(args), fail_on_skip=False), found)
    assert summary.scenarios[0].cases[-1].status == FAILED, summary.scenarios[0].cases[-1].message
    assert "re-measure 1 failed (env failed: rank 1 died)" in summary.scenarios[0].cases[-1].message
    assert summary.exit_code == EXIT_CHECKS_FAILED


def test_a_baseline_that_matches_no_scenario_fails_every_baseline_testcase() -> None:
    bw, other = plans()
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    for baseline, why in (
        (report("old"), "GOOD.json has no scenario"),
        (
            report("old", early_error={"kind": "environment", "message": "Docker unreachable"}),
            "ended early: environment: Docker unreachable",
        ),
        (report("old", entry([], [], name="unrelated")), "none of its 1 scenario(s) matched a scenario of this run"),
    ):
        summary = apply_baseline(run, baseline, Tolerances(), "GOOD.json")
        cases = [s.cases[-1] for s in summary.scenarios]
        assert [(c.name, c.status) for c in cases] == [(BASELINE_CASE, FAILED)] * 2
        assert all(why in c.message for c in cases), cases[0].message
        assert summary.exit_code == EXIT_CHECKS_FAILED


def test_fail_on_skip_fails_the_skip_of_a_scenario_the_baseline_lacks() -> None:
    bw, other = plans()
    good = json_report(RunSummary("good", (result(bw, 1.0),)))  # has "bw", lacks "other"
    run = RunSummary("run2", (result(bw, 1.0), result(other, 1.0)))
    args = argparse.Namespace(baseline=[("GOOD.json", good)], busbw_tolerance=0.2, duration_tolerance=0.5, busbw_slack_us=100.0)
    lenient = with_baseline(run, argparse.Namespace(**vars(args), fail_on_skip=False))
    assert lenient.scenarios[1].cases[-1].status == SKIPPED and lenient.exit_code == EXIT_PASSED
    strict = with_baseline(run, argparse.Namespace(**vars(args), fail_on_skip=True))
    skipped = strict.scenarios[1].cases[-1]
    assert skipped.status == FAILED and skipped.message.startswith("expected no skip (--fail-on-skip); skipped: no scenario of")
    assert strict.exit_code == EXIT_CHECKS_FAILED


# --- distval compare ----------------------------------------------------------------------------------------


def compare(tmp_path: Path, old: dict[str, Any], new: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    code = main(["compare", str(tmp_path / "old.json"), str(tmp_path / "new.json"), "--markdown", str(tmp_path / "cmp.md")])
    return code, capsys.readouterr().out, (tmp_path / "cmp.md").read_text()


def test_compare_fails_when_a_check_went_from_passed_to_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = report("old", entry(TWO_FIGURES, [case("env"), case("collectives.all_reduce")]))
    new = report("new", entry(TWO_FIGURES, [case("env"), case("collectives.all_reduce", FAILED)], status=FAILED))
    code, text, markdown = compare(tmp_path, old, new, capsys)
    assert code == EXIT_CHECKS_FAILED
    assert (
        "scenario bw: passed -> failed" in text
        and "scenario bw: testcase collectives.all\\_reduce passed -&gt; failed" in markdown
    )
    assert "verdict: regressed (exit code 1)" in text and "❌ regressed" in markdown
    # A check that ran and is gone (skipped checks are not compared): a worse verdict too.
    gone = report("new", entry(TWO_FIGURES, [case("env")]))
    code, text, _ = compare(tmp_path, old, gone, capsys)
    assert code == EXIT_CHECKS_FAILED and "testcase collectives.all_reduce passed in OLD and is gone from NEW" in text
    skipped = report("new", entry(TWO_FIGURES, [case("env"), case("collectives.all_reduce", SKIPPED)]))
    code, text, _ = compare(tmp_path, old, skipped, capsys)
    assert code == EXIT_CHECKS_FAILED and "testcase collectives.all_reduce passed -> skipped" in text
    # The other way round (failed -> passed) is no regression.
    code, text, _ = compare(tmp_path, new, old, capsys)
    assert code == EXIT_PASSED, text


def test_compare_fails_when_a_scenario_or_a_figure_vanished(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = report("old", entry(TWO_FIGURES, [case("env")]), entry(TWO_FIGURES, [case("env")], name="other"))
    new = report("new", entry(TWO_FIGURES, [case("env")]))
    code, text, markdown = compare(tmp_path, old, new, capsys)
    assert code == EXIT_CHECKS_FAILED
    assert "scenario other vanished: it is in OLD (passed) and not in NEW" in text and "scenario other vanished" in markdown
    fewer = report("new", entry(TWO_FIGURES[:1], [case("env")]), entry(TWO_FIGURES, [case("env")], name="other"))
    code, text, _ = compare(tmp_path, old, fewer, capsys)
    assert code == EXIT_CHECKS_FAILED and "scenario bw: figure(s) in OLD and not in NEW: busbw all_reduce 1MiB" in text
    # A scenario only in NEW is new: no regression.
    code, text, _ = compare(tmp_path, new, old, capsys)
    assert code == EXIT_PASSED, text


@pytest.mark.parametrize("side", ["old", "new"])
def test_compare_fails_when_a_side_is_empty_or_ended_early(side: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = report("good", entry(TWO_FIGURES, [case("env")]))
    empty = report("empty", early_error={"kind": "environment", "message": "cannot reach the Docker Engine"})
    old, new = (empty, good) if side == "old" else (good, empty)
    code, text, markdown = compare(tmp_path, old, new, capsys)
    assert code == EXIT_CHECKS_FAILED
    label = side.upper()
    assert f"{label} (run empty) has no scenario: nothing to compare" in text
    assert f"{label} (run empty) ended early: environment: cannot reach the Docker Engine" in text
    assert "has no scenario: nothing to compare" in markdown
    # Both empty: not "no figure regressed" and exit 0.
    code, text, _ = compare(tmp_path, empty, empty, capsys)
    assert code == EXIT_CHECKS_FAILED and "verdict: regressed" in text


def test_compare_markdown_escapes_what_the_reports_say() -> None:
    hostile = "<img src=x onerror=alert(1)>|`x`"
    old = report("old`run|<b>", entry(TWO_FIGURES, [case("env")], image="good|<img src=a>"))
    new = report(
        "new",
        entry(
            TWO_FIGURES, [case("env", status=hostile), case(f"check{hostile}")], image="bad*image*_x_", status=f"failed{hostile}"
        ),
    )
    markdown = render_comparison_markdown(compare_reports(old, new, Tolerances(), "old.json", "new.json"))
    assert "<img" not in markdown and "<b>" not in markdown
    assert "&lt;img src=x onerror=alert(1)&gt;\\|\\`x\\`" in markdown
    assert "old\\`run\\|&lt;b&gt;" in markdown  # the run id
    assert "bad\\*image\\*\\_x\\_" in markdown and "good\\|&lt;img src=a&gt;" in markdown  # image names
    for line in markdown.splitlines():
        if line.startswith("| ") and "check" in line:
            assert line.count("|") - line.count("\\|") == 6, line  # five cells: no cell broken by a "|"


def test_compare_text_keeps_escape_sequences_from_the_terminal() -> None:
    old = report("old\x1b]0;owned\x07", entry(TWO_FIGURES, [case("env")], image="img\x1b[2J"))
    new = report("new", entry(TWO_FIGURES, [case("env\x1b[31m", FAILED)], status=FAILED))
    text = render_comparison_text(compare_reports(old, new, Tolerances()))
    assert "\x1b" not in text and "\x07" not in text
    assert "img[2J" in text


# --- a report that is the baseline --------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["same path", "symlink", "hard link", "relative"])
def test_a_report_path_that_is_the_baseline_is_refused_before_anything_runs(
    how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG)
    good = tmp_path / "good.json"
    text = json.dumps(report("good", entry(TWO_FIGURES, [case("env")])))
    good.write_text(text)
    monkeypatch.chdir(tmp_path)
    target = {"same path": str(good), "relative": "good.json"}.get(how, str(tmp_path / "link.json"))
    if how == "symlink":
        os.symlink(good, target)
    elif how == "hard link":
        os.link(good, target)

    def no_engine(run_id: str) -> Any:
        raise AssertionError("the run started")

    args = build_parser().parse_args(["run", str(config), "--baseline", str(good), "--json", target])
    assert command_run(args, no_engine) == EXIT_BAD_INPUT
    assert f"--json {target} is the --baseline {good}: the run would overwrite it" in capsys.readouterr().err
    assert good.read_text() == text  # the baseline is untouched
    # A command line refused by the parser still writes its reports, but never over the baseline.
    assert main(["run", str(config), "--baseline", str(good), "--json", target, "--jobs", "many"]) == EXIT_BAD_INPUT
    assert "not writing --json: " in capsys.readouterr().err
    assert good.read_text() == text
    # Another file is fine: the run starts (and stops here, where no Engine is asked for).
    args = build_parser().parse_args(["run", str(config), "--sample-image", "--baseline", str(good), "--json", "new.json"])
    assert command_run(args, no_engine) == EXIT_INTERNAL  # the stand-in's AssertionError: distval's own failure
    assert "AssertionError: the run started" in capsys.readouterr().err
    assert good.read_text() == text


def test_compare_refuses_a_markdown_path_that_is_one_of_its_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = tmp_path / "old.json"
    text = json.dumps(report("old", entry(TWO_FIGURES, [case("env")])))
    old.write_text(text)
    os.symlink(old, tmp_path / "link.md")
    assert main(["compare", str(old), str(old), "--markdown", str(tmp_path / "link.md")]) == EXIT_BAD_INPUT
    assert "is the report" in capsys.readouterr().err and old.read_text() == text
