"""Every report is written whatever the image under test wrote: a record with NaN, Infinity or a 400-digit
number is its rank's error and every report still renders (valid JSON, no NaN); and each report writer is on
its own, so that a bug in one costs none of the others and makes the exit non-zero."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

import distval.cli.run
import distval.session.reports
from distval.comparing.reading import BadReport, read_report
from distval.reports.json_report import render_json
from distval.reports.junit import render_junit
from distval.reports.markdown import render_markdown
from distval.reports.summary import render_summary
from distval.results.outcome import ERROR, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, summarize_scenario
from tests.fake_engine import FakeEngine
from tests.report_helpers import RUN_ID, plans, run
from tests.results.test_records import good

# -- end to end: a hostile record, then every report ------------------------------------------------------


def line(record: dict[str, Any]) -> str:
    return json.dumps(record)  # Python writes NaN, Infinity and long integers as the suite's json would


@pytest.mark.parametrize(
    "hostile",
    [
        {"busbw_gbps": math.nan},
        {"busbw_gbps": math.inf, "algbw_gbps": math.inf},
        {"busbw_gbps": 10**400},
        {"time_us": -math.inf},
    ],
    ids=["nan", "infinity", "huge", "minus-infinity"],
)
def test_a_hostile_record_is_its_ranks_error_and_every_report_is_still_written(hostile: dict[str, Any]) -> None:
    inside, _ = plans()
    bad = good(1)
    bad["details"]["figures"][1].update(hostile)
    files = {"rank-0.jsonl": (line(good(0)) + "\n").encode(), "rank-1.jsonl": (line(bad) + "\n").encode()}
    container = inside.containers[0]
    outcome = ScenarioOutcome(
        inside,
        "sha256:1",
        1.0,
        (ContainerOutcome(container.name, container.node_rank, container.ranks, 0, False, "", "", files),),
    )
    result = summarize_scenario(outcome)
    cases = {c.name: c for c in result.cases}
    assert cases["bandwidth.all_reduce"].status == ERROR
    assert "rank 1: distval refused this rank's record" in cases["bandwidth.all_reduce"].message
    assert "details.figures[1]" in cases["results"].message and result.status == ERROR
    summary = RunSummary(RUN_ID, (result,), host="h", config_path="c.yaml")
    text = render_json(summary)
    assert "NaN" not in text and "Infinity" not in text and json.loads(text)["exit_code"] == 1
    ET.fromstring(render_junit(summary))
    assert "bandwidth" in render_markdown(summary)
    assert "exit code 1" in render_summary(summary)


# -- each report writer on its own -------------------------------------------------------------------------


def broken(*args: Any, **kwargs: Any) -> None:
    raise ValueError("Out of range float values are not JSON compliant")  # what json.dumps(allow_nan=False) raises


@pytest.mark.parametrize("writer", ["write_junit", "write_json", "write_markdown"])
def test_a_writer_that_fails_costs_no_other_report_and_the_exit_is_not_zero(
    fake_docker: Path,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    writer: str,
) -> None:
    monkeypatch.setattr(distval.session.reports, writer, broken)
    step_summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    code = run(fake_docker, tmp_path, "--quiet", "--filter", "inside", "--markdown", str(tmp_path / "r.md"))
    assert code != 0  # every check passed: only the lost report makes it fail
    captured = capsys.readouterr()
    (error,) = [e for e in captured.err.splitlines() if "was not written" in e]
    assert "internal error (a bug in distval" in error and "ValueError" in error
    assert captured.out.splitlines()[-1].startswith(f"distval run {RUN_ID}: ")
    written = {"write_junit": "r.xml", "write_json": "r.json", "write_markdown": "r.md"}
    for name, file_name in written.items():
        assert (tmp_path / file_name).exists() == (name != writer)
    assert "distval: passed" in step_summary.read_text(encoding="utf-8")
    assert FakeEngine.instances  # the run itself happened


# -- a JSON report read back (compare, --baseline) ----------------------------------------------------------


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e999", "1" * 400])
def test_a_report_with_a_number_no_writer_can_write_is_refused_when_read(tmp_path: Path, number: str) -> None:
    report = tmp_path / "old.json"
    text = json.dumps({"schema_version": 1, "scenarios": [{"name": "s", "bandwidth": [{"busbw_gbps": 1.0}]}]})
    report.write_text(text.replace("1.0", number), encoding="utf-8")
    where = r"the report.scenarios\[0\].bandwidth\[0\].busbw_gbps is"
    with pytest.raises(BadReport, match=f"not a usable distval JSON report: {where}"):
        read_report(report)


def test_a_report_nested_past_jsons_own_depth_is_refused_not_a_crash(tmp_path: Path) -> None:
    report = tmp_path / "deep.json"
    report.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    with pytest.raises(BadReport, match="is not JSON"):
        read_report(report)


def test_diagnosis_files_with_numbers_no_writer_can_write_are_not_read() -> None:
    """The flight recorder, launch facts and error file are the image's JSON too (distval/results/diagnosis.py)."""
    inside, _ = plans()
    entry = {"collective_seq_id": math.nan, "record_id": math.inf, "profiling_name": "gloo:all_reduce", "state": "scheduled"}
    files = {
        "rank-0.jsonl": (json.dumps(good(0)) + "\n").encode(),
        "rank-1.jsonl": (json.dumps(good(1)) + "\n").encode(),
        "flight-recorder-rank-1.json": json.dumps({"available": True, "entries": [entry], "took_s": math.nan}).encode(),
        "launch-rank-0.json": json.dumps({"restart_count": math.inf, "use_agent_store": True}).encode(),
        "torchelastic-error.json": json.dumps({"message": {"message": "boom", "extraInfo": {"timestamp": math.nan}}}).encode(),
        "stacks-report.json": ("[" * 100_000).encode(),  # past json's own depth: RecursionError, not ValueError
        "launch-rank-1.json": ("[" * 100_000).encode(),
    }
    c = inside.containers[0]
    outcome = ScenarioOutcome(inside, "sha256:1", 1.0, (ContainerOutcome(c.name, c.node_rank, c.ranks, 1, False, "", "", files),))
    summary = RunSummary(RUN_ID, (summarize_scenario(outcome),), host="h", config_path="c.yaml")
    text = render_json(summary)
    assert "NaN" not in text and "Infinity" not in text


