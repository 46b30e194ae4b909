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
import subprocess
from importlib import resources
from pathlib import Path
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
    assert reporter and reporter[0]["with"]["report_paths"] == junit
    # Always, except on a fork's pull request, whose read-only token cannot create the check run: the step would go
    # red while the image passed.
    assert reporter[0]["if"] == GITHUB_NOT_A_FORK
    # The reporter creates a check run: without this permission a pull request's token cannot.
    assert workflow["permissions"]["checks"] == "write"
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()" and junit in upload[0]["with"]["path"]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_no_sudo_and_no_mmdebstrap_in_the_pipelines(name: str) -> None:
    """distval's reaper image is built by the Engine FROM a base it pulls: the pipelines need no root step for it."""
    lines = shell_lines(load(name))
    assert not [line for line in lines if line.strip().startswith("sudo ") or "mmdebstrap" in line]
    assert not [line for line in lines if "fixtures build" in line]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_pipelines_install_distval_from_something_that_exists(name: str) -> None:
    """No placeholder organisation for distval itself: a checkout of distval beside the pipeline, installed by path
    (the registry the image under test is pushed to is the user's own, and stays a placeholder)."""
    specs = re.findall(r"DISTVAL_PIP_SPEC: \"?([^\"\n]+)", (DOCS / name).read_text())
    assert specs and set(specs) == {"./distval"}
    lines = shell_lines(load(name))
    assert any("pip install" in line for line in lines)


def test_gitlab_job_is_runnable_as_written() -> None:
    pipeline = load("gitlab-ci.yml")
    job = pipeline["distval"]
    variables = job["variables"]
    # TLS to dind: its port 2376, the certificates it writes under DOCKER_TLS_CERTDIR, the client half verified.
    assert variables["DOCKER_HOST"] == "tcp://docker:2376" and variables["DOCKER_TLS_CERTDIR"] == "/certs"
    assert variables["DOCKER_TLS_VERIFY"] == "1" and variables["DOCKER_CERT_PATH"] == "/certs/client"
    assert any(str(s if isinstance(s, str) else s["name"]).startswith("docker:") and "dind" in str(s) for s in job["services"])
    lines = shell_lines(job)
    installs = " ".join(line for line in lines if "apt-get install" in line)
    assert "docker.io" in installs and "python3-venv" in installs  # the docker CLI, the venv
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


# -- The release: push, attest in the registry, then verify in a job that holds the public key only ---------------
GITHUB_PUBLISHING = "github.event_name == 'push' && github.ref == 'refs/heads/main'"
GITLAB_PUBLISHING = 'if [ "$CI_PIPELINE_SOURCE" = "push" ] && [ "$CI_COMMIT_BRANCH" = "$CI_DEFAULT_BRANCH" ]; then'
GITHUB_NOT_A_FORK = (
    "always() && (github.event_name != 'pull_request' || github.event.pull_request.head.repo.full_name == github.repository)"
)
POLICY = DOCS / "release-policy.yaml"
REPOSITORY = "registry.example.com/your-org/torch"
DIGEST = "sha256:" + "d1" * 32


def _release_lines(document: Any) -> list[str]:
    """The shell lines with the repository (``${IMAGE%:*}``, ``$REPOSITORY``) and the pushed digest (``$digest``,
    ``$DIGEST``) as the shell would have them, every other variable a word."""
    lines = []
    for text in _strings(document):
        for line in text.replace("\\\n", " ").splitlines():
            line = line.replace("${IMAGE%:*}", REPOSITORY).replace("$REPOSITORY", REPOSITORY)
            line = re.sub(r"\$digest\b|\$DIGEST\b", DIGEST, line)
            lines.append(re.sub(r"\$\{\{[^}]*\}\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", "v1", line))
    return lines


