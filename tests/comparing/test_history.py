"""distval/comparing/history.py: N JSON reports -> runs in start order, the runs x checks matrix, each scenario's
figures, and the regressions with the run that introduced them; a malformed report is one line (BadReport)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from distval.comparing.history import (
    ABSENT,
    OUTPUT_DIR_JSON,
    OUTPUT_DIR_JUNIT,
    OUTPUT_DIR_MARKDOWN,
    Column,
    build_history,
    checked_report,
    read_history,
)
from distval.comparing.reading import BadReport
from distval.reports.json_report import json_report
from distval.session.reports import OUTPUT_NAMES
from tests.history_helpers import night, report, scenario, write_reports
from tests.report_helpers import summary


def test_the_output_dir_names_are_run_s() -> None:
    assert (OUTPUT_DIR_JSON, OUTPUT_DIR_JUNIT, OUTPUT_DIR_MARKDOWN) == (
        OUTPUT_NAMES["--json"],
        OUTPUT_NAMES["--junit"],
        OUTPUT_NAMES["--markdown"],
    )


def test_a_real_json_report_is_read() -> None:
    data = json.loads(json.dumps(json_report(summary())))
    checked_report("r.json", data)
    history = build_history([("r.json", data)])
    assert [(c.scenario, c.check) for c in history.columns][:3] == [
        ("inside", "env"),
        ("inside", "all_reduce"),
        ("inside", "exit_status"),
    ]
    assert [cell.status for cell in history.cells[0]] == ["passed"] * 3 + ["skipped", "failed", "error"]


def test_runs_are_ordered_by_start_time_whatever_the_order_given(tmp_path: Path) -> None:
    paths = write_reports(tmp_path, [night(3), night(1), night(2)])
    history = read_history(paths)
    assert [run.run_id for run in history.runs] == ["night1", "night2", "night3"]
    assert history.runs[0].date == "2026-12-01 02:00 UTC"
    assert history.runs[0].images == ("example/torch:nightly",)


def test_a_run_without_a_start_time_comes_last_in_the_order_given() -> None:
    undated = night(9)
    for s in undated["scenarios"]:
        s["started_at"] = None
    history = build_history([("u.json", undated), ("b.json", night(2)), ("a.json", night(1))])
    assert [run.run_id for run in history.runs] == ["night1", "night2", "night9"]
    assert history.runs[-1].date == "start unknown"


def test_a_check_that_passed_then_failed_names_the_first_failing_run() -> None:
    nights = [night(1), night(2, allreduce="failed"), night(3, allreduce="error"), night(4), night(5, allreduce="failed")]
    history = build_history([(f"{i}.json", r) for i, r in enumerate(nights)])
    column = history.columns.index(Column("inside", "all_reduce"))
    assert [row[column].regressed_since for row in history.cells] == [None, 1, 1, None, 4]
    assert [(r.last_pass, r.run, r.until) for r in history.check_regressions] == [(0, 1, 2), (3, 4, 4)]


def test_a_check_that_never_passed_is_no_regression_and_a_skip_does_not_end_one() -> None:
    def only(status: str) -> dict[str, Any]:
        return report("r", [scenario("s", [("c", status, "")])])

    history = build_history(
        [(str(i), r) for i, r in enumerate([only("failed"), only("passed"), only("skipped"), only("failed")])]
    )
    assert [row[0].regressed_since for row in history.cells] == [None, None, None, 3]
    assert history.check_regressions[0].last_pass == 1


def test_absent_scenarios_and_checks_are_absent_cells() -> None:
    one = report("a", [scenario("s", [("c", "passed", "")])])
    two = report("b", [scenario("s", [("d", "passed", "")]), scenario("t", [("c", "passed", "")])])
    history = build_history([("a", one), ("b", two)])
    assert [(c.scenario, c.check) for c in history.columns] == [("s", "c"), ("s", "d"), ("t", "c")]
    assert [cell.status for cell in history.cells[0]] == ["passed", ABSENT, ABSENT]


def test_a_busbw_drop_is_judged_as_compare_does_and_names_both_runs() -> None:
    history = build_history([("1", night(1)), ("2", night(2)), ("3", night(3, busbw_factor=0.5))])
    busbw = [r for r in history.figure_regressions if r.metric == "busbw"]
    # 4 KiB calls got slower by less than compare's 100 us slack: noise, not a regression.
    assert sorted(r.name for r in busbw) == ["all_gather 16MiB", "all_gather 1MiB", "all_reduce 16MiB", "all_reduce 1MiB"]
    assert {(r.previous_run, r.run) for r in busbw} == {(1, 2)}
    inside = history.trends[0]
    assert [p.regressed for p in inside.busbw[1].points] == [False, False, True]


def test_a_longer_time_to_verdict_is_a_regression() -> None:
    slow = night(2)
    slow["scenarios"][1]["duration_s"] = 60.0
    history = build_history([("1", night(1)), ("2", slow)])
    assert [(r.scenario, r.metric, r.old, r.new) for r in history.figure_regressions] == [
        ("across", "time to verdict", 30.0, 60.0)
    ]
    assert [p.regressed for p in history.trends[1].time_to_verdict.points] == [False, True]


def test_efficiency_is_plotted_only_where_recorded() -> None:
    history = build_history([("1", night(1, efficiency=False)), ("2", night(2))])
    inside, across = history.trends
    assert [len(s.points) for s in inside.efficiency] == [1] * 6
    assert across.efficiency == () and across.busbw == ()


def test_the_junit_and_markdown_beside_a_report_are_linked(tmp_path: Path) -> None:
    named, in_dir = write_reports(tmp_path, [night(1), night(2)], ["a/n1.json", f"b/{OUTPUT_DIR_JSON}"])
    (tmp_path / "a" / "n1.xml").write_text("<x/>")
    (tmp_path / "b" / OUTPUT_DIR_MARKDOWN).write_text("#")
    history = read_history([named, in_dir])
    assert (history.runs[0].junit, history.runs[0].markdown) == (str(tmp_path / "a" / "n1.xml"), None)
    assert (history.runs[1].junit, history.runs[1].markdown) == (None, str(tmp_path / "b" / OUTPUT_DIR_MARKDOWN))


def _broken(path: list[Any], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(night(1))
    target: Any = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (["run_id"], 5, "run_id: expected a string"),
        (["scenarios", 0, "name"], "", "scenarios[0].name: expected a name"),
        (["scenarios", 0, "name"], ["x"], "scenarios[0].name: expected a string"),
        (["scenarios", 0, "status"], "great", "scenarios[0].status"),
        (["scenarios", 0, "duration_s"], -1, "scenarios[0].duration_s: expected a number from 0 to 1e+07; got -1"),
        (["scenarios", 0, "duration_s"], True, "duration_s"),
        (["scenarios", 0, "started_at"], "yesterday", "started_at: expected an ISO 8601 time"),
        (["scenarios", 0, "cases"], {"a": 1}, "cases: expected a list of objects"),
        (["scenarios", 0, "cases", 0, "status"], "<b>", "cases[0].status"),
        (["scenarios", 0, "bandwidth", 0, "busbw_gbps"], 1e300, "bandwidth[0].busbw_gbps"),
        (["scenarios", 0, "bandwidth", 0, "busbw_gbps"], "3", "bandwidth[0].busbw_gbps"),
        (["scenarios", 0, "bandwidth", 0, "efficiency"], 100.5, "bandwidth[0].efficiency"),
        (["scenarios", 0, "bandwidth", 0, "efficiency"], 0, "bandwidth[0].efficiency"),
        (["early_error"], "x", "early_error: expected an object"),
    ],
)
def test_a_malformed_report_is_one_line_naming_the_field(path: list[Any], value: Any, said: str, tmp_path: Path) -> None:
    (file,) = write_reports(tmp_path, [_broken(path, value)])
    with pytest.raises(BadReport) as raised:
        read_history([file])
    message = str(raised.value)
    assert said in message and str(file) in message and "\n" not in message
    assert raised.value.exit_code == 2


@pytest.mark.parametrize(
    "text", ["", "[]", '{"schema_version": 2, "scenarios": []}', '{"schema_version": 1, "scenarios": [NaN]}']
)
def test_what_is_no_report_at_all_is_refused_like_compare_refuses_it(text: str, tmp_path: Path) -> None:
    file = tmp_path / "r.json"
    file.write_text(text)
    with pytest.raises(BadReport):
        read_history([file])
