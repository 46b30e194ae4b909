"""distval.reports.junit: a RunSummary -> JUnit XML that Jenkins' xunit schema accepts, and that says what happened."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import JUnitXml
from lxml import etree

import distval.reports.junit
from distval import __version__
from distval.config import parse_config
from distval.plan.identity import scenario_hash, with_hashes
from distval.plan.model import ScenarioPlan
from distval.reports.junit import MESSAGE_CHARS, SYSTEM_OUT_CHARS, render_junit, write_junit, xml_text
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult, ContainerOutcome, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult, summarize_scenario
from distval.targets.engines.planning import plan_scenario
from tests.paths import GOLDEN, SCHEMAS

SCHEMA_PATH = SCHEMAS / "junit-10.xsd"
GOLDEN_JUNIT = GOLDEN / "reports" / "junit.xml"
VERSION_MARK = "@DISTVAL_VERSION@"  # the golden holds this instead of harness.__version__
# Masked in the golden: the time of rendering, and the scenario hashes (test_properties checks those).
MASKS = (
    (re.compile(r'timestamp="[0-9T:-]+"'), 'timestamp="T"'),
    (re.compile(r'"started_at" value="[0-9T:.-]+Z"'), '"started_at" value="T"'),
    (re.compile(r'"scenario_hash" value="[0-9a-f]{12}"'), '"scenario_hash" value="H"'),
    (re.compile(r'"scenario_hash_any_image" value="[0-9a-f]{12}"'), '"scenario_hash_any_image" value="H"'),
)
RUN_ID = "5eed5eed"
IMAGE = "example/torch:test"
REPOSITORY = "example/torch"  # IMAGE without its tag: what the classnames name
# The testsuites name the image (docs/reports.md): one config run against several images keeps them apart.
INSIDE = f"[{IMAGE}] inside (in-container, 2 ranks)"
ACROSS = f"[{IMAGE}] across (cross-container, 2x1, 2 ranks, static)"
EARLY = f"[{IMAGE}] distval run"  # the run stopped after its scenarios: named by their image
ENGINE_VERSION = "27.5.1"
STARTED = 1_780_000_000.125  # 2026-05-28T20:26:40.125Z: when the first scenario of the summary fixture started
HOST = "ci-runner-7"
CONFIG_PATH = "configs/junit.yaml"
FAIL_MESSAGE = (
    "all_reduce(SUM) of rank+1 over 2 ranks: expected 3.0 in every element, got 2.0 at element 0 (1 of 1 elements wrong)"
)
CONFIG = """\
scenarios:
  - name: inside
    topology: in-container
    world_size: 2
    checks: [env, all_reduce]
  - name: across
    topology: cross-container
    world_size: 2
    timeout_s: 90
    checks: [env, all_reduce]
