"""RunSummary -> JUnit XML, accepted by Jenkins xunit (its junit-10.xsd), GitLab and GitHub reporters.

One testsuite per scenario, named with its topology and world size; one testcase per check (the
failing ranks are named in the message), classname ``distval.<scenario>`` so GitLab's suite column
and its (classname, name) de-duplication stay stable. Rank logs go to the testsuite's system-out.

What the consumers need (docs: field notes, "JUnit consumers"), built here with ElementTree:

* ``time`` on testsuites, every testsuite and every testcase, in seconds with exactly 3 decimals
  (junit-10.xsd allows at most 3; dorny/test-reporter needs it on each testcase). A testsuite's time is
  its scenario's wall-clock time; the testsuites' time is their sum, added in whole milliseconds.
* A failure's, error's or skip's reason both as ``message`` and as the element's text (GitLab shows
  only the text), followed there by the per-rank output.
* ``file`` (the config file) on every testsuite: reporters that find no ``file`` guess one from the last
  dot-segment of ``classname``, which mangles matrix names such as ``ddp-torch2.6``. junit-10.xsd
  rejects ``file`` on a testcase, so it is on the testsuite, which mikepenz/action-junit-report falls
  back to.
* No attribute junit-10.xsd does not know (``disabled``, ``skipped`` on testsuites).
* Characters XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/U+FFFF from rank logs)
  are written as a visible escape (``\\x1b``, ``\\udc80``); a carriage return in text becomes a newline.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path

from distval.reports.common import milliseconds
from distval.reports.files import write_atomically
from distval.results.outcome import ERROR, FAILED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult, run_properties, suite_properties

MESSAGE_CHARS = 2000
SYSTEM_OUT_CHARS = 200_000

# Everything outside XML 1.0's Char production: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
OUTCOMES = {FAILED: ("failure", "check_failed"), ERROR: ("error", "check_error"), SKIPPED: ("skipped", "skipped")}


def xml_text(value: object) -> str:
    """``value`` as text XML can hold: each character it forbids becomes a visible escape, e.g. ``\\x1b``."""
    return _NOT_XML.sub(lambda m: m.group().encode("unicode_escape", "backslashreplace").decode("ascii"), str(value))


def _content(value: str) -> str:
    """Element text: XML parsers turn a raw carriage return into a newline, so write it as one."""
    return xml_text(value).replace("\r\n", "\n").replace("\r", "\n")


def format_time(ms: int) -> str:
    """``1234`` -> ``1.234``: the form junit-10.xsd's SUREFIRE_TIME allows (no exponent, at most 3 decimals)."""
    return f"{ms // 1000}.{ms % 1000:03d}"


def _element(parent: ET.Element, tag: str, attributes: Mapping[str, object], text: str | None = None) -> ET.Element:
    element = ET.SubElement(parent, tag, {key: xml_text(value) for key, value in attributes.items()})
    if text:
        element.text = _content(text)
    return element


def _properties(parent: ET.Element, properties: Mapping[str, str]) -> None:
    holder = ET.SubElement(parent, "properties")
    for name, value in properties.items():
        _element(holder, "property", {"name": name, "value": value})


def _reason(case: CaseResult) -> str:
    """The element text of a failure, error or skip: the reason, then each rank's output when it says more."""
    output = case.output.strip("\n")
    if not output or output == case.message:
        return case.message
    return f"{case.message}\n\n{output}"


def _testcase(parent: ET.Element, case: CaseResult, classname: str, kind: str | None = None) -> int:
    """``kind``: the outcome's ``type`` (default: check_failed, check_error or skipped)."""
    ms = milliseconds(case.duration_s)
    element = _element(parent, "testcase", {"name": case.name, "classname": classname, "time": format_time(ms)})
    if case.status in OUTCOMES:
        tag, default_kind = OUTCOMES[case.status]
        kind = kind or default_kind
        _element(element, tag, {"type": kind, "message": case.message[:MESSAGE_CHARS]}, _reason(case) or case.status)
    elif case.output:
        _element(element, "system-out", {}, case.output)
    return ms


def _testsuite(
    root: ET.Element,
    name: str,
    cases: Iterable[tuple[CaseResult, str, str | None]],
    duration_s: float,
    summary: RunSummary,
    timestamp: str,
    properties: Mapping[str, str],
    logs: str = "",
) -> int:
    cases = list(cases)
    counts = {status: sum(1 for case, _, _ in cases if case.status == status) for status in (FAILED, ERROR, SKIPPED)}
    ms = milliseconds(duration_s)
    attributes: dict[str, object] = {
        "name": name,
        "tests": len(cases),
        "failures": counts[FAILED],
        "errors": counts[ERROR],
        "skipped": counts[SKIPPED],
        "time": format_time(ms),
        "timestamp": timestamp,
        "hostname": summary.host,
    }
    if summary.config_path:
        attributes["file"] = summary.config_path
    suite = _element(root, "testsuite", attributes)
    _properties(suite, properties)
    for case, classname, kind in cases:
        _testcase(suite, case, classname, kind)
    if logs:
        _element(suite, "system-out", {}, logs)
    return ms


def render_junit(summary: RunSummary) -> str:
    timestamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    root = ET.Element("testsuites")
    total_ms = 0
    all_cases: list[CaseResult] = []
    for scenario in summary.scenarios:
        total_ms += _scenario_suite(root, summary, scenario, timestamp)
        all_cases += scenario.cases
    if summary.early_error is not None:
        kind, message = summary.early_error
        case = CaseResult(kind, ERROR, message, 0.0)
        early: list[tuple[CaseResult, str, str | None]] = [(case, "distval.run", kind)]
        total_ms += _testsuite(root, "distval run", early, 0.0, summary, timestamp, run_properties(summary))
        all_cases.append(case)
    root.attrib = {
        "tests": str(len(all_cases)),
        "failures": str(sum(1 for c in all_cases if c.status == FAILED)),
        "errors": str(sum(1 for c in all_cases if c.status == ERROR)),
        "time": format_time(total_ms),
    }
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _scenario_suite(root: ET.Element, summary: RunSummary, scenario: ScenarioResult, timestamp: str) -> int:
    logs = scenario.logs
    if len(logs) > SYSTEM_OUT_CHARS:
        logs = "(earlier output cut)\n" + logs[-SYSTEM_OUT_CHARS:]
    classname = f"distval.{scenario.plan.scenario.name}"
    return _testsuite(
        root,
        scenario.plan.suite_name,
        [(case, classname, None) for case in scenario.cases],
        scenario.duration_s,
        summary,
        timestamp,
        suite_properties(summary, scenario),
        logs,
    )


def write_junit(summary: RunSummary, path: str | Path) -> None:
    write_atomically(path, render_junit(summary))
