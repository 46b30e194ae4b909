"""RunSummary -> JUnit XML (junit-xml), accepted by Jenkins xunit, GitLab and GitHub reporters.

One testsuite per scenario, named with its topology and world size; one testcase per check (the
failing ranks are named in the message), classname ``distval.<scenario>`` so GitLab's suite column
and its (classname, name) de-duplication stay stable. Rank logs go to the testsuite's system-out.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from harness.reports.files import write_atomically
from harness.results import ERROR, FAILED, SKIPPED, RunSummary, ScenarioResult, run_properties, suite_properties

MESSAGE_CHARS = 2000
SYSTEM_OUT_CHARS = 200_000


def _case(scenario: ScenarioResult, classname: str) -> list[TestCase]:
    cases = []
    for result in scenario.cases:
        case = TestCase(result.name, classname=classname, elapsed_sec=round(result.duration_s, 3))
        message = result.message[:MESSAGE_CHARS]
        if result.status == FAILED:
            case.add_failure_info(message=message, output=result.output or result.message, failure_type="check_failed")
        elif result.status == ERROR:
            case.add_error_info(message=message, output=result.output or result.message, error_type="check_error")
        elif result.status == SKIPPED:
            case.add_skipped_info(message=message)
        elif result.output:
            case.stdout = result.output
        cases.append(case)
    return cases


def _early_suite(summary: RunSummary, timestamp: str) -> TestSuite:
    kind, message = summary.early_error or ("error", "")
    case = TestCase(kind, classname="distval.run", elapsed_sec=0.0)
    case.add_error_info(message=message[:MESSAGE_CHARS], output=message, error_type=kind)
    return TestSuite(
        "distval run",
        [case],
        hostname=summary.host,
        timestamp=timestamp,
        properties=run_properties(summary),
    )


def render_junit(summary: RunSummary) -> str:
    timestamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    suites = []
    for scenario in summary.scenarios:
        properties = suite_properties(summary, scenario)
        logs = scenario.logs
        if len(logs) > SYSTEM_OUT_CHARS:
            logs = "(earlier output cut)\n" + logs[-SYSTEM_OUT_CHARS:]
        suites.append(
            TestSuite(
                scenario.plan.suite_name,
                _case(scenario, f"distval.{scenario.plan.scenario.name}"),
                hostname=summary.host,
                timestamp=timestamp,
                properties=properties,
                stdout=logs,
            )
        )
    if summary.early_error is not None:
        suites.append(_early_suite(summary, timestamp))
    text = to_xml_report_string(suites, prettyprint=True, encoding="utf-8")
    return _strict(text)


def _strict(text: str) -> str:
    """Drop the attributes junit-xml adds that Jenkins' xunit schema rejects (``disabled``)."""
    root = ET.fromstring(text)
    for element in root.iter():
        element.attrib.pop("disabled", None)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def write_junit(summary: RunSummary, path: str | Path) -> None:
    write_atomically(path, render_junit(summary))