"""


@pytest.fixture(scope="module")
def schema() -> etree.XMLSchema:
    return etree.XMLSchema(etree.parse(str(SCHEMA_PATH)))


def line(check: str, rank: int, status: str, message: str, **details: Any) -> str:
    record = {"check": check, "rank": rank, "status": status, "message": message, "duration_s": 0.125, "details": details}
    return json.dumps(record) + "\n"


def env_line(rank: int, status: str = PASSED, message: str = "torch 2.6.0, Python 3.11.2", cuda: str | None = None) -> str:
    return line("env", rank, status, message, torch_version="2.6.0", python_version="3.11.2", cuda_version=cuda)


def outcome(plan: ScenarioPlan, index: int, text: str, **kwargs: Any) -> ContainerOutcome:
    cp = plan.containers[index]
    defaults: dict[str, Any] = {"exit_code": 0, "killed_at_deadline": False, "stdout": "", "stderr": ""}
    defaults.update(kwargs)
    files = {f"rank-{r}.jsonl": text.encode() for r in cp.ranks} if text else {}
    return ContainerOutcome(cp.name, cp.node_rank, cp.ranks, result_files=files, **defaults)


def scenarios() -> tuple[ScenarioResult, ScenarioResult]:
    inside_s, across_s = parse_config(CONFIG, "junit.yaml").scenarios
    inside = with_hashes(plan_scenario(inside_s, RUN_ID, "example/torch:test"))
    across = with_hashes(plan_scenario(across_s, RUN_ID, "example/torch:test"))
    # inside: env passed on both ranks, all_reduce failed on rank 1.
    inside_text = env_line(0) + env_line(1) + line("all_reduce", 0, PASSED, "ok") + line("all_reduce", 1, FAILED, FAIL_MESSAGE)
    inside_result = summarize_scenario(
        ScenarioOutcome(
            inside,
            "sha256:inside",
            4.25,
            (outcome(inside, 0, inside_text, stdout="distval: rank 0 env passed\nINSIDE-STDOUT", stderr="INSIDE-STDERR"),),
        )
    )
    # across: env skipped on every rank, all_reduce: rank 1 killed at the deadline before writing anything.
    across_result = summarize_scenario(
        ScenarioOutcome(
            across,
            "sha256:across",
            90.5,
            (
                outcome(
                    across, 0, env_line(0, SKIPPED, "no CUDA", "12.8") + line("all_reduce", 0, PASSED, "ok"), stdout="ACROSS-0"
                ),
                outcome(
                    across,
                    1,
                    env_line(1, SKIPPED, "no CUDA", "12.8"),
                    exit_code=137,
                    killed_at_deadline=True,
                    stdout="ACROSS-1 hung",
                ),
            ),
        )
    )
    assert [c.status for c in inside_result.cases] == [PASSED, FAILED, PASSED]
    assert [c.status for c in across_result.cases] == [SKIPPED, ERROR, ERROR]
    return inside_result, across_result


@pytest.fixture(scope="module")
def summary() -> RunSummary:
    inside, across = scenarios()
    # across started 1 s after inside, and the two ran at once (--jobs): the run took 91.5 s, not 4.25 + 90.5.
    started = (dataclasses.replace(inside, started_at=STARTED), dataclasses.replace(across, started_at=STARTED + 1.0))
    return RunSummary(
        RUN_ID,
        started,
        early_error=("interrupted", "interrupted by SIGTERM; cleaned up"),
        early_exit_code=143,
        engine_version=ENGINE_VERSION,
        host=HOST,
        config_path=CONFIG_PATH,
    )


@pytest.fixture(scope="module")
def report(summary: RunSummary) -> str:
    return render_junit(summary)


@pytest.fixture(scope="module")
def root(report: str) -> ET.Element:
    return ET.fromstring(report)


def suite_named(root: ET.Element, name: str) -> ET.Element:
    found = [s for s in root.findall("testsuite") if s.get("name") == name]
    assert len(found) == 1, [s.get("name") for s in root.findall("testsuite")]
    return found[0]


def properties(suite: ET.Element) -> dict[str, str | None]:
    return {p.get("name") or "": p.get("value") for p in suite.findall("properties/property")}


# --- content --------------------------------------------------------------------------------------


def test_document_shape(report: str, root: ET.Element) -> None:
    assert report.startswith('<?xml version="1.0" encoding="utf-8"?>\n')
    assert root.tag == "testsuites"
    assert [s.get("name") for s in root.findall("testsuite")] == [
        INSIDE,
        ACROSS,
        EARLY,
    ]
    # 3 + 3 + 1 cases: one failure (all_reduce inside), errors: all_reduce and exit_status across, the early error.
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("7", "1", "3")
    assert "disabled" not in report


def test_testcases_and_classnames(root: ET.Element) -> None:
    inside = suite_named(root, INSIDE)
    across = suite_named(root, ACROSS)
    assert [(c.get("name"), c.get("classname")) for c in inside.findall("testcase")] == [
        ("env", "distval.example/torch.inside"),
        ("all_reduce", "distval.example/torch.inside"),
        ("exit_status", "distval.example/torch.inside"),
    ]
    assert [(c.get("name"), c.get("classname")) for c in across.findall("testcase")] == [
        ("env", "distval.example/torch.across"),
        ("all_reduce", "distval.example/torch.across"),
        ("exit_status", "distval.example/torch.across"),
    ]
    assert (inside.get("tests"), inside.get("failures"), inside.get("errors"), inside.get("skipped")) == ("3", "1", "0", "0")
    assert (across.get("tests"), across.get("failures"), across.get("errors"), across.get("skipped")) == ("3", "0", "2", "1")


def test_passed_case_has_no_outcome_element(root: ET.Element) -> None:
    env = suite_named(root, INSIDE).find("testcase[@name='env']")
    assert env is not None
    assert env.find("failure") is None and env.find("error") is None and env.find("skipped") is None
    assert env.get("time") == "0.125"
    out = env.find("system-out")
    assert out is not None and "rank 1: passed: torch 2.6.0" in (out.text or "")


def test_failure_names_rank_expected_and_got(root: ET.Element) -> None:
    case = suite_named(root, INSIDE).find("testcase[@name='all_reduce']")
    assert case is not None
    failure = case.find("failure")
    assert failure is not None
    assert failure.get("type") == "check_failed"
    message = failure.get("message") or ""
    assert message == f"rank 1: {FAIL_MESSAGE}"
    assert "expected 3.0" in message and "got 2.0" in message
    assert "rank 0: passed: ok" in (failure.text or "")
    assert case.find("error") is None


def test_error_names_the_missing_rank_and_the_deadline(root: ET.Element) -> None:
    across = suite_named(root, ACROSS)
    case = across.find("testcase[@name='all_reduce']")
    assert case is not None
    error = case.find("error")
    assert error is not None and error.get("type") == "check_error"
    message = error.get("message") or ""
    assert message.startswith("no result from rank(s) 1: ")
    assert "90 s deadline" in message
    assert "ACROSS-1 hung" in (error.text or "")
    exit_status = across.find("testcase[@name='exit_status']/error")
    assert exit_status is not None
    assert (exit_status.get("message") or "").startswith("expected every container to exit 0 within the deadline")


def test_skipped_case(root: ET.Element) -> None:
    skipped = suite_named(root, ACROSS).find("testcase[@name='env']/skipped")
    assert skipped is not None
    assert skipped.get("message") == "no CUDA"


def test_properties(root: ET.Element) -> None:
    inside, across_result = scenarios()
    assert properties(suite_named(root, INSIDE)) == {
        "image": "example/torch:test",
        "image_id": "sha256:inside",
        "backend": "gloo",
        "topology": "in-container",
        "world_size": "2",
        "torch_version": "2.6.0",
        "python_version": "3.11.2",
        "cuda_version": "none",  # the env check reported cuda_version null: a CPU build
        "scenario_hash": scenario_hash(inside.plan),
        "scenario_hash_any_image": scenario_hash(inside.plan, any_image=True),
        "run_id": RUN_ID,
        "distval_version": __version__,
        "docker_engine_version": ENGINE_VERSION,
        "host": HOST,
        "mode": "docker",
        "started_at": "2026-05-28T20:26:40.125Z",
        "sample_image": "false",  # the scenario named its image
    }
    across = properties(suite_named(root, ACROSS))
    assert (across["topology"], across["image_id"], across["torch_version"]) == ("cross-container", "sha256:across", "2.6.0")
    assert across["cuda_version"] == "12.8"
    assert across["scenario_hash"] == scenario_hash(across_result.plan) != scenario_hash(inside.plan)
    assert len(across["scenario_hash"] or "") == 12
    assert (across["docker_engine_version"], across["host"]) == (ENGINE_VERSION, HOST)


def test_hostname_attribute_is_the_summary_host(root: ET.Element) -> None:
    assert {s.get("hostname") for s in root.findall("testsuite")} == {HOST}


def test_engine_version_unknown_without_an_engine(schema: etree.XMLSchema) -> None:
    report = render_junit(RunSummary(RUN_ID, (), ("environment", "cannot reach the Docker Engine"), 3, host=HOST))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    assert properties(suite_named(ET.fromstring(report), "distval run"))["docker_engine_version"] == "unknown"


def test_system_out_holds_the_logs(root: ET.Element) -> None:
    inside = suite_named(root, INSIDE)
    out = inside.find("system-out")
    assert out is not None
    text = out.text or ""
    assert "===== distval-5eed5eed-inside-n0 (node 0, ranks 0,1) stdout =====" in text
    assert "INSIDE-STDOUT" in text and "INSIDE-STDERR" in text
    across = suite_named(root, ACROSS).find("system-out")
    assert across is not None and "ACROSS-0" in (across.text or "") and "ACROSS-1 hung" in (across.text or "")


def test_early_error_suite(root: ET.Element) -> None:
    suite = suite_named(root, EARLY)
    (case,) = suite.findall("testcase")
    assert (case.get("name"), case.get("classname")) == ("interrupted", f"distval.{REPOSITORY}.run")
    error = case.find("error")
    assert error is not None
    assert (error.get("type"), error.get("message")) == ("interrupted", "interrupted by SIGTERM; cleaned up")
    found = properties(suite)
    assert re.fullmatch(r"20[0-9]{2}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z", found.pop("started_at") or "")
    assert found == {
        "run_id": RUN_ID,
        "distval_version": __version__,
        "docker_engine_version": ENGINE_VERSION,
        "host": HOST,
        "mode": "docker",
    }


def test_control_characters_and_long_logs(schema: etree.XMLSchema) -> None:
    inside, _ = scenarios()
    noisy = "\x1b[31mred\x1b[0m \x00\x07 tail-marker"
    logs = "HEAD-MARKER\n" + "x" * (SYSTEM_OUT_CHARS + 10) + noisy
    result = ScenarioResult(inside.plan, inside.cases, inside.properties, logs, inside.duration_s)
    report = render_junit(RunSummary(RUN_ID, (result,)))
    root = ET.fromstring(report)  # parses: illegal XML characters were dropped
    out = root.find("testsuite/system-out")
    assert out is not None and out.text is not None
    assert out.text.startswith("(earlier output cut)\n")
    assert "HEAD-MARKER" not in out.text
    assert "tail-marker" in out.text
    assert schema.validate(etree.fromstring(report.encode()))


MULTI_CONFIG = """\
scenarios:
  - name: multi
    topology: in-container
    world_size: 2
    checks:
      - env
      - identity
      - {name: collectives, required: true}
