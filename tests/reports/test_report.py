"""distval.reports (every format, the atomic file writer) and the reporting side of ``distval run``, without
Docker: summaries are built by hand (like tests/results/test_results.py) and ``distval run`` runs against a fake
Engine and a fake runtime. The JUnit format has its own tests/reports/test_junit.py, live progress tests/run/test_progress.py."""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import threading
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from lxml import etree

import distval.cli.run
import distval.session.reports
import distval.targets.docker.target
from distval import __version__
from distval.cli.main import main
from distval.config import parse_config
from distval.config.shipped import DEFAULT_IMAGE
from distval.escape import markdown_cell
from distval.plan.identity import scenario_hash
from distval.plan.model import ScenarioPlan
from distval.reports.common import image_repository
from distval.reports.files import write_atomically
from distval.reports.json_report import render_json, write_json
from distval.reports.junit import write_junit
from distval.reports.markdown import render_markdown, write_markdown
from distval.reports.summary import render_summary
from distval.results.outcome import ERROR, FAILED, PASSED, SKIPPED, CaseResult, ScenarioOutcome
from distval.results.scenario import RunSummary, ScenarioResult
from distval.run.events import RunEvents
from distval.targets.docker.engine import EngineError
from distval.targets.engines.planning import plan_scenario
from tests.fake_engine import FakeEngine
from tests.report_helpers import (
    ANNOUNCEMENT,
    CONFIG,
    CONFIG_PATH,
    GOLDEN_DIR,
    IMAGE,
    RUN_ID,
    SCHEMA_PATH,
    TIMESTAMP,
    VERSION_MARK,
    failing,
    fake_run_scenario,
    plans,
    run,
    summary,
)
from tests.terminal import screen


def test_run_writes_every_report(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    step_summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    code = run(fake_docker, tmp_path, "--markdown", str(tmp_path / "r.md"))
    assert code == 1
    (engine,) = FakeEngine.instances
    assert engine.version_calls == 1  # once per run, not per scenario
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert (report["exit_code"], report["engine_version"], report["config"]) == (1, "27.5.1", str(fake_docker))
    assert [(s["name"], s["status"]) for s in report["scenarios"]] == [("inside", PASSED), ("across", FAILED)]
    across = report["scenarios"][1]
    assert across["properties"]["docker_engine_version"] == "27.5.1"
    assert across["properties"]["cuda_version"] == "none"
    assert across["properties"]["scenario_hash"] == scenario_hash(
        plan_scenario(parse_config(fake_docker.read_text(), "x").scenarios[1], "other", IMAGE)
    )
    root = ET.parse(tmp_path / "r.xml").getroot()
    schema = etree.XMLSchema(etree.parse(str(SCHEMA_PATH)))
    assert schema.validate(etree.parse(str(tmp_path / "r.xml"))), schema.error_log
    properties = {p.get("name"): p.get("value") for p in root.findall("testsuite/properties/property")}
    assert properties["docker_engine_version"] == "27.5.1" and properties["host"] == report["host"]
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert markdown.startswith("## ❌ distval: failed")
    assert step_summary.read_text(encoding="utf-8") == markdown + "\n"
    out = capsys.readouterr().out
    assert f"distval run {fake_docker} --image example/torch:test --filter across" in out
    assert out.splitlines()[-1] == f"distval run {RUN_ID}: 5 of 6 check results passed; exit code 1"


def test_run_names_the_image_in_the_reports_and_the_time_is_the_runs(fake_docker: Path, tmp_path: Path) -> None:
    assert run(fake_docker, tmp_path, "--quiet") == 1
    root = ET.parse(tmp_path / "r.xml").getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        f"[{IMAGE}] inside (in-container, 2 ranks)",
        f"[{IMAGE}] across (cross-container, 2x1, 2 ranks, static)",
    ]
    assert {c.get("classname") for c in suites[0].iter("testcase")} == {"distval.example/torch.inside"}
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [s["suite_name"] for s in report["scenarios"]] == [s.get("name") for s in suites]
    # The run loop saw each scenario start: the suites' timestamps and the run's wall-clock time come from it.
    started = [{p.get("name"): p.get("value") for p in s.iter("property")}["started_at"] for s in suites]
    assert [s["started_at"] for s in report["scenarios"]] == started
    assert all(re.fullmatch(r"[0-9-]{10}T[0-9:]{8}\.[0-9]{3}Z", value or "") for value in started)
    assert all(s.get("timestamp") == (value or "")[:19] for s, value in zip(suites, started, strict=True))
    assert float(root.get("time") or "") >= max(float(s.get("time") or "") for s in suites)