def test_a_record_line_nested_past_jsons_depth_is_an_unreadable_line_not_a_crash() -> None:
    inside, _ = plans()
    files = {"rank-0.jsonl": (json.dumps(good(0)) + "\n" + "[" * 100_000 + "\n").encode()}
    c = inside.containers[0]
    outcome = ScenarioOutcome(inside, "sha256:1", 1.0, (ContainerOutcome(c.name, c.node_rank, c.ranks, 0, False, "", "", files),))
    cases = {case.name: case for case in summarize_scenario(outcome).cases}
    assert cases["results"].message.endswith("rank-0.jsonl:2: unreadable result line (nested more than 100 levels deep)")


def test_html_is_refused_only_where_its_renderer_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(distval.session.reports.charts, "available", lambda: True)
    assert distval.session.reports.html_refusal() is None
    monkeypatch.setattr(distval.session.reports.charts, "available", lambda: False)
    assert "pip install 'distval[html]'" in (distval.session.reports.html_refusal() or "")


def test_an_html_path_is_refused_for_what_it_names_or_for_a_missing_renderer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    refused_reports, ReportPaths = distval.session.reports.refused_reports, distval.session.reports.ReportPaths
    page = str(tmp_path / "run.html")
    monkeypatch.setattr(distval.session.reports.charts, "available", lambda: True)
    assert refused_reports(ReportPaths(html=page), []) == []
    assert refused_reports(ReportPaths(), []) == []
    ((option, path, reason),) = refused_reports(ReportPaths(html=str(tmp_path)), [])  # a directory
    assert (option, path) == ("--html", str(tmp_path)) and reason
    monkeypatch.setattr(distval.session.reports.charts, "available", lambda: False)
    ((option, path, reason),) = refused_reports(ReportPaths(html=page), [])
    assert (option, path) == ("--html", page) and "vl-convert-python" in reason