"""


def case_line(check: str, case: str, rank: int, status: str, message: str) -> str:
    record = {"check": check, "case": case, "rank": rank, "status": status, "message": message, "duration_s": 0.5}
    return json.dumps(record) + "\n"


def test_cases_of_a_check_and_a_required_skip(schema: etree.XMLSchema) -> None:
    (scenario,) = parse_config(MULTI_CONFIG, "multi.yaml").scenarios
    plan = with_hashes(plan_scenario(scenario, RUN_ID, "example/torch:test"))
    text = "".join(
        env_line(rank)
        + case_line("identity", "identity", rank, SKIPPED, "the scenario states nothing about the image")
        + case_line("process_group", "process_group", rank, PASSED, "formed a group of 2 ranks")
        + case_line("collectives", "collectives.broadcast", rank, PASSED, "1 run correct (repeat 1)")
        + case_line("collectives", "collectives.gather_object", rank, SKIPPED, "not supported by this image: numpy")
        for rank in (0, 1)
    )
    result = summarize_scenario(ScenarioOutcome(plan, "sha256:multi", 2.0, (outcome(plan, 0, text),)))
    report = render_junit(RunSummary(RUN_ID, (result,)))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    suite = suite_named(ET.fromstring(report), "[example/torch:test] multi (in-container, 2 ranks)")
    assert [(c.get("name"), c.get("classname")) for c in suite.findall("testcase")] == [
        ("env", "distval.example/torch.multi"),
        ("identity", "distval.example/torch.multi"),
        ("process_group", "distval.example/torch.multi"),
        ("collectives.broadcast", "distval.example/torch.multi"),
        ("collectives.gather_object", "distval.example/torch.multi"),
        ("exit_status", "distval.example/torch.multi"),
    ]
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors"), suite.get("skipped")) == ("6", "1", "0", "1")
    assert suite.find("testcase[@name='identity']/skipped") is not None
    failure = suite.find("testcase[@name='collectives.gather_object']/failure")
    assert failure is not None and failure.get("type") == "check_failed"
    assert failure.get("message") == (
        "expected required check collectives to run; it was skipped: not supported by this image: numpy"
    )
    assert suite.find("testcase[@name='collectives.broadcast']/failure") is None


def test_report_matches_golden(report: str) -> None:
    """The whole document, byte for byte (what MASKS names masked); regenerate after an intended change with
    DISTVAL_UPDATE_GOLDEN=1 and review the diff of tests/golden/reports/junit.xml."""
    text = report
    for pattern, replacement in MASKS:
        text, count = pattern.subn(replacement, text)
        assert count >= 2, pattern
    if os.environ.get("DISTVAL_UPDATE_GOLDEN") == "1":
        GOLDEN_JUNIT.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN_JUNIT.write_text(text.replace(__version__, VERSION_MARK), encoding="utf-8")
    assert GOLDEN_JUNIT.exists(), f"{GOLDEN_JUNIT} is missing: run with DISTVAL_UPDATE_GOLDEN=1 to create it"
    assert text == GOLDEN_JUNIT.read_text(encoding="utf-8").replace(VERSION_MARK, __version__)


# --- the schema -----------------------------------------------------------------------------------


def test_report_validates_against_jenkins_schema(schema: etree.XMLSchema, report: str) -> None:
    document = etree.fromstring(report.encode("utf-8"))
    assert schema.validate(document), schema.error_log


@pytest.mark.parametrize(
    "summary_args",
    [
        (RUN_ID, ()),
        (RUN_ID, (), ("config", "a.yaml:1: version: expected 1; got '2'\na.yaml:2: x: unknown key"), 2),
    ],
    ids=["no-scenarios", "config-error-only"],
)
def test_edge_reports_validate(schema: etree.XMLSchema, summary_args: tuple[Any, ...]) -> None:
    report = render_junit(RunSummary(*summary_args))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log


def _mutated(report: str, mutate: Any) -> etree._Element:
    document = etree.fromstring(report.encode("utf-8"))
    mutate(document)
    return document


@pytest.mark.parametrize(
    ("description", "mutate"),
    [
        ("disabled on testsuites", lambda d: d.set("disabled", "0")),
        ("disabled on testsuite", lambda d: d.find("testsuite").set("disabled", "0")),
        ("testsuite without name", lambda d: d.find("testsuite").attrib.pop("name")),
        ("testsuite without errors", lambda d: d.find("testsuite").attrib.pop("errors")),
        ("testcase with a file attribute", lambda d: d.find("testsuite/testcase").set("file", "x.py")),
        ("testcase without name", lambda d: d.find("testsuite/testcase").attrib.pop("name")),
        ("exponent time", lambda d: d.find("testsuite").set("time", "1e-05")),
        ("negative time", lambda d: d.find("testsuite").set("time", "-1.0")),
        ("a float sum with 17 decimals", lambda d: d.find("testsuite").set("time", "0.30000000000000004")),
        ("4 decimals on testsuites", lambda d: d.set("time", "1.2345")),
        ("skipped on testsuites", lambda d: d.set("skipped", "0")),
        ("property without value", lambda d: d.find("testsuite/properties/property").attrib.pop("value")),
        ("unknown child of testcase", lambda d: etree.SubElement(d.find("testsuite/testcase"), "rerunFailure")),
        ("failure with an unknown attribute", lambda d: d.find(".//failure").set("severity", "high")),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_schema_rejects_what_jenkins_rejects(schema: etree.XMLSchema, report: str, description: str, mutate: Any) -> None:
    assert schema.validate(etree.fromstring(report.encode()))
    assert not schema.validate(_mutated(report, mutate)), description


def test_schema_accepts_separated_thousands_and_nested_suites(schema: etree.XMLSchema) -> None:
    document = etree.fromstring(
        b'<testsuites name="n" time="1,234.5" tests="1" failures="0" errors="0">'
        b'<testsuite name="outer" tests="1" failures="0" errors="0" group="g" id="1" package="p">'
        b'<testsuite name="inner" tests="1" failures="0" errors="0" time="12">'
        b'<testcase name="c" time=".5" group="g"><system-err>e</system-err><skipped/></testcase>'
        b"</testsuite><system-out>o</system-out></testsuite></testsuites>"
    )
    assert schema.validate(document), schema.error_log


# --- write_junit ----------------------------------------------------------------------------------


def test_write_junit_creates_parents_and_leaves_no_temporary(
    tmp_path: Path, summary: RunSummary, schema: etree.XMLSchema
) -> None:
    target = tmp_path / "deep" / "er" / "report.xml"
    write_junit(summary, target)
    assert sorted(p.name for p in target.parent.iterdir()) == ["report.xml"]
    assert schema.validate(etree.parse(str(target))), schema.error_log
    assert [s.get("name") for s in ET.parse(target).getroot().findall("testsuite")][-1] == EARLY


def test_write_junit_replaces_atomically(tmp_path: Path, summary: RunSummary, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.xml"
    target.write_text("OLD REPORT", encoding="utf-8")
    renames: list[tuple[Path, Path]] = []
    real_replace = os.replace

    def spy(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        source_path, destination_path = Path(source), Path(destination)
        renames.append((source_path, destination_path))
        # At the rename: the complete new report sits in a sibling file (same filesystem), the old one is intact.
        assert source_path.parent == destination_path.parent == tmp_path
        assert source_path != destination_path
        assert ET.parse(source_path).getroot().tag == "testsuites"
        assert destination_path.read_text(encoding="utf-8") == "OLD REPORT"
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", spy)  # distval.reports.files calls os.replace
    write_junit(summary, str(target))
    assert len(renames) == 1 and renames[0][1] == target
    assert ET.parse(target).getroot().tag == "testsuites"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.xml"]


def test_write_junit_keeps_the_old_file_when_rendering_fails(
    tmp_path: Path, summary: RunSummary, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.xml"
    target.write_text("OLD REPORT", encoding="utf-8")

    def broken(_summary: RunSummary) -> str:
        raise RuntimeError("render failed")

    monkeypatch.setattr(distval.reports.junit, "render_junit", broken)
    with pytest.raises(RuntimeError):
        write_junit(summary, target)
    assert target.read_text(encoding="utf-8") == "OLD REPORT"


# --- what every consumer needs (docs/reports.md, "JUnit XML") ------------------------------------------

TIME = re.compile(r"[0-9]+\.[0-9]{3}")


def test_time_on_every_element_with_three_decimals(root: ET.Element) -> None:
    elements = [root, *root.iter("testsuite"), *root.iter("testcase")]
    assert len(elements) == 1 + 3 + 7
    assert [e.get("time") for e in elements if not TIME.fullmatch(e.get("time") or "")] == []
    # The run's wall-clock time: from inside's start to across's end (STARTED + 1 + 90.5), not 4.25 + 90.5.
    assert root.get("time") == "91.500"


def test_float_sums_keep_three_decimals(schema: etree.XMLSchema) -> None:
    inside, across = scenarios()
    tenth = [dataclasses.replace(c, duration_s=d) for c, d in zip(inside.cases, (0.1, 0.2, 0.30000000000000004), strict=True)]
    results = (
        dataclasses.replace(inside, cases=tuple(tenth), duration_s=0.6000000000000001),
        dataclasses.replace(across, duration_s=0.2),
    )
    report = render_junit(RunSummary(RUN_ID, results, host=HOST))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    root = ET.fromstring(report)
    assert root.get("time") == "0.800"  # no start times known: the suites' sum
    # exit_status: what env and all_reduce leave of the suite's 0.6 s.
    assert [c.get("time") for c in root.iter("testcase")][:3] == ["0.100", "0.200", "0.300"]


@pytest.mark.parametrize(
    ("duration", "expected"),
    [
        (-1.0, "0.000"),
        (float("nan"), "0.000"),
        (float("inf"), "0.000"),
        (1.797693134862316e305, "0.000"),  # found by the fuzz test: seconds * 1000 overflowed to infinity
        (1e-9, "0.000"),
        (12_345_678.9994, "12345678.999"),
    ],
)
def test_odd_durations(duration: float, expected: str, schema: etree.XMLSchema) -> None:
    inside, _ = scenarios()
    cases = tuple(dataclasses.replace(c, duration_s=duration) for c in inside.cases)
    report = render_junit(RunSummary(RUN_ID, (dataclasses.replace(inside, duration_s=duration, cases=cases),), host=HOST))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    root = ET.fromstring(report)
    checks = [c for c in root.iter("testcase") if c.get("name") != "exit_status"]
    assert {e.get("time") for e in [root, *root.iter("testsuite"), *checks]} == {expected}
    # The checks took the whole suite's time (or more): nothing is left for exit_status.
    assert root.find("testsuite/testcase[@name='exit_status']").get("time") == "0.000"  # type: ignore[union-attr]


def test_reasons_are_element_text_as_well_as_message(root: ET.Element) -> None:
    across = suite_named(root, ACROSS)
    outcomes = [case[0] for case in across.findall("testcase") if len(case)]
    assert [o.tag for o in outcomes] == ["skipped", "error", "error"]
    for outcome in outcomes:
        message = outcome.get("message") or ""
        assert message and (outcome.text or "").startswith(message), outcome.tag
    skipped = outcomes[0]
    assert skipped.text == "no CUDA\n\nrank 0: skipped: no CUDA\nrank 1: skipped: no CUDA"
    failure = suite_named(root, INSIDE).find("testcase[@name='all_reduce']/failure")
    assert failure is not None and (failure.text or "").startswith(f"rank 1: {FAIL_MESSAGE}\n\nrank 0: passed: ok\n")


def test_file_names_the_config_on_every_testsuite(root: ET.Element, schema: etree.XMLSchema) -> None:
    assert {s.get("file") for s in root.iter("testsuite")} == {CONFIG_PATH}
    # junit-10.xsd has no file attribute on a testcase: a consumer must find it on the testsuite.
    assert [c.get("file") for c in root.iter("testcase") if c.get("file") is not None] == []


def test_dots_in_the_image_and_the_scenario_make_no_jenkins_package(schema: etree.XMLSchema) -> None:
    """Jenkins reads a classname's last dot as package / class: ``distval.<image>.<scenario>`` has exactly two."""
    inside, _ = scenarios()
    dotted = dataclasses.replace(
        inside.plan,
        image="registry.example.com:5000/torch:2.6-debian",
        scenario=dataclasses.replace(inside.plan.scenario, name="ddp-torch2.6-py3.11"),
    )
    report = render_junit(RunSummary(RUN_ID, (dataclasses.replace(inside, plan=dotted),), config_path="configs/matrix.yaml"))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    (suite,) = ET.fromstring(report).iter("testsuite")
    assert suite.get("file") == "configs/matrix.yaml"
    assert suite.get("name") == "[registry.example.com:5000/torch:2.6-debian] ddp-torch2.6-py3.11 (in-container, 2 ranks)"
    (classname,) = {c.get("classname") for c in suite.iter("testcase")}
    assert classname == "distval.registry_example_com:5000/torch.ddp-torch2_6-py3_11"
    assert classname.rsplit(".", 1) == ["distval.registry_example_com:5000/torch", "ddp-torch2_6-py3_11"]


