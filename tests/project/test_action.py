"""distval's GitHub composite action (action.yml at the repository's root): valid against GitHub's action metadata
schema (SchemaStore's, vendored in tests/schemas), every distval option it passes exists, inputs reach its shell only
through the environment, it installs, runs, uploads the reports and fails on distval's verdict, and the three-line use
that README.md and docs/ci show has every required input and no other."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from distval.cli.main import build_parser
from tests.paths import ROOT, SCHEMAS

ACTION = ROOT / "action.yml"
SCHEMA = SCHEMAS / "github-action.json"
# A workflow's step that uses the action: the README's and docs/ci's.
USES = re.compile(r"^(?P<indent> *)- uses: \./distval\b.*$", re.MULTILINE)


def action() -> Any:
    return yaml.safe_load(ACTION.read_text(encoding="utf-8"))


def schema_errors(document: Any) -> list[str]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return [error.message for error in jsonschema.Draft7Validator(schema).iter_errors(document)]


def test_the_action_validates_against_the_action_metadata_schema() -> None:
    assert schema_errors(action()) == []


def test_the_schema_check_can_fail() -> None:
    broken = copy.deepcopy(action())
    broken["runs"]["steps"][1]["no-such-key"] = 1
    del broken["runs"]["steps"][2]["shell"]  # a composite run step must name its shell
    assert len(schema_errors(broken)) >= 1
    assert schema_errors({"name": "x"})  # no description, no runs


def _steps() -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = action()["runs"]["steps"]
    return steps


def test_the_action_installs_runs_uploads_and_then_gives_distvals_verdict() -> None:
    steps = _steps()
    assert action()["runs"]["using"] == "composite"
    install = next(i for i, s in enumerate(steps) if "pip install" in s.get("run", ""))
    run = next(i for i, s in enumerate(steps) if "\ndistval run " in s.get("run", ""))
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact@"))
    verdict = next(i for i, s in enumerate(steps) if 'exit "${DISTVAL_EXIT' in s.get("run", ""))
    assert install < run < upload < verdict
    assert steps[upload]["if"] == "always()" and steps[upload]["with"]["path"] == "${{ inputs.results }}"
    # The run step never fails by itself (the reports are uploaded first); its exit code is the last step's.
    assert steps[run]["run"].startswith("set +e\n") and 'echo "exit-code=$code"' in steps[run]["run"]
    assert steps[verdict]["env"]["DISTVAL_EXIT"] == "${{ steps.run.outputs.exit-code }}"
    # What it installs by default: the action's own checkout, this very distval.
    assert steps[install]["env"]["DISTVAL_SOURCE"] == "${{ github.action_path }}"


def test_inputs_reach_the_shell_only_through_the_environment() -> None:
    """An input pasted into a script is a script injection (an image name with `"; curl ...`)."""
    for step in _steps():
        assert "${{" not in step.get("run", ""), step


def test_the_distval_run_line_uses_options_that_exist() -> None:
    rows = [row for s in _steps() for row in s.get("run", "").splitlines()]
    (command,) = [row for row in rows if row.strip().startswith("distval run")]
    words = command.split()[1:]
    words = [w for w in words if not w.startswith("${DISTVAL_CONFIG") and w != '"${extra[@]}"']
    values = {'"$DISTVAL_IMAGE"': "my/torch:1", '"$DISTVAL_RESULTS"': "results"}
    parsed = build_parser().parse_args([values.get(w, w) for w in words])
    assert parsed.image == "my/torch:1" and parsed.output_dir == "results"


def _three_line_uses(path: Path) -> list[dict[str, Any]]:
    text = path.read_text(encoding="utf-8")
    found = []
    for match in USES.finditer(text):
        indent = match.group("indent")
        block = [match.group(0)]
        for line in text[match.end() + 1 :].splitlines():
            if not line.startswith(indent + "  ") or not line.strip():
                break
            block.append(line)
        (step,) = yaml.safe_load("\n".join(line[len(indent) :] for line in block))
        found.append(step)
    return found


@pytest.mark.parametrize("path", ["README.md", "docs/ci/github-action-workflow.yml"])
def test_the_shown_use_is_three_lines_with_the_required_inputs(path: str) -> None:
    steps = _three_line_uses(ROOT / path)
    assert steps, f"{path} does not show the action"
    inputs = action()["inputs"]
    required = {name for name, spec in inputs.items() if spec.get("required")}
    for step in steps:
        given = set(step.get("with", {}))
        assert required <= given and given <= set(inputs), (path, step)
    assert len(steps[0]) == 2 and len(steps[0]["with"]) == 1  # uses + with: image, the three lines


def test_the_example_workflow_validates_against_githubs_workflow_schema() -> None:
    from tests.project.test_ci_examples import schema_errors as workflow_errors

    document = yaml.safe_load((ROOT / "docs/ci/github-action-workflow.yml").read_text(encoding="utf-8"))
    assert workflow_errors("github-actions.yml", document) == []