def _commands(lines: list[str], verb: str) -> list[list[str]]:
    """The arguments of each `distval VERB` line."""
    return [shlex.split(line)[1:] for line in lines if line.strip().startswith(f"distval {verb} ")]


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_pushed_digest_is_attested_and_verified_from_the_registry_with_the_committed_key_and_policy(name: str) -> None:
    document = load(name)
    (run,) = distval_commands(document)
    ran = build_parser().parse_args(run)
    (attest_words,) = _commands(_release_lines(document), "attest")
    (verify_words,) = _commands(_release_lines(document), "verify")
    attest, verify = build_parser().parse_args(attest_words), build_parser().parse_args(verify_words)
    assert not attest.generate_key and attest.report == ran.json and attest.junit == ran.junit
    assert attest.push and attest.image == verify.image == f"{REPOSITORY}@{DIGEST}"  # the digest pushed, never a tag
    assert not attest.key.endswith(".pub")  # signed with the private key from a CI secret, never the committed file
    assert verify.registry and verify.attestation is None  # the attestation stored beside the image
    assert verify.key == ".distval/release.pub" and verify.policy == ".distval/release-policy.yaml"


def test_github_attests_after_the_push_and_verifies_in_a_job_without_the_signing_key() -> None:
    workflow = load("github-actions.yml")
    assert workflow[True]["push"]["branches"] == ["main"]
    validate, release = workflow["jobs"]["validate"], workflow["jobs"]["release"]
    steps = validate["steps"]
    runs = [(i, step) for i, step in enumerate(steps) if "run" in step]
    (run,) = [i for i, step in runs if "distval run" in step["run"]]
    (publish,) = [i for i, step in runs if "distval attest" in step["run"]]
    (login,) = [i for i, step in enumerate(steps) if "docker/login-action" in step.get("uses", "")]
    assert run < login < publish and steps[publish]["id"] == "publish"
    text = steps[publish]["run"]
    assert text.index("docker push") < text.index("distval attest")  # attested after the push, by its digest
    assert "umask 077" in text.splitlines()[0]  # the key file is written private
    assert steps[publish]["env"]["DISTVAL_SIGNING_KEY"] == "${{ secrets.DISTVAL_SIGNING_KEY }}"
    for _, step in runs:  # the signing key and the registry only on the publishing path
        if any(word in step["run"] for word in ("distval attest", "docker push", "DISTVAL_SIGNING_KEY")):
            assert step.get("if") == GITHUB_PUBLISHING, step
    assert steps[login]["if"] == GITHUB_PUBLISHING
    assert validate["outputs"]["digest"] == "${{ steps.publish.outputs.digest }}"
    upload = next(step for step in steps if step.get("uses", "").startswith("actions/upload-artifact"))
    assert "distval-attestation.json" in upload["with"]["path"].split()
    # The release job: after validate, on the publishing path, the public key only; releases only what verified.
    assert release["needs"] == "validate" and release["if"] == GITHUB_PUBLISHING
    assert release["env"]["DIGEST"] == "${{ needs.validate.outputs.digest }}"
    assert "DISTVAL_SIGNING_KEY" not in str(release) and "distval attest" not in str(release)
    named = [step.get("run", "") for step in release["steps"]]
    verify = next(i for i, text in enumerate(named) if text.startswith("distval verify"))
    tagged = next(i for i, text in enumerate(named) if "imagetools create" in text)
    assert verify < tagged and not re.search(r"always\(\)|failure\(\)|continue-on-error", str(release["steps"][tagged:]))