def _identities(report: str) -> tuple[set[str | None], set[tuple[str | None, str | None]]]:
    """The suite names and the (classname, name) pairs of a report: what GitLab and Jenkins tell apart by."""
    root = ET.fromstring(report)
    return {s.get("name") for s in root.iter("testsuite")}, {(c.get("classname"), c.get("name")) for c in root.iter("testcase")}


def test_one_config_against_two_images_gives_reports_that_stay_apart(summary: RunSummary) -> None:
    other = tuple(dataclasses.replace(s, plan=dataclasses.replace(s.plan, image="example/other:2.7")) for s in summary.scenarios)
    names, cases = _identities(render_junit(dataclasses.replace(summary, early_error=None, early_exit_code=None)))
    other_names, other_cases = _identities(render_junit(RunSummary(RUN_ID, other)))
    assert names.isdisjoint(other_names) and cases.isdisjoint(other_cases)
    assert ("distval.example/other.inside", "env") in other_cases
    # The same image and config in another run: the same classnames (GitLab's and Jenkins' history follow them).
    again = render_junit(dataclasses.replace(summary, run_id="another", early_error=None, early_exit_code=None))
    assert _identities(again) == (names, cases)


@pytest.mark.parametrize("tag", ["sha-3f9c2e1", "sha-77aa001@sha256:" + "ab" * 32])
def test_a_testcases_identity_survives_a_new_tag(summary: RunSummary, tag: str) -> None:
    """Pipelines tag each build with its commit: the (classname, name) pairs GitLab's new/resolved failures and
    Jenkins' history key on stay the same; the tag is in the ``image`` property and the testsuite's name."""
    image = f"registry.example.com:5000/team/torch:{tag}"
    first = _identities(render_junit(RunSummary(RUN_ID, tuple(_with_image(s, image) for s in summary.scenarios))))
    later = "registry.example.com:5000/team/torch:sha-0000001"
    root = ET.fromstring(render_junit(RunSummary("another", tuple(_with_image(s, later) for s in summary.scenarios))))
    assert {(c.get("classname"), c.get("name")) for c in root.iter("testcase")} == first[1]
    assert {c.get("classname") for c in root.iter("testcase")} == {
        "distval.registry_example_com:5000/team/torch.inside",
        "distval.registry_example_com:5000/team/torch.across",
    }
    assert {properties(s)["image"] for s in root.iter("testsuite")} == {later}
    assert all(s.get("name", "").startswith(f"[{later}] ") for s in root.iter("testsuite"))


