"""The libraries and environment checks against the real Engine: the three good fixtures pass (each with the names its
own libraries read), and each broken image fails with the finding it was built for, or, where the loader prevents
the defect, passes and says what it loaded. Marked ``docker``."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

# CI runs this file in its second process (.ci/run): alone in a CI run, images built, it kept 63 % (79.7 s) of the 2 cores busy
# (2026-12-07, /proc/stat every 10 s), a core idle much of its time; tests/budgets.py WAITING_S holds its budget.
pytestmark = [pytest.mark.docker, pytest.mark.waits]

CONFIG = """
version: 1
backend: gloo
scenarios:
  - name: loaded
    topology: in-container
    world_size: 2
    checks: [env, libraries, environment]
"""


def _cases(image: str, tmp_path: Path, config_text: str = CONFIG) -> dict[str, dict[str, Any]]:
    config = tmp_path / "loaded.yaml"
    config.write_text(config_text)
    report = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, "-m", "distval", "run", str(config), "--image", image, "--json", str(report), "--quiet"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert report.exists(), done.stderr[-3000:]
    (scenario,) = json.loads(report.read_text())["scenarios"]
    return {case["name"]: case for case in scenario["cases"]}


@pytest.mark.parametrize(
    ("image", "least_names", "family"),
    [
        ("distval-fixtures/torch:1.13-debian", 200, "GLOO_SOCKET_IFNAME"),
        ("distval-fixtures/torch:2.6-debian", 300, "GLOO_SOCKET_IFNAME"),
        ("distval-fixtures/torch:2.15-pypi", 800, "NCCL_SOCKET_IFNAME"),  # libnccl's own strings are read too
    ],
)
def test_a_good_image_passes_with_the_names_its_libraries_read(
    image: str, least_names: int, family: str, fixture_image: Callable[[str], str], tmp_path: Path
) -> None:
    cases = _cases(fixture_image(image), tmp_path)
    assert (cases["libraries"]["status"], cases["environment"]["status"]) == ("passed", "passed"), cases
    print(f"{image}: {cases['libraries']['message']} | {cases['environment']['message']}")
    known = int(cases["environment"]["message"].split("; ")[-1].split()[0])
    assert known >= least_names


def test_a_library_first_on_ld_library_path_is_caught(fixture_image: Callable[[str], str], tmp_path: Path) -> None:
    cases = _cases(fixture_image("distval-fixtures/broken:libgomp-first-on-path"), tmp_path)
    assert cases["libraries"]["status"] == "failed"
    assert (
        "the packaged copy: libgomp.so.1: expected /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0 (dpkg:libgomp1); "
        "loaded /opt/shadow/libgomp.so.1 (no package's)" in cases["libraries"]["message"]
    )
    assert cases["environment"]["status"] == "passed"  # LD_LIBRARY_PATH is listed, not judged by name


def test_torchs_rpath_keeps_the_wheels_libnccl_whatever_ld_library_path_says(
    fixture_image: Callable[[str], str], tmp_path: Path
) -> None:
    """PyPI's torch has DT_RPATH $ORIGIN/../../nvidia/nccl/lib:..., searched before LD_LIBRARY_PATH: the copy in
    /opt/shadow is never mapped, and the check passes on what was really loaded."""
    cases = _cases(fixture_image("distval-fixtures/broken:libnccl-first-on-path"), tmp_path)
    assert cases["libraries"]["status"] == "passed", cases["libraries"]["message"]


def test_a_second_copy_of_a_library_is_caught(fixture_image: Callable[[str], str], tmp_path: Path) -> None:
    cases = _cases(fixture_image("distval-fixtures/broken:second-libgomp"), tmp_path)
    message = cases["libraries"]["message"]
    assert cases["libraries"]["status"] == "failed"
    assert (
        "one copy: libgomp.so.1: expected one copy; loaded /opt/vendor/libgomp.so.1 and "
        "/usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0" in message
    ), message


def test_torchs_libraries_that_no_package_owns_cannot_be_judged_and_fail(
    fixture_image: Callable[[str], str], tmp_path: Path
) -> None:
    """No package database owns libtorch*/libc10*: which copy is the packaged one cannot be told, so the check fails
    saying so (a pass would claim what was never judged)."""
    cases = _cases(fixture_image("distval-fixtures/broken:torch-libs-unowned"), tmp_path)
    message = cases["libraries"]["message"]
    assert cases["libraries"]["status"] == "failed", message
    assert "no package database (pip's RECORD, dpkg, conda-meta) owns torch's own libraries (libc10.so" in message, message
    assert "which copy of a library is the packaged one cannot be told" in message
    assert cases["env"]["status"] == "passed"  # torch itself works: only the judgement is impossible


def test_a_misspelt_and_a_harmful_variable_baked_into_the_image_fail(fixture_image: Callable[[str], str], tmp_path: Path) -> None:
    cases = _cases(fixture_image("distval-fixtures/broken:env-misspelt-harmful"), tmp_path)
    message = cases["environment"]["message"]
    assert cases["environment"]["status"] == "failed"
    assert "GLOO_SOCKET_IFNAM (image) is read by nothing in this image; did you mean GLOO_SOCKET_IFNAME?" in message
    assert "NCCL_ALGO=Tree (image) decides the collectives' algorithm" in message
    assert "CCL_NET_GDR_LEVEL (/etc/nccl.conf) is read by nothing in this image; did you mean NCCL_NET_GDR_LEVEL?" in message
    assert cases["libraries"]["status"] == "passed"


def test_allowed_names_pass_and_a_harmful_one_can_be_only_a_warning(fixture_image: Callable[[str], str], tmp_path: Path) -> None:
    config = CONFIG.replace(
        "checks: [env, libraries, environment]",
        "checks: [env, {name: environment, args: {allow: [GLOO_SOCKET_IFNAM, CCL_NET_GDR_LEVEL], harmful_verdict: warn}}]",
    )
    cases = _cases(fixture_image("distval-fixtures/broken:env-misspelt-harmful"), tmp_path, config)
    environment = cases["environment"]
    assert environment["status"] == "passed", environment["message"]
    assert "harmful ones only warned" in environment["message"]
    assert "warning: NCCL_ALGO=Tree (image) decides" in environment["message"]
    listed = {v["name"]: v for v in environment["details"]["variables"]}
    assert listed["NCCL_ALGO"]["value"] == "Tree" and listed["CCL_NET_GDR_LEVEL"]["source"] == "/etc/nccl.conf"
