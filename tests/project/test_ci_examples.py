"""The pipeline examples in docs/ci/ are real files users copy: they parse, and every distval command
in them uses options the CLI has."""

from __future__ import annotations

import re
import shlex
from typing import Any

import pytest
import yaml

from distval.cli.main import build_parser
from distval.errors import UsageError
from tests.paths import ROOT

DOCS = ROOT / "docs" / "ci"


def _strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [s for value in node.values() for s in _strings(value)]
    if isinstance(node, list):
        return [s for value in node for s in _strings(value)]
    return []


def distval_commands(document: Any) -> list[list[str]]:
    commands = []
    for text in _strings(document):
        for line in text.replace("\\\n", " ").splitlines() if "\n" in text.strip() else [text]:
            # The pipeline's variables, as the shell would expand them ($CI_REGISTRY_IMAGE, ${{ env.IMAGE }}).
            tokens = shlex.split(re.sub(r"\$\{\{[^}]*\}\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "v1", line))
            if tokens[:2] == ["distval", "run"]:
                commands.append(tokens[1:])
    return commands


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_example_parses_and_calls_the_cli_with_options_that_exist(name: str) -> None:
    document = yaml.safe_load((DOCS / name).read_text())
    commands = distval_commands(document)
    assert commands, f"{name} never runs distval"
    for arguments in commands:
        parsed = build_parser().parse_args(arguments)  # UsageError (exit 2) on an unknown option or a bad value
        assert parsed.junit, f"{name}: the JUnit file must be written: {arguments}"
        assert parsed.image, f"{name}: the image under test must be named: {arguments}"


def test_github_workflow_runs_nightly_and_publishes_the_junit() -> None:
    workflow = yaml.safe_load((DOCS / "github-actions.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["schedule"][0]["cron"]
    steps = workflow["jobs"]["validate"]["steps"]
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()" and "distval-results.xml" in upload[0]["with"]["path"]


def test_gitlab_job_reports_the_junit() -> None:
    pipeline = yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())
    job = pipeline["distval"]
    assert job["artifacts"]["reports"]["junit"] == "distval-results.xml"
    assert job["artifacts"]["when"] == "always"
    assert any(rule["if"] == '$CI_PIPELINE_SOURCE == "schedule"' for rule in job["rules"])


def test_an_unknown_option_would_be_caught() -> None:
    with pytest.raises(UsageError, match="unrecognized arguments: --no-such-option"):
        build_parser().parse_args(["run", "x.yaml", "--image", "i", "--junit", "r.xml", "--no-such-option"])


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_example_runs_a_scenario_file_that_exists(name: str) -> None:
    """The examples check distval out into ./distval and run one of its configs: that file must exist here."""
    repository = DOCS.parent.parent
    for arguments in distval_commands(yaml.safe_load((DOCS / name).read_text())):
        config = build_parser().parse_args(arguments).config
        assert (repository / str(config).removeprefix("distval/")).is_file(), f"{name}: {config} is not a config of distval"