def test_two_tags_of_one_repository_in_one_run_keep_apart_classnames(summary: RunSummary) -> None:
    """A candidate and its reference are often two tags of one repository: in one report their testcases must not
    share (classname, name), or GitLab keeps only the first."""
    inside = summary.scenarios[0]
    both = (_with_image(inside, "example/torch:candidate"), _with_image(inside, "example/torch:last-good"))
    root = ET.fromstring(render_junit(RunSummary(RUN_ID, both)))
    classnames = [suite.find("testcase").get("classname") for suite in root.iter("testsuite")]  # type: ignore[union-attr]
    assert classnames == ["distval.example/torch:candidate.inside", "distval.example/torch:last-good.inside"]


def _with_image(scenario: ScenarioResult, image: str) -> ScenarioResult:
    plan = dataclasses.replace(scenario.plan, image=image)
    properties = tuple((key, image if key == "image" else value) for key, value in scenario.properties)
    return dataclasses.replace(scenario, plan=plan, properties=properties)


def test_suite_prefix_takes_the_images_place(summary: RunSummary, schema: etree.XMLSchema) -> None:
    report = render_junit(dataclasses.replace(summary, suite_prefix="nightly-cu128"))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    names, cases = _identities(report)
    assert names == {
        "[nightly-cu128] inside (in-container, 2 ranks)",
        "[nightly-cu128] across (cross-container, 2x1, 2 ranks, static)",
        "[nightly-cu128] distval run",
    }
    assert {classname for classname, _ in cases} == {
        "distval.nightly-cu128.inside",
        "distval.nightly-cu128.across",
        "distval.nightly-cu128.run",
    }
    # The image is still a property of each scenario's suite.
    assert properties(suite_named(ET.fromstring(report), "[nightly-cu128] inside (in-container, 2 ranks)"))["image"] == IMAGE


