"""The pipeline examples of docs/ci/, run as their runners would run them, as far as this machine can (opt-in:
``DISTVAL_CI_EXAMPLES=1``; about 10 minutes together, so not part of every CI run).

What is real: every shell line of each example, in order, exactly as written; distval installed from a wheel built
from this checkout into a fresh venv (the examples' ``$DISTVAL_PIP_SPEC``); the image under test built by the
example's own ``docker build`` from a project whose Dockerfile starts FROM the 2.6 fixture; Debian's archive for
every ``apt-get install``. What stands in, and why:

- GitHub Actions (ubuntu-24.04 runner): this machine is the runner. ``uses:`` steps are not shell: checkout is a
  project directory, setup-python is this machine's python3, the JUnit reporter is replaced by validating the file
  against Jenkins' junit-10.xsd. The runner's user is not root; here everything runs as root, so ``sudo`` is a
  script that runs its arguments (what sudo does for root). The workflow runs as on a push to main, so its
  release steps run: the repository secret DISTVAL_SIGNING_KEY is the private key of a pair made here, whose
  public key is the project's .distval/release.pub beside docs/ci/release-policy.yaml as .distval/release-policy.yaml;
  the registry login (a ``uses:`` step) is skipped, and ``docker push`` is a stand-in that records the image (there
  is no registry to push to) in front of the real docker CLI, which does everything else.
- GitLab (Docker executor, privileged runner, ``docker:27-dind`` service): the job image ``debian:bookworm`` is
  distval's own bookworm root filesystem (the reaper's base: nothing can be pulled here); the ``docker:27-dind``
  service is a node Engine (Debian's dockerd 20.10 in a container, ``distval nodes``) serving TLS on 2376 as dind does,
  its client certificates mounted at /certs/client as the runner's volume would; it is reached by the node's name,
  which its server certificate names, where the job says ``docker`` (the service alias); ``privileged = true`` is
  the node's capability set (every capability but CAP_SYS_RESOURCE,
  which this host cannot grant). The base image reaches the service Engine with ``docker save | docker load``,
  where the job's Dockerfile would pull it. The job runs on the default branch, so its release lines run: the
  File variable DISTVAL_SIGNING_KEY is a file with the private key of a pair made here (mounted where a runner writes
  File variables), the project has the public key and the policy as for GitHub, and ``docker login`` and ``docker
  push`` are a stand-in in /usr/local/bin (there is no registry) in front of the real CLI. That a feature branch
  pushes nothing is tests/project/test_ci_examples.py's. This machine reaches PyPI through a
  TLS-intercepting proxy: the job container gets the machine's CA bundle as PIP_CERT, as a runner there would.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from distval.attestation.keys import generate_key_pair
from distval.images import NODE_ENGINE
from distval.images.recipes import REAPER_BASE
from tests.docker_helpers import validate
from tests.paths import ROOT

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(os.environ.get("DISTVAL_CI_EXAMPLES") != "1", reason="opt-in: DISTVAL_CI_EXAMPLES=1 (~10 min)"),
]

DOCS = ROOT / "docs" / "ci"
BASE = "distval-fixtures/torch:2.6-debian"
JOB_DEADLINE_S = 1500
HOST_CA = (
    os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
)  # apt-get, pip, the reaper's mmdebstrap build and the default config, at a load of 10


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(ROOT)],
        check=True,
    )
    (found,) = out.glob("distval-*.whl")
    return found


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Dockerfile").write_text(f"FROM {BASE}\nLABEL org.example.built-by=ci-example\n")
    return project


def _release_files(project: Path) -> str:
    """The public key and the policy where the examples' release lines read them; the private key, the CI secret."""
    private, public = generate_key_pair(None)
    (project / ".distval").mkdir()
    (project / ".distval" / "release.pub").write_text(public)
    (project / ".distval" / "release-policy.yaml").write_text((DOCS / "release-policy.yaml").read_text())
    return private


def _docker_stand_in(path: Path, real: str, log: str) -> None:
    """A `docker` whose login (reading the password from stdin) and push only say so, on stdout and in ``log``: there
    is no registry. Every other command is the real CLI's."""
    said = f'echo "docker $1 stand-in: $*" | tee -a {shlex.quote(log)}; exit 0'
    path.write_text(
        f'#!/bin/sh\ncase "$1" in\n  login) cat >/dev/null; {said};;\n  push) {said};;\nesac\nexec {shlex.quote(real)} "$@"\n'
    )
    path.chmod(0o755)


