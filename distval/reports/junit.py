"""RunSummary -> JUnit XML, accepted by Jenkins xunit (its junit-10.xsd), GitLab and GitHub reporters.

One testsuite per scenario, one testcase per check (the failing ranks are named in the message). Rank logs go
to the testsuite's system-out. The reports of several images (one config run against each, in one CI job)
stay apart (docs: reports.md, "JUnit XML"):

* testsuite ``[<image>] <scenario> (<topology>, <layout>...)``; classname ``distval.<repository>.<scenario>``
  (the image without its tag or digest) with every dot inside the repository and the scenario written ``_``
  (Jenkins splits a classname at its dots into package and class: the package is ``distval.<repository>``, the
  class the scenario). ``--suite-prefix`` takes the image's place in both. The classname depends only on the
  repository (or prefix) and the scenario, not on the tag, which pipelines set to the commit: GitLab's
  (classname, name) de-duplication, its new/resolved failures and Jenkins' history see the same testcase in
  every run. Two images of one run that share a repository keep their whole references in it.
* A run that stopped early adds the testsuite ``[<image>] distval run`` with one error testcase (classname
  ``distval.<repository>.run``; several comma-separated, or the prefix; plain ``distval run`` when no
  image is known), so that two images' runs that stopped before any scenario stay apart as well.

What the consumers need (docs: reports.md, "JUnit XML"), built here with ElementTree:

* ``time`` on testsuites, every testsuite and every testcase, in seconds with exactly 3 decimals
  (junit-10.xsd allows at most 3; dorny/test-reporter needs it on each testcase). A testsuite's time is
  its scenario's wall-clock time; a testcase's is never more than its suite's, and ``exit_status`` (the
  verdict on the whole scenario) carries the part of it no other testcase does (start, launch,
  teardown), so a suite's testcases add up to its time. The testsuites' time is the run's wall-clock
  time, first scenario's start to last one's end (not the sum: scenarios run at once with --jobs).
* ``timestamp``: when the scenario started, in UTC without a zone (junit-10.xsd's form); the property
  ``started_at`` says the same with its zone (``...Z``).
* A failure's, error's or skip's reason both as ``message`` and as the element's text (GitLab shows
  only the text), followed there by the per-rank output.
* ``file`` (the config file) on every testsuite: reporters that find no ``file`` guess one from the last
  dot-segment of ``classname``. junit-10.xsd rejects ``file`` on a testcase, so it is on the testsuite,
  which mikepenz/action-junit-report falls back to.
* No attribute junit-10.xsd does not know (``disabled``, ``skipped`` on testsuites).
* Characters XML 1.0 cannot hold (control characters, lone surrogates, U+FFFE/U+FFFF from rank logs)
  are written as a visible escape (``\\x1b``, ``\\udc80``); a carriage return in text becomes a newline.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from distval.checks.catalog import FAULTS_CASE
from distval.reports.common import (
    identity_label,
    milliseconds,
    run_identity_label,
    run_label,
    run_properties,
    suite_name,
    suite_properties,
    utc_iso,
    wall_seconds,
)
from distval.reports.files import write_atomically
from distval.results.outcome import ERROR, EXIT_STATUS_CASE, FAILED, SKIPPED, CaseResult
from distval.results.scenario import RunSummary, ScenarioResult

MESSAGE_CHARS = 2000
SYSTEM_OUT_CHARS = 200_000

# Everything outside XML 1.0's Char production: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# Verdicts on the whole scenario, whose own time is the scenario's (case_times).
_WHOLE_SCENARIO = (EXIT_STATUS_CASE, FAULTS_CASE)
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


def _testcase(parent: ET.Element, case: CaseResult, classname: str, ms: int, kind: str | None = None) -> None:
    """``ms``: the testcase's time as the suite allots it; ``kind``: the outcome's ``type`` (default: check_failed,
    check_error or skipped)."""
    element = _element(parent, "testcase", {"name": case.name, "classname": classname, "time": format_time(ms)})
    if case.status in OUTCOMES:
        tag, default_kind = OUTCOMES[case.status]
        kind = kind or default_kind
        _element(element, tag, {"type": kind, "message": case.message[:MESSAGE_CHARS]}, _reason(case) or case.status)
    elif case.output:
        _element(element, "system-out", {}, case.output)


def case_times(cases: Sequence[CaseResult], suite_ms: int) -> list[int]:
    """Each testcase's time in ms: its own, at most the suite's; ``exit_status`` (whose own time is the whole
    scenario's) gets what the other testcases leave of the suite's time, so that they add up to it."""
    own = [min(milliseconds(case.duration_s), suite_ms) for case in cases]
    rest = max(0, suite_ms - sum(ms for case, ms in zip(cases, own, strict=True) if case.name not in _WHOLE_SCENARIO))
    times = []
    for case, ms in zip(cases, own, strict=True):
        if case.name == EXIT_STATUS_CASE:
            ms, rest = rest, 0
        elif case.name in _WHOLE_SCENARIO:
            ms = 0  # faults: its time is that of the checks it judged
        times.append(ms)
    return times


def _testsuite(
    root: ET.Element,
    name: str,
    cases: Iterable[tuple[CaseResult, str, str | None]],
    duration_s: float,
    summary: RunSummary,
    started_at: float | None,
    properties: Mapping[str, str],
    logs: str = "",
) -> int:
    cases = list(cases)
    counts = {status: sum(1 for case, _, _ in cases if case.status == status) for status in (FAILED, ERROR, SKIPPED)}
    ms = milliseconds(duration_s)
    started = datetime.now(timezone.utc).timestamp() if started_at is None else started_at
    attributes: dict[str, object] = {
        "name": name,
        "tests": len(cases),
        "failures": counts[FAILED],
        "errors": counts[ERROR],
        "skipped": counts[SKIPPED],
        "time": format_time(ms),
        # junit-10.xsd's timestamp has no zone: UTC, said with its zone in the property started_at.
        "timestamp": datetime.fromtimestamp(started, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
        "hostname": summary.host,
    }
    if summary.config_path:
        attributes["file"] = summary.config_path
    suite = _element(root, "testsuite", attributes)
    _properties(suite, {**properties, "started_at": utc_iso(started) or "unknown"})
    times = case_times([case for case, _, _ in cases], ms)
    for (case, classname, kind), case_ms in zip(cases, times, strict=True):
        _testcase(suite, case, classname, case_ms, kind)
    if logs:
        _element(suite, "system-out", {}, logs)
    return ms


def dotless(text: str) -> str:
    """``text`` with no dot, for a classname: Jenkins makes every dot a package separator."""
    return text.replace(".", "_")


def classnames(summary: RunSummary) -> list[str]:
    """Each scenario's classname, ``distval.<image or --suite-prefix>.<scenario>`` without inner dots. Two
    scenarios that only a dot and an underscore tell apart (``a.b``, ``a_b``) must not share one (GitLab keeps
    only the first of two equal (classname, name)): the later one gets ``_2``, ``_3``..."""
    names: list[str] = []
    for scenario in summary.scenarios:
        base = f"distval.{dotless(identity_label(summary, scenario))}.{dotless(scenario.plan.scenario.name)}"
        name, number = base, 1
        while name in names:
            number += 1
            name = f"{base}_{number}"
        names.append(name)
    return names


def render_junit(summary: RunSummary) -> str:
    root = ET.Element("testsuites")
    total_ms = 0
    all_cases: list[CaseResult] = []
    for scenario, classname in zip(summary.scenarios, classnames(summary), strict=True):
        total_ms += _scenario_suite(root, summary, scenario, classname)
        all_cases += scenario.cases
    if summary.early_error is not None:
        kind, message = summary.early_error
        case = CaseResult(kind, ERROR, message, 0.0)
        # Named like the scenarios' suites (the image, or --suite-prefix), so that the reports of different images
        # that stopped early stay apart too.
        label, identity = run_label(summary), run_identity_label(summary)
        name, classname = ("distval run", "distval.run")
        if label is not None and identity is not None:
            name, classname = f"[{label}] distval run", f"distval.{dotless(identity)}.run"
        early: list[tuple[CaseResult, str, str | None]] = [(case, classname, kind)]
        total_ms += _testsuite(root, name, early, 0.0, summary, None, run_properties(summary))
        all_cases.append(case)
    wall = wall_seconds(summary.scenarios)
    root.attrib = {
        "tests": str(len(all_cases)),
        "failures": str(sum(1 for c in all_cases if c.status == FAILED)),
        "errors": str(sum(1 for c in all_cases if c.status == ERROR)),
        # The run's wall-clock time; where a scenario's start is unknown (collect kubernetes), the suites' sum.
        "time": format_time(total_ms if wall is None else milliseconds(wall)),
    }
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _scenario_suite(root: ET.Element, summary: RunSummary, scenario: ScenarioResult, classname: str) -> int:
    logs = scenario.logs
    if len(logs) > SYSTEM_OUT_CHARS:
        logs = "(earlier output cut)\n" + logs[-SYSTEM_OUT_CHARS:]
    return _testsuite(
        root,
        suite_name(summary, scenario),
        [(case, classname, None) for case in scenario.cases],
        scenario.duration_s,
        summary,
        scenario.started_at,
        suite_properties(summary, scenario),
        logs,
    )


def write_junit(summary: RunSummary, path: str | Path) -> None:
    write_atomically(path, render_junit(summary))