@pytest.mark.parametrize(
    ("images", "prefix", "name", "classname"),
    [
        (("reg.example/torch:2.7",), None, "[reg.example/torch:2.7] distval run", "distval.reg_example/torch.run"),
        (("a/torch:1", "b/torch:2"), None, "[a/torch:1,b/torch:2] distval run", "distval.a/torch,b/torch.run"),
        (("a/torch:1", "a/torch:2"), None, "[a/torch:1,a/torch:2] distval run", "distval.a/torch:1,a/torch:2.run"),
        (("a/torch:1",), "nightly-cu128", "[nightly-cu128] distval run", "distval.nightly-cu128.run"),
        ((), None, "distval run", "distval.run"),  # the config unread and no --image: no image is known
    ],
)
def test_a_run_that_stopped_before_any_scenario_is_named_by_its_image(
    images: tuple[str, ...], prefix: str | None, name: str, classname: str, schema: etree.XMLSchema
) -> None:
    """An unreachable Engine (exit 3) or a refusal (exit 2) stops the run before any scenario: its one testsuite
    keeps the reports of different images apart as the scenarios' suites do."""
    early = RunSummary(RUN_ID, (), ("environment", "cannot reach the Docker Engine"), 3, images=images, suite_prefix=prefix)
    report = render_junit(early)
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    suite = suite_named(ET.fromstring(report), name)
    (case,) = suite.findall("testcase")
    assert (case.get("name"), case.get("classname")) == ("environment", classname)