def _shell_text(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def test_github_workflow_runs_as_written(
    fixture_image: Callable[[str], str], wheel: Path, tmp_path: Path, docker_client: Any
) -> None:
    fixture_image(BASE)
    workflow = yaml.safe_load((DOCS / "github-actions.yml").read_text())
    job = workflow["jobs"]["validate"]
    project = _project(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    sudo = bin_dir / "sudo"
    sudo.write_text('#!/bin/sh\nexec "$@"\n')
    sudo.chmod(0o755)
    secrets = {"DISTVAL_SIGNING_KEY": _release_files(project)}
    real_docker = shutil.which("docker")
    assert real_docker is not None
    _docker_stand_in(bin_dir / "docker", real_docker, str(tmp_path / "pushed.log"))
    (tmp_path / "runner-temp").mkdir()
    venv = tmp_path / "python"  # actions/setup-python: a fresh Python environment of its own
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    image = "distval-ci-example/torch:github"
    environment = {
        "PATH": f"{venv / 'bin'}:{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(tmp_path / "home"),
        "GITHUB_WORKSPACE": str(project),
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_STEP_SUMMARY": str(tmp_path / "step-summary.md"),
        "GITHUB_EVENT_NAME": "push",
        "GITHUB_REF": "refs/heads/main",
        "RUNNER_TEMP": str(tmp_path / "runner-temp"),
        **{key: str(value) for key, value in job["env"].items()},
        "IMAGE": image,
        "DISTVAL_PIP_SPEC": str(wheel),
        "DOCKER_HOST": os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock"),
    }
    Path(environment["HOME"]).mkdir()
    ran = []
    try:
        for step in job["steps"]:
            if "run" not in step:
                continue
            # A push to main: every condition of a shell step is the publishing one, true here.
            assert step.get("if") in (None, PUBLISHING), step.get("if")
            secret = {key: _secrets(str(value), secrets) for key, value in step.get("env", {}).items()}
            # GitHub runs each step with `bash --noprofile --norc -eo pipefail {0}`.
            started = time.monotonic()
            done = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                cwd=project,
                env=environment | secret,
                timeout=JOB_DEADLINE_S,
                capture_output=True,
                text=True,
            )
            ran.append((step.get("name", step["run"][:40]), done.returncode, round(time.monotonic() - started, 1)))
            print(f"step {ran[-1]}", flush=True)
            output = f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
            assert done.returncode == 0, f"{step.get('name')}: exit {done.returncode}\n{output}"
        root = validate(project / "distval-results.xml")  # the reporter's input, against junit-10.xsd
        assert int(root.get("tests", "0")) > 0 and root.get("failures") == "0" and root.get("errors") == "0"
        assert (project / "distval-results.json").is_file() and (project / "distval-summary.md").is_file()
        assert Path(environment["GITHUB_STEP_SUMMARY"]).read_text().strip()
        assert (project / "distval-attestation.json").is_file()
        assert (tmp_path / "pushed.log").read_text() == f"docker push stand-in: push {image}\n"  # after verify passed
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True, check=False)
    print(f"GitHub steps: {ran}", flush=True)


@pytest.fixture
def dind_service(fixture_image: Callable[[str], str]) -> Iterator[Any]:
    from distval.targets.engines.dind import start_nodes, stop_nodes

    fixture_image(NODE_ENGINE)
    node_set = start_nodes(1, progress=lambda line: print(line, flush=True))  # over TLS, as the example's dind
    try:
        yield node_set
    finally:
        stop_nodes(node_set.set_id)


PUBLISHING = "github.event_name == 'push' && github.ref == 'refs/heads/main'"


def _secrets(value: str, secrets: dict[str, str]) -> str:
    return re.sub(r"\$\{\{\s*secrets\.([A-Za-z0-9_]+)\s*\}\}", lambda match: secrets[match.group(1)], value)


