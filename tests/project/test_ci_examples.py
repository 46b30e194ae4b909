"""The pipeline examples in docs/ci/ are real files users copy: they validate against the official schemas (the
GitHub workflow and GitLab CI schemas that check-jsonschema vendors from SchemaStore), every distval command in them
uses options the CLI has, and each has what makes it runnable as written: the tools its commands need, a report that
shows up where people look, triggers that match what the comments promise. tests/project/test_ci_examples_docker.py
runs their commands."""

from __future__ import annotations

import copy
import json
import re
import shlex
from importlib import resources
from typing import Any

import jsonschema
import pytest
import yaml

from distval.cli.main import build_parser
from distval.errors import UsageError
from tests.paths import ROOT

DOCS = ROOT / "docs" / "ci"
SCHEMAS = {"github-actions.yml": "github-workflows.json", "gitlab-ci.yml": "gitlab-ci.json"}


def load(name: str) -> Any:
    return yaml.safe_load((DOCS / name).read_text())


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


def shell_lines(document: Any) -> list[str]:
    """Every shell line of the pipeline, its variables replaced by a word as the shell would expand them."""
    lines = []
    for text in _strings(document):
        for line in text.replace("\\\n", " ").splitlines() if "\n" in text.strip() else [text]:
            lines.append(re.sub(r"\$\{\{[^}]*\}\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "v1", line))
    return lines


def distval_commands(document: Any) -> list[list[str]]:
    commands = []
    for line in shell_lines(document):
        if line.strip().startswith("distval run"):
            commands.append(shlex.split(line)[1:])
    return commands


def schema_errors(name: str, document: Any) -> list[str]:
    schema = json.loads(
        resources.files("check_jsonschema.builtin_schemas.vendor").joinpath(SCHEMAS[name]).read_text(encoding="utf-8")
    )
    # YAML 1.1 reads GitHub's key `on` as True; the schema (and GitHub) read it as the string "on".
    if name == "github-actions.yml":
        document = {("on" if key is True else key): value for key, value in document.items()}
    return [error.message for error in jsonschema.Draft7Validator(schema).iter_errors(document)]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_example_validates_against_the_official_schema(name: str) -> None:
    assert schema_errors(name, load(name)) == []


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_schema_check_can_fail(name: str) -> None:
    document = copy.deepcopy(load(name))
    job = document["jobs"]["validate"] if name == "github-actions.yml" else document["distval"]
    job["no-such-key"] = 1
    assert schema_errors(name, document)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_example_parses_and_calls_the_cli_with_options_that_exist(name: str) -> None:
    commands = distval_commands(load(name))
    assert commands, f"{name} never runs distval"
    for arguments in commands:
        parsed = build_parser().parse_args(arguments)  # UsageError (exit 2) on an unknown option or a bad value
        assert parsed.junit, f"{name}: the JUnit file must be written: {arguments}"
        assert parsed.image, f"{name}: the image under test must be named: {arguments}"
        assert parsed.config is None, f"{name}: the shipped default config needs no checkout: {arguments}"


def test_an_unknown_option_would_be_caught() -> None:
    with pytest.raises(UsageError, match="unrecognized arguments: --no-such-option"):
        build_parser().parse_args(["run", "x.yaml", "--image", "i", "--junit", "r.xml", "--no-such-option"])


def test_github_workflow_runs_on_pull_requests_and_nightly_and_shows_the_junit() -> None:
    workflow = load("github-actions.yml")
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert "pull_request" in triggers and triggers["schedule"][0]["cron"]
    steps = workflow["jobs"]["validate"]["steps"]
    junit = distval_commands(workflow)[0][distval_commands(workflow)[0].index("--junit") + 1]
    reporter = [s for s in steps if s.get("uses", "").startswith("mikepenz/action-junit-report")]
    assert reporter and reporter[0]["if"] == "always()" and reporter[0]["with"]["report_paths"] == junit
    # The reporter creates a check run: without this permission a pull request's token cannot.
    assert workflow["permissions"]["checks"] == "write"
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()" and junit in upload[0]["with"]["path"]


def test_github_workflow_builds_the_reaper_image_as_root_before_the_run() -> None:
    """distval builds its reaper's image with mmdebstrap, which needs root: a runner's user is not."""
    lines = shell_lines(load("github-actions.yml"))
    build = next(i for i, line in enumerate(lines) if "fixtures build distval-fixtures/reaper:bookworm" in line)
    run = next(i for i, line in enumerate(lines) if line.strip().startswith("distval run"))
    assert lines[build].strip().startswith("sudo ") and build < run
    assert any("apt-get install" in line and "mmdebstrap" in line for line in lines[:build])


def test_gitlab_job_is_runnable_as_written() -> None:
    pipeline = load("gitlab-ci.yml")
    job = pipeline["distval"]
    variables = job["variables"]
    # dind >= 19.03 serves TLS unless DOCKER_TLS_CERTDIR is empty: plain tcp://docker:2375 needs it empty.
    assert variables["DOCKER_HOST"] == "tcp://docker:2375" and variables["DOCKER_TLS_CERTDIR"] == ""
    assert any(str(s if isinstance(s, str) else s["name"]).startswith("docker:") and "dind" in str(s) for s in job["services"])
    lines = shell_lines(job)
    installs = " ".join(line for line in lines if "apt-get install" in line)
    assert "docker.io" in installs and "python3-venv" in installs and "mmdebstrap" in installs  # docker CLI, venv, reaper
    push = next(i for i, line in enumerate(lines) if "docker push" in line)
    login = next(i for i, line in enumerate(lines) if "docker login" in line)
    run = next(i for i, line in enumerate(lines) if line.strip().startswith("distval run"))
    assert run < login < push


def test_gitlab_job_reports_the_junit_in_merge_requests() -> None:
    job = load("gitlab-ci.yml")["distval"]
    assert job["artifacts"]["reports"]["junit"] == "distval-results.xml"
    assert job["artifacts"]["when"] == "always"
    sources = {rule["if"] for rule in job["rules"]}
    assert '$CI_PIPELINE_SOURCE == "merge_request_event"' in sources  # where the comment promises the JUnit
    assert '$CI_PIPELINE_SOURCE == "schedule"' in sources