def test_scenarios_that_only_a_dot_tells_apart_keep_apart_classnames() -> None:
    inside, _ = scenarios()
    named = [
        dataclasses.replace(
            inside, plan=dataclasses.replace(inside.plan, scenario=dataclasses.replace(inside.plan.scenario, name=n))
        )
        for n in ("a.b", "a_b", "a.b")
    ]
    root = ET.fromstring(render_junit(RunSummary(RUN_ID, tuple(named))))
    found = [suite.find("testcase").get("classname") for suite in root.iter("testsuite")]  # type: ignore[union-attr]
    assert found == [f"distval.{REPOSITORY}.a_b", f"distval.{REPOSITORY}.a_b_2", f"distval.{REPOSITORY}.a_b_3"]


def test_timestamp_is_utc_without_a_zone_and_started_at_has_one(root: ET.Element) -> None:
    inside, across = suite_named(root, INSIDE), suite_named(root, ACROSS)
    assert (inside.get("timestamp"), across.get("timestamp")) == ("2026-05-28T20:26:40", "2026-05-28T20:26:41")
    assert (properties(inside)["started_at"], properties(across)["started_at"]) == (
        "2026-05-28T20:26:40.125Z",
        "2026-05-28T20:26:41.125Z",
    )


def test_a_testcase_never_outlasts_its_suite_and_they_add_up_to_it(schema: etree.XMLSchema) -> None:
    inside, _ = scenarios()
    # The image's records say what they like: all_reduce claims an hour in a 4.25 s scenario.
    cases = tuple(dataclasses.replace(c, duration_s=3600.0) if c.name == "all_reduce" else c for c in inside.cases)
    report = render_junit(RunSummary(RUN_ID, (dataclasses.replace(inside, cases=cases),)))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    (suite,) = ET.fromstring(report).iter("testsuite")
    times = {c.get("name"): c.get("time") for c in suite.iter("testcase")}
    assert (suite.get("time"), times) == ("4.250", {"env": "0.125", "all_reduce": "4.250", "exit_status": "0.000"})
    honest = ET.fromstring(render_junit(RunSummary(RUN_ID, (inside,)))).find("testsuite")
    assert honest is not None
    assert sum(float(c.get("time") or "") for c in honest.iter("testcase")) == pytest.approx(float(honest.get("time") or ""))


def test_root_time_without_start_times_is_the_suites_sum() -> None:
    inside, across = scenarios()
    root = ET.fromstring(render_junit(RunSummary(RUN_ID, (inside, across))))  # collect kubernetes: no start known
    assert root.get("time") == "94.750"


