"""The artifact a new user installs: ``python -m build`` makes the wheel and the sdist, each with distval, its suite, the
shipped configs and the fixtures' files; the wheel, installed with pip into a fresh venv on a fresh Debian machine by a
user of the docker group who is not root and has no sudo, runs ``distval run --image X`` to a verdict, with no checkout
of distval anywhere.

The machine is a container of ``distval-fixtures/adopter:bookworm`` (Debian's python3, python3-venv and docker.io's
CLI) with the Engine's socket mounted: distval's own test harness, never an image under test. Its pip reaches no
index: the wheel's dependencies are downloaded here first. What distval builds for itself (the reaper's image, where
this distval's recipe is not in the Engine) comes FROM a base in a real local registry ($DISTVAL_HELPER_BASE): this
machine has no other registry, as a site with a mirror of its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Any

import pytest

from distval.image_names import ADOPTER, REAPER_IMAGE
from tests.docker_helpers import harness_requirements
from tests.local_registry import LocalRegistry
from tests.paths import ROOT

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 55 % (63.6 s) of the 2 cores busy
# (2026-12-07, /proc/stat every 10 s), a core idle much of its time; tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.docker, pytest.mark.waits]

IMAGE = "distval-fixtures/torch:2.6-debian"
SOCKET = "/var/run/docker.sock"


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m build`` of this checkout: the wheel and the sdist (offline: the venv's setuptools builds them)."""
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("distval-*-py3-none-any.whl")
    return wheel


def test_the_wheel_and_the_sdist_hold_the_package_its_suite_configs_and_files(dist: Path) -> None:
    names = set(zipfile.ZipFile(_wheel(dist)).namelist())
    (sdist,) = dist.glob("distval-*.tar.gz")
    in_sdist = {name.split("/", 1)[1] for name in tarfile.open(sdist).getnames() if "/" in name}
    shipped = [
        "distval/cli/main.py",
        "distval_suite/main.py",
        "distval/configs/default.yaml",
        "distval/configs/training.yaml",
        "distval/configs/distval.schema.json",
        "distval/images/files/reaper_daemon.py",
        "distval/images/files/libuv_fix.py",
    ]
    for name in shipped:
        assert name in names, f"the wheel lacks {name}"
        assert name in in_sdist, f"the sdist lacks {name}"
    # The reaper's program is one file in the checkout (a link); in the wheel it is that file's bytes.
    program = zipfile.ZipFile(_wheel(dist)).read("distval/images/files/reaper_daemon.py")
    assert program == (ROOT / "distval/targets/docker/reaper_daemon.py").read_bytes()
    assert not [name for name in names if name.startswith("tests/")]


def _wheels_for(python: str, into: Path) -> None:
    """The wheel's dependencies for the machine's Python, downloaded here: its pip reaches no index."""
    platforms = [arg for minor in range(17, 37) for arg in ("--platform", f"manylinux_2_{minor}_x86_64")]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", python,
         "--implementation", "cp", "--platform", "any", *platforms, "-d", str(into), *harness_requirements()],
        check=True,
        timeout=300,
    )  # fmt: skip


def _push(docker_client: Any, registry: LocalRegistry, tag: str) -> str:
    repository = registry.reference("distval-tests/adopter-base").rsplit(":", 1)[0]
    docker_client.images.get(tag).tag(repository, "v1")
    try:
        lines = list(docker_client.api.push(repository, tag="v1", stream=True, decode=True))
    finally:
        docker_client.images.remove(f"{repository}:v1")
    assert [line["error"] for line in lines if "error" in line] == []
    (digest,) = [line["aux"]["Digest"] for line in lines if "Digest" in line.get("aux", {})]
    return f"{repository}@{digest}"


# What the user types, as the README says: a venv, pip install of the wheel, distval run. `set -e` up to the run, whose
# exit code is the verdict's; then the user's identity, to show the test ran as one.
_SCRIPT = """set -e
mkdir -p "$HOME" && cd "$HOME"
python3 -m venv venv
venv/bin/pip install -q --no-index --find-links /dist --find-links /deps distval
set +e
venv/bin/distval run --image {image} --filter in-container-3ranks --check all_reduce -o results
echo "distval exit code $?"
echo "uid $(id -u) groups $(id -G)"
command -v sudo || echo "no sudo"
test -e /src/distval || echo "no checkout"
"""


def test_a_docker_group_user_without_root_installs_the_wheel_and_gets_a_verdict(
    dist: Path,
    tmp_path: Path,
    docker_client: Any,
    fixture_image: Any,
    local_registry: LocalRegistry,
) -> None:
    machine = fixture_image(ADOPTER)
    fixture_image(IMAGE)
    deps = tmp_path / "deps"
    _wheels_for("3.11", deps)  # bookworm's python3
    base = _push(docker_client, local_registry, machine)
    for folder in (dist, deps):  # pytest's folders are 0700 root's; the user reads them through the mounts
        folder.chmod(0o755)
        for path in folder.iterdir():
            path.chmod(0o644)
    socket_group = os.stat(SOCKET).st_gid
    name = f"distval-tests-adopter-{os.getpid()}"
    container = docker_client.containers.run(
        machine,
        ["bash", "-c", _SCRIPT.format(image=IMAGE)],
        name=name,
        detach=True,
        user="1000:1000",
        group_add=[str(socket_group)],  # the docker group: the socket's group, as on the user's machine
        environment={"HOME": "/tmp/home", "DISTVAL_HELPER_BASE": base},
        volumes={
            SOCKET: {"bind": SOCKET, "mode": "rw"},
            str(dist): {"bind": "/dist", "mode": "ro"},
            str(deps): {"bind": "/deps", "mode": "ro"},
        },
    )
    try:
        status = container.wait(timeout=900)
        output = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
        # The registry's name for the machine's image, where the Engine kept one (the image itself stays).
        for reference in docker_client.images.get(machine).attrs.get("RepoDigests") or ():
            if reference.startswith(local_registry.host + "/"):
                docker_client.images.remove(reference)
    assert status["StatusCode"] == 0, output[-4000:]
    assert "distval exit code 0" in output, output[-4000:]
    assert "check results passed; exit code 0" in output, output[-4000:]
    assert f"uid 1000 groups 1000 {socket_group}" in output and "no sudo" in output and "no checkout" in output
    assert "Traceback" not in output, output[-4000:]
    # Its reaper ran (no "no reaper" line): the reaper's image was there or built, without root.
    assert "no reaper for run" not in output, output[-4000:]
    assert docker_client.images.get(REAPER_IMAGE) is not None
