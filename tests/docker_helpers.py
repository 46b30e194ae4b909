"""What the Docker (and host) test modules share: the good images' expected verdicts, reading JUnit
reports, finding leftovers, providing fixture images, and skipping (or failing) what cannot run here.

A plain module (not a test module, not conftest): test modules import from here, never from each other.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tarfile
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import pytest
import tomllib

from distval.config import load_config
from distval.errors import DistvalError
from distval.images import FIXTURES
from distval.targets.engines.planning import plan_run
from tests.paths import ROOT, SCHEMAS

DEFAULT_CONFIG = str(ROOT / "configs" / "default.yaml")
SCHEMA = SCHEMAS / "junit-10.xsd"
TOPOLOGIES = ("in-container", "cross-container")
# The default config's scenarios by layout_key: one per topology, and across containers 2 x 2 beside 2 x 1.
DEFAULT_LAYOUTS = (*TOPOLOGIES, "cross-container 2x2")


def layout_key(suite: str) -> str:
    """A JUnit suite's topology, ``[image] name (cross-container, 2x1, 2 ranks, static)`` -> ``cross-container``, with
    the layout added where a container holds several ranks across containers (``cross-container 2x2``)."""
    fields = suite.split("(")[-1].rstrip(")").split(", ")
    several = fields[0] == "cross-container" and len(fields) > 1 and "x" in fields[1] and not fields[1].endswith("x1")
    return f"{fields[0]} {fields[1]}" if several else fields[0]


# The good torch images: the checks each one skips (and must skip) in the default config, and the
# timeout path its torch takes. The host-mode tests hold torch 2.15 on the host to the same verdicts.
GOOD = {
    "distval-fixtures/torch:1.13-debian": (
        # gloo in 1.13 has no bfloat16: every collective with a bfloat16 part is partially skipped, and a
        # partial skip is a skip (issue 19), with the correct runs of the other dtypes in its message.
        {
            "collectives.all_gather_into_tensor",
            "collectives.reduce_scatter",
            "collectives.all_to_all",
            "collectives.all_reduce.avg",
            "collectives.all_reduce.sum",
            "collectives.all_reduce.max",
            "collectives.all_reduce.min",
            "collectives.all_reduce.product",
            "collectives.broadcast",
            "collectives.reduce",
            "collectives.all_gather",
            "collectives.gather",
            "collectives.scatter",
            "reconfigure",
        },
        "new_group(timeout=...)",
    ),
    "distval-fixtures/torch:2.6-debian": (
        {"collectives.reduce_scatter", "collectives.all_to_all", "collectives.all_reduce.avg", "reconfigure"},
        "new_group(timeout=...)",
    ),
    "distval-fixtures/torch:2.15-pypi": (set(), "set_timeout() on a live group"),
}


def unavailable(config: pytest.Config, reason: str) -> NoReturn:
    """Skip the test for a reason of this machine; a failure with --require-docker (CI: everything must run)."""
    if config.getoption("--require-docker"):
        pytest.fail(f"--require-docker: {reason}", pytrace=False)
    pytest.skip(reason)


# -- JUnit reports ----------------------------------------------------------------------------------
def validate(path: Path) -> ET.Element:
    """The report's root, after checking it against the Jenkins JUnit schema that CI tools read."""
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    document = etree.parse(str(path))
    assert schema.validate(document), schema.error_log
    return ET.parse(path).getroot()


def cases(root: ET.Element) -> dict[tuple[str, str], ET.Element]:
    """Every testcase by (suite name without its leading ``[<image>] ``, case name): a test that runs several
    images keys them alike (tests/reports/test_junit.py checks the image part of the names)."""
    return {
        (re.sub(r"^\[[^\]]*\] ", "", suite.get("name", "")), case.get("name", "")): case
        for suite in root.iter("testsuite")
        for case in suite.iter("testcase")
    }


def outcome(case: ET.Element) -> tuple[str, str]:
    """("failure" | "error" | "skipped", message), or ("passed", "")."""
    for tag in ("failure", "error", "skipped"):
        child = case.find(tag)
        if child is not None:
            return tag, child.get("message", "")
    return "passed", ""


# -- the Engine -------------------------------------------------------------------------------------
def leftovers(client: object, run_id: str | None = None) -> list[str]:
    """Names of containers and networks labelled distval.managed=true (of one run, if given)."""
    labels = ["distval.managed=true"] + ([f"distval.run={run_id}"] if run_id else [])
    # The low-level list calls: docker-py's high-level containers.list() inspects each container after
    # listing it and raises NotFound for one removed in between (a run cleaning up while a test polls).
    api = client.api  # type: ignore[attr-defined]
    containers = api.containers(all=True, filters={"label": labels})
    networks = api.networks(filters={"label": labels})
    return [str(c["Names"][0]).lstrip("/") for c in containers] + [str(n["Name"]) for n in networks]


def config_images(path: str) -> list[str]:
    """The images a scenario file runs when no --image overrides them, as the plan has them."""
    return plan_run(load_config(path), "images").images


# -- fixture images ---------------------------------------------------------------------------------
class FixtureUnavailable(Exception):
    """A fixture image cannot be built here (no mmdebstrap, no network for the first download, ...)."""


class FixtureImages:
    """Builds each requested fixture image (with its parents) when missing or stale, once per session.

    ``build`` is ``distval.images.build_fixtures`` bound to an Engine. Requests are serialised: two
    builds at once would only compete for the same CPUs and download the same files. A tag that failed
    to build fails again at once, with the first reason, instead of retrying for every test.
    """

    def __init__(self, build: Callable[[list[str]], object]) -> None:
        self._build = build
        self._lock = threading.Lock()
        self._problems: dict[str, str | None] = {}  # tag -> None once current, else why it cannot be built

    def __call__(self, tag: str) -> str:
        if tag not in FIXTURES:
            raise ValueError(f"{tag} is not a fixture image (distval.images.FIXTURES)")
        with self._lock:
            if tag not in self._problems:
                try:
                    self._build([tag])
                    self._problems[tag] = None
                except DistvalError as exc:
                    self._problems[tag] = f"fixture image {tag} cannot be built here: {exc}"
            problem = self._problems[tag]
        if problem is not None:
            raise FixtureUnavailable(problem)
        return tag


def harness_requirements() -> list[str]:
    """What an offline build of the harness image installs: pyproject's dependencies and its build backend's. Read
    from pyproject.toml, never listed by hand: a list typed here missed cryptography (attest and verify) and the
    harness image stopped building."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        project = tomllib.load(handle)
    return [*project["project"]["dependencies"], *project["build-system"]["requires"]]


def harness_context(tmp_path: Path) -> bytes:
    """The repository's build context plus the wheels an offline build needs, as a tar (the Dockerfile's recipe)."""
    wheels = tmp_path / "wheels"
    platforms = [arg for minor in range(17, 37) for arg in ("--platform", f"manylinux_2_{minor}_x86_64")]
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--python-version", "3.13",
         "--implementation", "cp", "--platform", "any", *platforms, "-d", str(wheels), *harness_requirements()],
        check=True,
        timeout=300,
    )  # fmt: skip
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name in ("Dockerfile", "pyproject.toml", "README.md", "distval", "distval_suite", "configs"):
            archive.add(ROOT / name, arcname=name, filter=lambda info: None if "__pycache__" in info.name else info)
        archive.add(wheels, arcname="wheels")
    return buffer.getvalue()