def test_characters_xml_forbids_are_escaped_everywhere(schema: etree.XMLSchema) -> None:
    inside, _ = scenarios()
    noisy = "\x1b[31mred\x1b[0m \x00 \x7f \udc80 \ufffe end"
    cases = tuple(dataclasses.replace(c, name=c.name + "\x01", message=noisy, output=noisy + "\r\nnext") for c in inside.cases)
    result = dataclasses.replace(inside, cases=cases, logs=noisy, properties=(("torch_version", noisy),))
    report = render_junit(RunSummary(RUN_ID, (result,), host="h\x02", config_path="c\udcff.yaml"))
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    escaped = "\\x1b[31mred\\x1b[0m \\x00 \x7f \\udc80 \\ufffe end"
    root = ET.fromstring(report)
    failure = root.find(".//failure")
    assert failure is not None and failure.get("message") == escaped
    assert failure.text == f"{escaped}\n\n{escaped}\nnext"
    assert [c.get("name") for c in root.iter("testcase")] == ["env\\x01", "all_reduce\\x01", "exit_status\\x01"]
    (suite,) = root.iter("testsuite")
    assert (suite.get("hostname"), suite.get("file")) == ("h\\x02", "c\\udcff.yaml")
    assert suite.find("system-out") is not None and suite.find("system-out").text == escaped  # type: ignore[union-attr]
    assert properties(suite)["torch_version"] == escaped


def test_junitparser_reads_what_was_written(report: str) -> None:
    document = JUnitXml.fromstring(report.encode())
    suites = {suite.name: suite for suite in document}
    assert list(suites) == [
        INSIDE,
        ACROSS,
        EARLY,
    ]
    across = suites[ACROSS]
    assert (across.tests, across.failures, across.errors, across.skipped, across.time) == (3, 0, 2, 1, 90.5)
    results = {case.name: case.result for case in across}
    assert [type(r).__name__ for r in results["env"]] == ["Skipped"]
    assert results["env"][0].message == "no CUDA" and (results["env"][0].text or "").startswith("no CUDA")
    assert [type(r).__name__ for r in results["all_reduce"]] == ["Error"]
    # exit_status: its suite's time less the checks' (4.25 - 2 x 0.125, 90.5 - 2 x 0.125).
    assert {case.time for suite in document for case in suite} == {0.125, 4.0, 90.25, 0.0}
    assert document.time == 91.5


# --- fuzzing the renderer ---------------------------------------------------------------------------

ANY_TEXT = st.one_of(
    st.text(max_size=40),
    st.lists(st.integers(0, 0x10FFFF), max_size=40).map(lambda points: "".join(map(chr, points))),  # surrogates too
)
DURATIONS = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.1, 0.2, 0.30000000000000004]))
CASES = st.lists(
    st.tuples(ANY_TEXT, st.sampled_from([PASSED, FAILED, ERROR, SKIPPED]), ANY_TEXT, DURATIONS, ANY_TEXT), max_size=6
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    name=ANY_TEXT,
    cases=CASES,
    duration=DURATIONS,
    logs=ANY_TEXT,
    host=ANY_TEXT,
    config=st.one_of(st.none(), ANY_TEXT),
    early=st.one_of(st.none(), st.tuples(ANY_TEXT, ANY_TEXT)),
)
def test_fuzz_every_report_validates_and_says_what_it_was_given(
    schema: etree.XMLSchema,
    name: str,
    cases: list[tuple[str, str, str, float, str]],
    duration: float,
    logs: str,
    host: str,
    config: str | None,
    early: tuple[str, str] | None,
) -> None:
    inside, _ = scenarios()
    plan = dataclasses.replace(inside.plan, scenario=dataclasses.replace(inside.plan.scenario, name=name))
    results = tuple(CaseResult(n, status, message, d, output) for n, status, message, d, output in cases)
    scenario = ScenarioResult(plan, results, (("image", name),), logs, duration)
    summary = RunSummary(RUN_ID, (scenario,), early, 2 if early else None, host=host, config_path=config)
    report = render_junit(summary)
    assert schema.validate(etree.fromstring(report.encode())), schema.error_log
    root = ET.fromstring(report)
    elements = [root, *root.iter("testsuite"), *root.iter("testcase")]
    assert all(TIME.fullmatch(e.get("time") or "") for e in elements)
    for suite in root.iter("testsuite"):
        assert all(float(c.get("time") or "") <= float(suite.get("time") or "") for c in suite.iter("testcase"))
    written = [c for c in root.iter("testcase")]
    assert len(written) == len(results) + (1 if early else 0)
    for case, element in zip(results, written, strict=False):
        assert element.get("name") == xml_text(case.name)
        outcome = [child for child in element if child.tag in ("failure", "error", "skipped")]
        if case.status == PASSED:
            assert outcome == []
            continue
        (reason,) = outcome
        assert reason.tag == {FAILED: "failure", ERROR: "error", SKIPPED: "skipped"}[case.status]
        assert reason.get("message") == xml_text(case.message[:MESSAGE_CHARS])
        assert reason.text  # GitLab shows the text: never empty
    parsed = JUnitXml.fromstring(report.encode())
    assert sum(suite.tests for suite in parsed) == len(written)