def test_gitlab_job_runs_as_written(
    fixture_image: Callable[[str], str], wheel: Path, tmp_path: Path, dind_service: Any, docker_client: Any
) -> None:
    fixture_image(BASE)
    fixture_image(REAPER_BASE)
    pipeline = yaml.safe_load((DOCS / "gitlab-ci.yml").read_text())
    job = pipeline["distval"]
    node = dind_service.nodes[0]
    address = node.url.removeprefix("https://").rsplit(":", 1)[0]
    tls = dind_service.tls_dir
    # The Dockerfile's FROM, where the job's Engine would pull it.
    load = f"docker --tlsverify -H {shlex.quote(node.url.replace('https://', 'tcp://'))} load -q"
    subprocess.run(f"docker save {BASE} | DOCKER_CERT_PATH={shlex.quote(tls)} {load}", shell=True, check=True)
    project = _project(tmp_path)
    (project / "wheels").mkdir()
    (project / "wheels" / wheel.name).write_bytes(wheel.read_bytes())
    runner_files = tmp_path / "runner-files"  # a File variable's file, and the docker login/push stand-in
    runner_files.mkdir()
    (runner_files / "DISTVAL_SIGNING_KEY").write_text(_release_files(project))
    _docker_stand_in(runner_files / "docker", "/usr/bin/docker", "/dev/null")
    predefined = {
        "CI": "true",
        "GITLAB_CI": "true",
        "CI_REGISTRY": "registry.example.com",
        "CI_REGISTRY_IMAGE": "registry.example.com/group/project",
        "CI_COMMIT_SHORT_SHA": "0a1b2c3d",
        "CI_COMMIT_BRANCH": "main",
        "CI_DEFAULT_BRANCH": "main",
        "CI_PIPELINE_SOURCE": "push",
        "CI_PROJECT_DIR": "/builds/project",
        "CI_REGISTRY_USER": "gitlab-ci-token",
        "CI_REGISTRY_PASSWORD": "stand-in",
        "DISTVAL_SIGNING_KEY": "/builds/project.tmp/DISTVAL_SIGNING_KEY",  # a File variable: the path of its file
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",  # debian:bookworm's
    }
    variables = dict(predefined)
    for key, value in job["variables"].items():  # GitLab expands a variable's $references to those defined before
        variables[key] = _expand(str(value), variables)
    # The node's server certificate names the node, not the service alias `docker`: the one line that differs.
    variables["DOCKER_HOST"] = variables["DOCKER_HOST"].replace("tcp://docker:", f"tcp://{node.name}:")
    variables["DISTVAL_PIP_SPEC"] = f"/builds/project/wheels/{wheel.name}"
    # As GitLab's shell does: each line echoed ("$ line"), then run; the first that fails ends the job.
    lines = _shell_text(job["before_script"]) + _shell_text(job["script"])
    script = "\n".join(f"echo {shlex.quote('$ ' + line.splitlines()[0])}\n{line}" for line in lines)
    name = f"distval-ci-example-{os.getpid()}"
    command = [
        "docker", "create", "--name", name, "--label", "distval.ci-example=1",
        "--add-host", f"docker:{address}", "--add-host", f"{node.name}:{address}",
        # The runner's `volumes = ["/certs/client"]`: dind's client certificates, which the job's docker CLI and distval use.
        "-v", f"{tls}:/certs/client:ro",
        "--cap-add", "ALL", "--cap-drop", "SYS_RESOURCE", "--security-opt", "seccomp=unconfined",
        "-v", f"{project}:/builds/project", "-w", "/builds/project",
        "-v", f"{runner_files / 'DISTVAL_SIGNING_KEY'}:/builds/project.tmp/DISTVAL_SIGNING_KEY:ro",
        "-v", f"{runner_files / 'docker'}:/usr/local/bin/docker:ro",
        # This machine reaches PyPI through a proxy whose CA only its own trust store holds (the runner's network).
        *(["-v", f"{HOST_CA}:/etc/distval-runner-ca.crt:ro", "-e", "PIP_CERT=/etc/distval-runner-ca.crt"]
          if Path(HOST_CA).is_file() else []),
        *[arg for key, value in variables.items() for arg in ("-e", f"{key}={value}")],
        REAPER_BASE,  # stands in for debian:bookworm
        "bash", "-eo", "pipefail", "-c", script,
    ]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True)
    try:
        subprocess.run(["docker", "network", "connect", dind_service.network, name], check=True)
        started = time.monotonic()
        subprocess.run(["docker", "start", name], check=True, capture_output=True)
        done = subprocess.run(["docker", "wait", name], capture_output=True, text=True, timeout=JOB_DEADLINE_S)
        logs = subprocess.run(["docker", "logs", name], stderr=subprocess.STDOUT, stdout=subprocess.PIPE, text=True).stdout
        elapsed = time.monotonic() - started
        print(textwrap.indent(logs[-6000:], "  job: "), flush=True)
        print(f"GitLab job: exit {done.stdout.strip()} after {elapsed:.0f} s", flush=True)
        assert done.stdout.strip() == "0", logs[-4000:]
        root = validate(project / "distval-results.xml")
        assert int(root.get("tests", "0")) > 0 and root.get("failures") == "0" and root.get("errors") == "0"
        assert (project / "distval-results.json").is_file() and (project / "distval-summary.md").is_file()
        assert (project / "distval-attestation.json").is_file()
        # The default branch: verified, then logged in and pushed (the stand-in's lines), in that order.
        verified = logs.index(f"verified: {variables['IMAGE']} (")
        assert verified < logs.index("docker login stand-in:") < logs.index(f"docker push stand-in: push {variables['IMAGE']}")
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def _expand(value: str, variables: dict[str, str]) -> str:
    for key, known in sorted(variables.items(), key=lambda item: -len(item[0])):
        value = value.replace("${" + key + "}", known).replace("$" + key, known)
    return value