def test_gitlab_attests_after_the_push_and_verifies_in_a_job_without_the_signing_key() -> None:
    document = load("gitlab-ci.yml")
    job, release = document["distval"], document["distval-release"]
    assert document["stages"] == ["validate", "release"]
    assert "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH" in {rule["if"] for rule in job["rules"]}
    (publishing,) = [item for item in job["script"] if "docker push" in item]
    lines = publishing.replace("\\\n", " ").splitlines()
    assert lines[0] == GITLAB_PUBLISHING and lines[-1] == "fi"
    order = [
        next(i for i, line in enumerate(lines) if word in line) for word in ("docker login", "docker push", "distval attest")
    ]
    assert order == sorted(order)
    assert not any("docker push" in item or "distval attest" in item for item in job["before_script"])
    assert job["environment"]["name"] == "signing"  # the signing key's environment scope: this job's only
    assert job["artifacts"]["reports"]["dotenv"] == "release.env" and "distval-attestation.json" in job["artifacts"]["paths"]
    assert release["stage"] == "release" and release["needs"] == ["distval"] and "environment" not in release
    assert release["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "push" && $CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH'}]
    assert "DISTVAL_SIGNING_KEY" not in str(release) and "distval attest" not in str(release)
    script = release["script"]
    verify = next(i for i, line in enumerate(script) if line.startswith("distval verify"))
    tagged = next(i for i, line in enumerate(script) if line.startswith("skopeo copy"))
    assert verify < tagged


def test_the_shipped_release_policy_loads_with_the_real_loader() -> None:
    from distval.attestation.policy import parse_policy
    from distval.config import load_config

    policy = parse_policy(POLICY.read_bytes(), str(POLICY))
    raw = yaml.safe_load(POLICY.read_text())
    assert raw["max_age_days"] == policy.max_age_days > 0 and policy.required_checks
    config = load_config(ROOT / "configs" / "default.yaml")
    checks = {check.name for scenario in config.scenarios for check in scenario.checks}
    for name in (*policy.required_checks, *(policy.allow_skipped or ())):
        assert name.split(".")[0] in checks, f"{name} is no testcase of the default config"
    assert not set(policy.required_checks) & set(policy.allow_skipped or ())


def _predicate(cases: dict[str, str]) -> dict[str, Any]:
    image = "sha256:" + "ab" * 32
    checks = [{"name": name, "status": status, "message": "why"} for name, status in cases.items()]
    return {
        "image": {"id": image},
        "run": {"exit_code": 0, "early_error": None},
        "scenarios": [{"name": name, "image_id": image, "checks": checks} for name in ("in-container", "cross-container")],
    }


def test_the_release_policy_passes_each_good_image_and_refuses_a_run_that_skipped_everything() -> None:
    from distval.attestation.policy import parse_policy, verdict_refusal
    from tests.docker_helpers import GOOD

    policy = parse_policy(POLICY.read_bytes(), str(POLICY))
    names = {"exit_status", "process_group", *policy.required_checks, *(policy.allow_skipped or ())}
    for image, (skips, _) in GOOD.items():
        refusal = verdict_refusal(_predicate({n: "skipped" if n in skips else "passed" for n in names}), policy)
        assert refusal is None, f"{image}: {refusal}"
    everything_skipped = {n: "passed" if n in ("exit_status", "process_group") else "skipped" for n in names}
    assert "required check env was skipped" in str(verdict_refusal(_predicate(everything_skipped), policy))
    another_skip = {**{n: "passed" for n in names}, "store.extra": "skipped"}
    assert "was skipped, which the policy does not allow" in str(verdict_refusal(_predicate(another_skip), policy))


def _stand_ins(tmp_path: Path, verify_exit: int) -> dict[str, str]:
    """`distval`, `docker` and `skopeo` that log their command lines to calls.log; `docker push` says the digest as
    the docker CLI does; `distval verify` exits ``verify_exit``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    bodies = {
        "distval": f'[ "$1" = verify ] && exit {verify_exit}\nexit 0',
        "docker": f'[ "$1" = push ] && echo "v1: digest: {DIGEST} size: 1234"\ncat >/dev/null\nexit 0',
        "skopeo": "cat >/dev/null\nexit 0",
    }
    for name, body in bodies.items():
        script = bin_dir / name
        script.write_text(f'#!/bin/sh\necho "{name} $*" >>{shlex.quote(str(log))}\n{body}\n')
        script.chmod(0o755)
    (tmp_path / "runner").mkdir()
    return {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "IMAGE": f"{REPOSITORY}:1",
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "HOME": str(tmp_path),
    }


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def _verbs(tmp_path: Path) -> list[str]:
    return [" ".join(call.split()[:2]) for call in _calls(tmp_path)]


def _github_steps(job: str, tmp_path: Path, env: dict[str, str]) -> bool:
    """The publishing shell steps of ``job`` on a push to main, as GitHub runs them (bash -eo pipefail; a step that fails
    skips every later one whose `if` does not ask for always()); whether one failed."""
    whole = load("github-actions.yml")["jobs"][job]
    for step in whole["steps"]:
        # The validate job's publishing steps (the rest build and run), the release job's own (its installs aside).
        condition = step.get("if") if "if" not in whole else whole["if"]
        if "run" not in step or "pip install" in step["run"] or condition != GITHUB_PUBLISHING:
            continue
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], env=env, cwd=tmp_path)
        if done.returncode != 0:
            return True
    return False


def test_github_pushes_then_attests_the_pushed_digest_and_hands_it_on(tmp_path: Path) -> None:
    env = _stand_ins(tmp_path, 0) | {"DISTVAL_SIGNING_KEY": "-----BEGIN PRIVATE KEY-----"}
    assert not _github_steps("validate", tmp_path, env)
    assert _verbs(tmp_path) == ["docker push", "distval attest"]
    assert f"--image {REPOSITORY}@{DIGEST} " in _calls(tmp_path)[1] and " --push " in _calls(tmp_path)[1]
    assert (tmp_path / "output").read_text() == f"digest={DIGEST}\n"
    assert not (tmp_path / "runner" / "release.key").exists()  # written for attest, removed after it


@pytest.mark.parametrize(("verify_exit", "released"), [(0, True), (6, False), (1, False), (2, False)])
def test_github_release_job_tags_only_when_verify_exits_0(tmp_path: Path, verify_exit: int, released: bool) -> None:
    env = _stand_ins(tmp_path, verify_exit) | {"REPOSITORY": REPOSITORY, "DIGEST": DIGEST}
    assert _github_steps("release", tmp_path, env) == (not released)
    assert _calls(tmp_path)[0].startswith(f"distval verify --registry --image {REPOSITORY}@{DIGEST} ")
    assert ("docker buildx" in _verbs(tmp_path)) == released


@pytest.mark.parametrize(
    ("source", "branch", "calls"),
    [
        ("push", "main", ["docker login", "docker push", "distval attest"]),
        ("push", "feature", []),
        # The nightly runs on the default branch too: it validates the same commit again, and never re-publishes it.
        ("schedule", "main", []),
        ("web", "main", []),
    ],
)
def test_gitlab_pushes_and_attests_only_on_a_push_to_the_default_branch(
    tmp_path: Path, source: str, branch: str, calls: list[str]
) -> None:
    (publishing,) = [item for item in load("gitlab-ci.yml")["distval"]["script"] if "docker push" in item]
    env = _stand_ins(tmp_path, 0) | {"CI_PIPELINE_SOURCE": source, "CI_COMMIT_BRANCH": branch, "CI_DEFAULT_BRANCH": "main"}
    done = subprocess.run(["bash", "-eo", "pipefail", "-c", publishing], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _verbs(tmp_path) == calls
    if calls:
        assert f"--image {REPOSITORY}@{DIGEST} " in _calls(tmp_path)[2]
        assert (tmp_path / "release.env").read_text() == f"DIGEST={DIGEST}\n"


@pytest.mark.parametrize(("verify_exit", "released"), [(0, True), (6, False), (1, False)])
def test_gitlab_release_job_tags_only_when_verify_exits_0(tmp_path: Path, verify_exit: int, released: bool) -> None:
    """The release job's script as GitLab runs it: line by line, the job ending at the first that fails."""
    env = _stand_ins(tmp_path, verify_exit) | {"REPOSITORY": REPOSITORY, "DIGEST": DIGEST, "CI_REGISTRY": "registry.example.com"}
    for line in load("gitlab-ci.yml")["distval-release"]["script"]:
        if subprocess.run(["bash", "-eo", "pipefail", "-c", line], env=env, cwd=tmp_path).returncode != 0:
            break
    assert ("skopeo copy" in _verbs(tmp_path)) == released
    assert f"distval verify --registry --image {REPOSITORY}@{DIGEST} --key .distval/release.pub" in _calls(tmp_path)[1]