def test_suite_prefix_names_the_suites(fake_docker: Path, tmp_path: Path) -> None:
    assert run(fake_docker, tmp_path, "--quiet", "--suite-prefix", "nightly_cu128") == 1
    suites = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")
    assert [s.get("name", "").split("]")[0] for s in suites] == ["[nightly_cu128", "[nightly_cu128"]
    assert {c.get("classname") for c in suites[1].iter("testcase")} == {"distval.nightly_cu128.across"}


@pytest.mark.parametrize("prefix", ["torch.2.6", "", "-x", "_x", "a b", "x" * 65, "ü", "a/b"])
def test_a_bad_suite_prefix_is_one_line_and_exit_2_with_the_reports(
    prefix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    assert main(["run", str(config), "--junit", str(tmp_path / "r.xml"), f"--suite-prefix={prefix}"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--suite-prefix" in err and "expected 1-64 letters" in err, err
    assert "Traceback" not in err
    (suite,) = ET.parse(tmp_path / "r.xml").getroot().findall("testsuite")
    assert (suite.get("name"), suite.find("testcase").get("name")) == ("distval run", "usage")  # type: ignore[union-attr]


def test_run_progress_plain_lines(fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(fake_docker, tmp_path, "--jobs", "1")
    err = capsys.readouterr().err
    assert "\r" not in err
    lines = [TIMESTAMP.sub("", line) for line in err.splitlines()]
    assert all(TIMESTAMP.match(line) for line in err.splitlines())
    assert lines[0] == ANNOUNCEMENT
    assert lines[1] == f"inside (in-container, 2 ranks): starting on {IMAGE} (scenario 1 of 2; 2 ranks in 1 container)"
    assert lines[2:7] == [
        "inside (in-container, 2 ranks): running",
        "inside (in-container, 2 ranks): started 1 container(s)",
        "inside (in-container, 2 ranks): collecting logs and results",
        "inside (in-container, 2 ranks): removing containers and networks",
        "inside (in-container, 2 ranks): passed in 2.5 s (3 passed)",
    ]
    assert lines[-1] == "across (cross-container, 2x1, 2 ranks, static): failed in 2.5 s (2 passed; failed: all_reduce)"


def test_run_progress_on_a_terminal(
    fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "200")  # the captured stream has no terminal size of its own
    run(fake_docker, tmp_path, "--jobs", "1")
    err = capsys.readouterr().err
    assert "\r[1/2] inside (in-container, 2 ranks) | 2 ranks in 1 container | " in err
    assert "\r[2/2] across (cross-container, 2x1, 2 ranks, static) | 2 ranks in 2 containers, one each | running" in err
    # Permanent lines: the run id, then the scenario results only; the status line is cleared at the end.
    assert [TIMESTAMP.sub("", line) for line in screen(err)] == [
        ANNOUNCEMENT,
        "inside (in-container, 2 ranks): passed in 2.5 s (3 passed)",
        "across (cross-container, 2x1, 2 ranks, static): failed in 2.5 s (2 passed; failed: all_reduce)",
        "",
    ]


@pytest.fixture
def both_at_once(fake_docker: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake runtime, but each scenario waits in its running phase until the other is running too."""
    together = threading.Barrier(2, timeout=10)

    def run_scenario(engine: Any, plan: ScenarioPlan, events: RunEvents, stop: object = None) -> ScenarioOutcome:
        events.phase(plan, "running")
        together.wait()
        return fake_run_scenario(engine, plan, events, stop)

    monkeypatch.setattr(distval.targets.docker.target, "run_scenario", run_scenario)
    return fake_docker


def test_run_progress_plain_lines_of_two_jobs(both_at_once: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(both_at_once, tmp_path, "--jobs", "2") == 1
    lines = [TIMESTAMP.sub("", line) for line in capsys.readouterr().err.splitlines()]
    inside, across = "inside (in-container, 2 ranks): ", "across (cross-container, 2x1, 2 ranks, static): "
    assert [line for line in lines if not line.startswith((inside, across))] == [ANNOUNCEMENT]
    assert [line.removeprefix(inside) for line in lines if line.startswith(inside)] == [
        f"starting on {IMAGE} (scenario 1 of 2; 2 ranks in 1 container)",
        "running",
        "started 1 container(s)",
        "collecting logs and results",
        "removing containers and networks",
        "passed in 2.5 s (3 passed)",
    ]
    assert [line.removeprefix(across) for line in lines if line.startswith(across)] == [
        f"starting on {IMAGE} (scenario 2 of 2; 2 ranks in 2 containers, one each)",
        "running",
        "started 2 container(s)",
        "collecting logs and results",
        "removing containers and networks",
        "failed in 2.5 s (2 passed; failed: all_reduce)",
    ]
    # Both ran at once: each started before the other finished.
    assert lines.index(across + "running") < lines.index(inside + "passed in 2.5 s (3 passed)")
    assert lines.index(inside + "running") < lines.index(across + "failed in 2.5 s (2 passed; failed: all_reduce)")


def test_run_progress_of_two_jobs_on_a_terminal(
    both_at_once: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setenv("TERM", "xterm")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("LINES", "24")
    run(both_at_once, tmp_path, "--jobs", "2")
    err = capsys.readouterr().err
    # While both ran, both status lines were on screen: the block was rewritten from its first line.
    assert "\r\x1b[1A[1/2] inside (in-container, 2 ranks) | 2 ranks in 1 container | running" in err
    assert "\n[2/2] across (cross-container, 2x1, 2 ranks, static) | 2 ranks in 2 containers, one each | running" in err
    shown = [TIMESTAMP.sub("", line) for line in screen(err)]
    assert shown[-1] == ""  # the status lines are gone
    assert shown[0] == ANNOUNCEMENT
    assert sorted(shown[1:-1]) == [  # the result lines, in the order the scenarios finished
        "across (cross-container, 2x1, 2 ranks, static): failed in 2.5 s (2 passed; failed: all_reduce)",
        "inside (in-container, 2 ranks): passed in 2.5 s (3 passed)",
    ]


def test_run_quiet_writes_nothing_on_stderr(fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake_docker, tmp_path, "--quiet") == 1
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "exit code 1" in captured.out


def test_filter_runs_only_matching_scenarios(fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(fake_docker, tmp_path, "--filter", "in*", "--quiet") == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in report["scenarios"]] == ["inside"]
    assert capsys.readouterr().out.splitlines()[-1] == f"distval run {RUN_ID}: 3 of 3 check results passed; exit code 0"


def test_filter_is_repeatable_and_keeps_config_order(fake_docker: Path, tmp_path: Path) -> None:
    assert run(fake_docker, tmp_path, "--filter", "across", "--filter", "ins?de", "--quiet") == 1
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert [s["name"] for s in report["scenarios"]] == ["inside", "across"]


def test_filter_is_case_sensitive_glob(fake_docker: Path, tmp_path: Path) -> None:
    assert run(fake_docker, tmp_path, "--filter", "INSIDE", "--quiet") == 2


def test_filter_without_a_match_is_bad_input(fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run(fake_docker, tmp_path, "--filter", "inside", "--filter", "nope*", "--filter", "zzz")
    assert code == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line == f"distval: --filter 'nope*', 'zzz' match no scenario of {fake_docker}; its scenarios: inside, across"
    assert FakeEngine.instances == []  # decided before the Engine is asked anything
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["early_error"]["kind"] == "filter" and report["exit_code"] == 2 and report["scenarios"] == []
    (case,) = ET.parse(tmp_path / "r.xml").getroot().iter("testcase")
    assert case.get("name") == "filter"
    assert captured.out.splitlines()[-1] == f"distval run {RUN_ID}: 0 of 0 check results passed; exit code 2"


def test_engine_version_failure_does_not_stop_the_run(fake_docker: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: FakeEngine) -> str:
        raise EngineError("ask the Engine's version: 500")

    monkeypatch.setattr(FakeEngine, "version", refuse)
    assert run(fake_docker, tmp_path, "--quiet", "--filter", "inside") == 0
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["engine_version"] is None
    assert report["scenarios"][0]["properties"]["docker_engine_version"] == "unknown"


@pytest.mark.parametrize("where", ["file/x.md", "/proc/distval-summary.md"])
def test_a_report_path_no_file_can_be_created_in_is_refused_before_the_run(
    fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    """A path under a file, or under /proc (root may write where permission bits forbid, but no file can be created
    there): one line and exit 2 before anything runs, not a verdict of exit 0 after a long run without the report."""
    (tmp_path / "file").write_text("", encoding="utf-8")
    path = where if where.startswith("/") else str(tmp_path / where)
    code = run(fake_docker, tmp_path, "--quiet", "--filter", "inside", "--markdown", path)
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"distval: --markdown {path}: "), line
    assert all("create_container" not in engine.calls for engine in FakeEngine.instances)  # nothing ran


def test_a_report_that_cannot_be_written_after_the_run_never_leaves_exit_0(
    fake_docker: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The path was fine when the run started, the write failed after it (a disk full, a mount gone read-only):
    one line naming the report and its path, the other reports still written, and exit 2, never the verdict's 0."""

    def full(*_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(distval.session.reports, "write_markdown", full)
    target = tmp_path / "x.md"
    code = run(fake_docker, tmp_path, "--quiet", "--filter", "inside", "--markdown", str(target))
    assert code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line == f"distval: cannot write the Markdown summary to {target}: No space left on device"
    assert json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["exit_code"] == 0


def test_reports_when_the_engine_is_unreachable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real Engine class, no Docker: the run stops early and every report still says why.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    step_summary = tmp_path / "step.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    config = tmp_path / "suite.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    reports = ["--json", str(tmp_path / "r.json"), "--markdown", str(tmp_path / "r.md"), "--junit", str(tmp_path / "r.xml")]
    code = main(["run", str(config), "--sample-image", *reports, "--quiet"])
    assert code == 3
    # No scenario ran, yet every report names the image: two images' runs that stopped early stay apart.
    (suite,) = ET.parse(tmp_path / "r.xml").getroot().iter("testsuite")
    assert suite.get("name") == f"[{DEFAULT_IMAGE}] distval run"
    assert suite.find("testcase").get("classname") == f"distval.{image_repository(DEFAULT_IMAGE).replace('.', '_')}.run"  # type: ignore[union-attr]
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert report["exit_code"] == 3 and report["engine_version"] is None and report["scenarios"] == []
    assert report["early_error"]["kind"] == "environment"
    assert "cannot reach the Docker Engine" in report["early_error"]["message"]
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    assert markdown.startswith("## ❌ distval: stopped early (environment)")
    assert f"Image under test: `{DEFAULT_IMAGE}` (distval's sample image).\n" in markdown
    assert step_summary.read_text(encoding="utf-8") == markdown + "\n"


def test_summary_scenario_without_results_gets_a_reproduce_command() -> None:
    inside, _ = plans()
    text = render_summary(RunSummary(RUN_ID, (ScenarioResult(inside, (), (), "", 0.0),), config_path="c.yaml"))
    assert "  inside: no results\n    distval run c.yaml --image example/torch:test --filter inside\n" in text
    assert text.endswith(f"distval run {RUN_ID}: 0 of 0 check results passed; exit code 1\n")


# --- the renderers, byte for byte -----------------------------------------------------------------


def early_summary() -> RunSummary:
    """A run that stopped after its first scenario: the early error shows in every format."""
    inside, _ = plans()
    return RunSummary(
        RUN_ID,
        (failing(inside),),
        ("interrupted", "interrupted by SIGTERM; the run's containers and networks were removed\nsecond line"),
        143,
        None,
        "ci-host",
        CONFIG_PATH,
    )


def test_markdown_says_torch_and_cuda_and_reproduces_each_failing_scenario_once() -> None:
    inside, across = plans()
    many = ScenarioResult(
        across,
        tuple(CaseResult(f"check{i}", FAILED, f"wrong {i}", 0.1) for i in range(3))
        + (CaseResult("exit_status", ERROR, "exited 1", 1.0), CaseResult("extra", SKIPPED, "no CUDA", 0.0)),
        (("torch_version", "2.6.0+cu124"), ("cuda_version", "12.4")),
        "",
        1.0,
    )
    text = render_markdown(RunSummary(RUN_ID, (failing(inside), many), config_path=CONFIG_PATH))
    assert "| across | cross-container | 3 | example/torch:test | 2.6.0+cu124 | 12.4 | ❌ error |" in text
    assert "| inside | in-container | 2 | example/torch:test | unknown | none |" in text  # no torch_version reported
    # One Reproduce block per failing scenario (2), not per failing testcase (2 + 4).
    assert text.count("Reproduce:") == 2
    assert text.count("--filter across") == 1 and text.count("--filter inside") == 1
    across_part = text[text.index("#### across: error") :]
    assert [line for line in across_part.splitlines() if line.startswith("**")] == [
        "**check0**: failed",
        "**check1**: failed",
        "**check2**: failed",
        "**exit\\_status**: error",
    ]


def test_markdown_says_first_when_the_image_was_distvals_sample() -> None:
    """Before the table: a verdict on distval's own image is not one on the user's."""
    inside, _ = plans()
    note = f"no --image: validating distval's sample image {DEFAULT_IMAGE}"
    text = render_markdown(RunSummary(RUN_ID, (failing(inside),), image_note=note))
    assert text.split("\n\n")[2] == f"⚠️ {markdown_cell(note)}"
    assert "⚠️" not in render_markdown(RunSummary(RUN_ID, (failing(inside),)))


def test_markdown_shows_every_skip_reason_grouped() -> None:
    inside, across = plans()
    cases = (
        CaseResult("env", SKIPPED, "no CUDA", 0.0),
        CaseResult("nccl", SKIPPED, "no CUDA", 0.0),
        CaseResult("identity", SKIPPED, "the scenario states nothing about the image", 0.0),
        CaseResult("all_reduce", PASSED, "ok (skipped on rank(s) 1: bf16 unsupported)", 0.1, skipped_ranks=(1,)),
        CaseResult("exit_status", PASSED, "exited 0", 1.0),
    )
    text = render_markdown(RunSummary(RUN_ID, (ScenarioResult(inside, cases, (), "", 1.0),)))
    skipped = text[text.index("### Skipped") :].strip().splitlines()
    assert skipped == [
        "### Skipped",
        "",
        "- inside: env, nccl: no CUDA",
        "- inside: identity: the scenario states nothing about the image",
        "- inside: all\\_reduce (on rank(s) 1): ok (skipped on rank(s) 1: bf16 unsupported)",
    ]
    assert "### Skipped" not in render_markdown(RunSummary(RUN_ID, (ScenarioResult(inside, cases[-1:], (), "", 1.0),)))


RENDERERS = {"json": render_json, "md": render_markdown, "txt": render_summary}


@pytest.mark.parametrize("which", ["failed", "early"])
@pytest.mark.parametrize("extension", sorted(RENDERERS))
def test_renderer_matches_golden(which: str, extension: str) -> None:
    """Each format is a golden file (tests/golden/reports/); regenerate after an intended change with
    DISTVAL_UPDATE_GOLDEN=1 and review the diff."""
    text = RENDERERS[extension](summary() if which == "failed" else early_summary())
    golden = GOLDEN_DIR / f"{which}.{extension}"
    if os.environ.get("DISTVAL_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text.replace(__version__, VERSION_MARK), encoding="utf-8")
    assert golden.exists(), f"{golden} is missing: run with DISTVAL_UPDATE_GOLDEN=1 to create it"
    assert text == golden.read_text(encoding="utf-8").replace(VERSION_MARK, __version__)


# --- the one atomic file writer -------------------------------------------------------------------


@pytest.mark.parametrize("write", [write_json, write_markdown, write_junit], ids=lambda w: w.__name__)
def test_every_format_writes_through_the_atomic_writer(write: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "out" / "report"
    renames: list[tuple[str, str]] = []
    real_replace = os.replace

    def spy(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        renames.append((Path(source).name, str(destination)))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", spy)
    write(summary(), target)
    ((temporary, destination),) = renames
    assert destination == str(target)
    assert re.fullmatch(r"\.report\.[0-9a-f]{8}\.tmp", temporary)
    assert sorted(p.name for p in target.parent.iterdir()) == ["report"]


def test_write_atomically_syncs_the_file_before_the_rename_and_the_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "report.json"
    calls: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append("fsync " + ("directory" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"))
        real_fsync(fd)

    def replace(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        assert Path(source).read_text(encoding="utf-8") == "ünïcode\n"  # complete before the rename
        calls.append("rename")
        real_replace(source, destination)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomically(target, "ünïcode\n")
    assert calls == ["fsync file", "rename", "fsync directory"]
    assert target.read_bytes() == "ünïcode\n".encode()


def test_write_atomically_keeps_the_old_file_when_the_rename_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "report.md"
    target.write_text("OLD", encoding="utf-8")

    def refuse(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError):
        write_atomically(target, "NEW")
    assert target.read_text(encoding="utf-8") == "OLD"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.md"]  # the temporary is gone


def test_write_atomically_gives_the_mode_a_plain_write_would(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        write_atomically(tmp_path / "report.xml", "x")
    finally:
        os.umask(previous)
    assert (tmp_path / "report.xml").stat().st_mode & 0o777 == 0o640
